//! The docs are tested: README.md, the other Markdown files at the root
//! and every page under docs/ are read (no server is started) and checked
//! against the repository and the code:
//! - every relative link and image resolves, anchors included;
//! - every `stocklock CMD --flag` shown exists in clap's command tree;
//! - every variant table and "every variant" list names each variant;
//! - every included file and generated region (the CLI reference, the
//!   lab matrix) is what it must be. `STOCKLOCK_BLESS=1 cargo test --test
//!   api docs::` rewrites those regions instead of failing.
//!
//! `fixtures.rs` shows each check failing on a small bad page first.

mod checks;
mod counts;
mod fixtures;
mod generated;
mod markdown;
mod modules;
mod variants;

use std::path::{Path, PathBuf};

use clap::CommandFactory;
use stocklock::cli::Cli;

/// A Markdown file, its path relative to the repository's root.
pub(crate) struct Page {
    pub(crate) path: PathBuf,
    pub(crate) text: String,
}

/// The pages under test: the root's *.md files and docs/**/*.md.
pub(crate) fn pages(root: &Path) -> Vec<Page> {
    let mut paths = Vec::new();
    markdown_files(root, root, false, &mut paths);
    markdown_files(root, &root.join("docs"), true, &mut paths);
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(root.join(&path))
                .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
            Page { path, text }
        })
        .collect()
}

fn markdown_files(root: &Path, dir: &Path, deep: bool, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() && deep {
            markdown_files(root, &path, deep, out);
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path.strip_prefix(root).expect("under the root").to_owned());
        }
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The command tree, built (help flags and bin names in place).
fn cli() -> clap::Command {
    let mut cli = Cli::command();
    cli.build();
    cli
}

fn assert_none(errors: Vec<String>, what: &str) {
    assert!(
        errors.is_empty(),
        "{what} ({}):\n{}",
        errors.len(),
        errors.join("\n")
    );
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let root = root();
    assert_none(checks::links(&root, &pages(&root)), "broken links");
}

#[test]
fn every_command_shown_uses_only_flags_that_exist() {
    assert_none(
        checks::commands(&cli(), &pages(&root())),
        "commands the CLI does not have",
    );
}

#[test]
fn every_variant_table_and_list_names_every_variant() {
    assert_none(
        variants::variants(&pages(&root())),
        "variant tables and lists",
    );
}

#[test]
fn the_architecture_pages_module_map_is_lib_rs() {
    assert_none(modules::modules(&root()), "the module map");
}

#[test]
fn counts_in_prose_are_the_codes() {
    assert_none(counts::counts(&root()), "counts in prose");
}

/// Includes and generated regions in one test, so that blessing writes
/// each page once.
#[test]
fn includes_and_generated_regions_are_current() {
    let root = root();
    let pages = pages(&root);
    let bless = std::env::var("STOCKLOCK_BLESS").is_ok_and(|v| v == "1");
    let (errors, rewritten) = generated::regions(&root, &cli(), &pages, bless);
    for (index, text) in rewritten {
        let path = root.join(&pages[index].path);
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        eprintln!("blessed {}", pages[index].path.display());
    }
    assert_none(errors, "stale regions");
}
