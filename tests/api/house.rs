//! The house keeps its shape. `src/lib.rs`'s doc comment lists the
//! top-level modules in dependency order (`N. [`name`]: ...`); this test
//! reads that list and every `crate::`, `super::` and `self::` path in
//! `src/**/*.rs` (comments and string literals blanked first, `use` groups
//! expanded), and fails on an import of a module listed after the importer,
//! on a module missing from the list or listed but not declared, on a
//! circle between the submodules of any module at any depth, and on a
//! source file over 450 lines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use scan::{Import, blank_comments_and_literals, imports_of, tokens};

mod scan;

/// The house rule for the length of a source file.
const MAX_LINES: usize = 450;

#[test]
fn modules_import_only_modules_listed_before_them() {
    let problems = problems(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(
        problems.is_empty(),
        "the house lost its shape:\n{}",
        problems.join("\n")
    );
}

/// The lock library (`crates/stocklock-lock`) keeps the house's file
/// length too.
#[test]
fn the_lock_library_keeps_its_files_short() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/stocklock-lock/src");
    let files = rust_files(&src);
    assert!(
        files.len() > 10,
        "the library's sources not found in {src:?}"
    );
    let long: Vec<String> = files
        .iter()
        .filter_map(|file| {
            let lines = std::fs::read_to_string(file).ok()?.lines().count();
            (lines > MAX_LINES).then(|| format!("{}: {lines} lines", file.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "over the house's {MAX_LINES}:\n{}",
        long.join("\n")
    );
}

/// Each rule, broken once in a small crate of its own, is reported with
/// the file, the line and the path.
#[test]
fn each_rule_is_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let write = |path: &str, text: &str| {
        let path = src.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "lib.rs",
        "//! 1. [`low`]: below.\n//! 2. [`high`]: above.\n//! 3. [`gone`]: never declared.\n\
         pub mod high;\npub mod low;\npub mod stray;\n",
    );
    write("low.rs", "use crate::high::Thing;\n");
    write(
        "high/mod.rs",
        "mod a;\nmod b;\nmod deep;\npub struct Thing;\n",
    );
    // Two levels down: `high::deep::x` and `high::deep::y` import each
    // other; `deep`'s own file using both is no circle.
    write("high/deep/mod.rs", "mod x;\nmod y;\nuse self::x::X;\n");
    write("high/deep/x.rs", "pub struct X(super::y::Y);\n");
    write(
        "high/deep/y.rs",
        "pub struct Y(Box<crate::high::deep::x::X>);\n",
    );
    write("high/a.rs", "use super::b::B;\npub struct A;\n");
    write("high/b.rs", "pub struct B(crate::high::a::A);\n");
    write("stray.rs", &"// a line\n".repeat(451));
    let found = problems(&src).join("\n");
    for expected in [
        "src/low.rs:1: `crate::high::Thing`: `low` (no. 1) imports `high` (no. 2), listed after it",
        "src/lib.rs: module `stray` is declared but missing from the numbered list",
        "src/lib.rs: `gone` is listed but no such module is declared",
        "a circle inside `high`: high::a, high::b",
        "src/high/a.rs:1: `super::b::B` (a -> b)",
        "src/high/b.rs:1: `crate::high::a::A` (b -> a)",
        "a circle inside `high::deep`: high::deep::x, high::deep::y",
        "src/high/deep/x.rs:1: `super::y::Y` (x -> y)",
        "src/high/deep/y.rs:1: `crate::high::deep::x::X` (y -> x)",
        "src/stray.rs: 451 lines, over the house's 450",
    ] {
        assert!(found.contains(expected), "no {expected:?} in:\n{found}");
    }
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

/// The modules of `lib.rs`'s numbered list (`//! 3. [`name`]: ...`), in order.
fn listed_order(lib: &str) -> Vec<String> {
    let mut order = Vec::new();
    for line in lib.lines() {
        let Some(doc) = line.strip_prefix("//!") else {
            continue;
        };
        let doc = doc.trim_start();
        let digits = doc.chars().take_while(char::is_ascii_digit).count();
        let Some(rest) = doc[digits..].strip_prefix(". [`").filter(|_| digits > 0) else {
            continue;
        };
        let name = rest.split('`').next().unwrap_or_default().to_owned();
        assert_eq!(
            doc[..digits].parse::<usize>().unwrap(),
            order.len() + 1,
            "src/lib.rs: the list's numbers run 1, 2, 3, ... (at `{name}`)"
        );
        assert!(
            !order.contains(&name),
            "src/lib.rs: `{name}` is listed twice"
        );
        order.push(name);
    }
    assert!(!order.is_empty(), "src/lib.rs: no numbered list of modules");
    order
}

/// The modules `lib.rs` declares (`pub mod name;`).
fn declared_modules(lib: &str) -> BTreeSet<String> {
    let code = blank_comments_and_literals(lib);
    let tokens = tokens(&code);
    let mut names = BTreeSet::new();
    for (at, token) in tokens.iter().enumerate() {
        if token.text == "mod" && tokens.get(at + 2).is_some_and(|t| t.text == ";") {
            names.insert(tokens[at + 1].text.clone());
        }
    }
    names
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

/// Submodule circles inside every module with children, at any depth:
/// the graph of imports between `p::a` and `p::b` (files of `p::a/**`
/// count as `p::a`; `p`'s own items are left out, since every child may
/// use its parent, and so is `p`'s own file using its children). An
/// import belongs to the module where the importer's path and the
/// target's part: `crate::explore::run` imported in `src/explore/strike.rs`
/// is an edge `strike -> run` inside `explore`.
fn circles(src: &Path, imports: &[Import]) -> Vec<String> {
    let root = src.parent().expect("src has a parent");
    let mut edges: BTreeMap<(String, String, String), Vec<&Import>> = BTreeMap::new();
    for import in imports {
        let Some(from) = module_of(src, &root.join(&import.file)) else {
            continue;
        };
        let to = &import.target;
        let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
        let (Some(from_child), Some(to_child)) = (from.get(common), to.get(common)) else {
            continue;
        };
        let parent = &from[..common];
        let folder = parent
            .iter()
            .fold(src.to_path_buf(), |dir, part| dir.join(part));
        let is_child = folder.join(format!("{to_child}.rs")).is_file()
            || folder.join(to_child).join("mod.rs").is_file();
        // (The top level's order is the numbered list's rule.)
        if common == 0 || !is_child {
            continue;
        }
        edges
            .entry((parent.join("::"), from_child.clone(), to_child.clone()))
            .or_default()
            .push(import);
    }
    let mut found = Vec::new();
    let parents: BTreeSet<&String> = edges.keys().map(|(parent, _, _)| parent).collect();
    for top in parents {
        let graph: BTreeMap<&str, Vec<&str>> = edges.keys().filter(|(t, _, _)| t == top).fold(
            BTreeMap::new(),
            |mut graph, (_, from, to)| {
                graph.entry(from.as_str()).or_default().push(to.as_str());
                graph
            },
        );
        for group in strongly_connected(&graph) {
            let mut lines = vec![format!(
                "a circle inside `{top}`: {}",
                group
                    .iter()
                    .map(|n| format!("{top}::{n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )];
            for ((_, from, to), sites) in edges.iter().filter(|((t, from, to), _)| {
                t == top && group.contains(&from.as_str()) && group.contains(&to.as_str())
            }) {
                for site in sites {
                    lines.push(format!(
                        "  {}:{}: `{}` ({from} -> {to})",
                        site.file, site.line, site.written
                    ));
                }
            }
            found.push(lines.join("\n"));
        }
    }
    found
}

/// The groups of two or more nodes that reach each other (Tarjan's SCCs).
fn strongly_connected<'a>(graph: &BTreeMap<&'a str, Vec<&'a str>>) -> Vec<Vec<&'a str>> {
    struct Walk<'a, 'g> {
        graph: &'g BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        groups: Vec<Vec<&'a str>>,
    }
    impl<'a> Walk<'a, '_> {
        fn visit(&mut self, node: &'a str) {
            let at = self.index.len();
            self.index.insert(node, at);
            self.low.insert(node, at);
            self.stack.push(node);
            for &next in self.graph.get(node).into_iter().flatten() {
                if !self.index.contains_key(next) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next]);
                    self.low.insert(node, low);
                } else if self.stack.contains(&next) {
                    let low = self.low[node].min(self.index[next]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let from = self.stack.iter().rposition(|&n| n == node).unwrap();
                let mut group = self.stack.split_off(from);
                if group.len() > 1 {
                    group.sort();
                    self.groups.push(group);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        groups: Vec::new(),
    };
    for &node in graph.keys() {
        if !walk.index.contains_key(node) {
            walk.visit(node);
        }
    }
    walk.groups
}

/// The reader itself: groups expanded, `super::` resolved from inline
/// modules, comments, doc comments, strings and `$crate` left out.
#[test]
fn the_reader_sees_every_path_and_nothing_else() {
    let source = r####"
//! [`crate::doc_link`] and // crate::in_a_comment
use crate::{a, b::{c, d as e}, f::{self, *}};
pub(crate) use super::g::H;
/* crate::blocked /* nested */ crate::still_blocked */
fn body() {
    let s = "crate::in_a_string"; let r = r#"crate::raw"#; let c = '"';
    crate::inline::call(); $crate::macro_path; let t = 'a'; x::crate_not;
}
#[cfg(test)]
mod tests {
    use super::*;
    use super::super::sibling::Thing;
}
"####;
    let found: Vec<(String, usize)> =
        imports_of("src/m/sub.rs", &["m".into(), "sub".into()], source)
            .into_iter()
            .map(|import| (import.target.join("::"), import.line))
            .collect();
    let expected = [
        ("a", 3),
        ("b::c", 3),
        ("b::d", 3),
        ("f", 3),
        ("f::*", 3),
        ("m::g::H", 4),
        ("inline::call", 8),
        ("m::sub::*", 12),
        ("m::sibling::Thing", 13),
    ];
    let expected: Vec<(String, usize)> = expected
        .iter()
        .map(|&(path, line)| (path.to_owned(), line))
        .collect();
    assert_eq!(found, expected);
    assert_eq!(
        blank_comments_and_literals("a /* b */ 'c' \"d\" e").trim_end(),
        "a                 e"
    );
}
