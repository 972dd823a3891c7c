//! The house keeps its shape. `src/lib.rs`'s doc comment lists the
//! top-level modules in dependency order (`N. [`name`]: ...`); this test
//! reads that list and every `crate::`, `super::` and `self::` path in
//! `src/**/*.rs` (comments and string literals blanked first, `use` groups
//! expanded), and fails on an import of a module listed after the importer,
//! on a module missing from the list or listed but not declared, on a
//! circle between the submodules of any module at any depth, and on a
//! source file over 400 lines (any Rust file of the repository's: `src/`,
//! the lock library's, the tests').
//!
//! This file: the tests of the house and every problem found;
//! `scan.rs`: the reading of Rust source; `order.rs`: `lib.rs`'s list and
//! declarations; `circles.rs`: circles between submodules;
//! `self_check.rs`: each rule broken on purpose, and the reader itself.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use circles::circles;
use order::{declared_modules, listed_order};
use scan::imports_of;

mod circles;
mod order;
mod scan;
mod self_check;

/// The house rule for the length of a source file.
const MAX_LINES: usize = 400;

#[test]
fn modules_import_only_modules_listed_before_them() {
    let problems = problems(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(
        problems.is_empty(),
        "the house lost its shape:\n{}",
        problems.join("\n")
    );
}

/// Every Rust file of the repository keeps the house's length: the
/// application's `src/` (also checked with the rest of its rules above),
/// the lock library's sources, tests and examples, and the test suite.
#[test]
fn every_rust_file_keeps_the_houses_length() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut long = Vec::new();
    for dir in [
        "src",
        "tests",
        "crates/stocklock-lock/src",
        "crates/stocklock-lock/examples",
    ] {
        let files = rust_files(&root.join(dir));
        assert!(!files.is_empty(), "no Rust files found in {dir}");
        long.extend(files.iter().filter_map(|file| {
            let lines = std::fs::read_to_string(file).ok()?.lines().count();
            (lines > MAX_LINES).then(|| format!("{}: {lines} lines", file.display()))
        }));
    }
    assert!(
        long.is_empty(),
        "over the house's {MAX_LINES}:\n{}",
        long.join("\n")
    );
}

/// Every way the crate under `src` breaks the house's rules.
fn problems(src: &Path) -> Vec<String> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("read src/lib.rs");
    let order = listed_order(&lib);
    let declared = declared_modules(&lib);
    let mut problems = Vec::new();

    let listed: BTreeSet<&String> = order.iter().collect();
    for name in &declared {
        if !listed.contains(name) {
            problems.push(format!(
                "src/lib.rs: module `{name}` is declared but missing from the numbered list"
            ));
        }
    }
    for name in &order {
        if !declared.contains(name) {
            problems.push(format!(
                "src/lib.rs: `{name}` is listed but no such module is declared"
            ));
        }
    }
    let rank: BTreeMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(at, name)| (name.as_str(), at + 1))
        .collect();

    let mut imports = Vec::new();
    for file in rust_files(src) {
        let text = std::fs::read_to_string(&file).expect("read a source file");
        let shown = file
            .strip_prefix(src.parent().unwrap())
            .unwrap()
            .display()
            .to_string();
        let lines = text.lines().count();
        if lines > MAX_LINES {
            problems.push(format!(
                "{shown}: {lines} lines, over the house's {MAX_LINES}"
            ));
        }
        if let Some(module) = module_of(src, &file) {
            imports.extend(imports_of(&shown, &module, &text));
        }
    }

    for import in &imports {
        let (from, to) = (top_of(&import.file), import.target[0].as_str());
        let (Some(&at), Some(&target)) = (rank.get(from.as_str()), rank.get(to)) else {
            continue;
        };
        if target > at {
            problems.push(format!(
                "{}:{}: `{}`: `{from}` (no. {at}) imports `{to}` (no. {target}), listed after it",
                import.file, import.line, import.written
            ));
        }
    }
    problems.extend(circles(src, &imports));
    problems
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read a source directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// The module path of a library file (`src/lab/judge/mod.rs`: lab, judge);
/// `None` for `main.rs`, the binary, which sees the library as `stocklock`.
fn module_of(src: &Path, file: &Path) -> Option<Vec<String>> {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    match parts.last().map(String::as_str) {
        Some("main") if parts.len() == 1 => return None,
        Some("lib") if parts.len() == 1 => parts.clear(),
        Some("mod") => {
            parts.pop();
        }
        _ => {}
    }
    Some(parts)
}

/// The top-level module a file (`src/lab/report.rs`) belongs to (`lab`).
fn top_of(file: &str) -> String {
    let inner = file.strip_prefix("src/").unwrap_or(file);
    let first = inner.split('/').next().unwrap_or_default();
    first.trim_end_matches(".rs").to_owned()
}
