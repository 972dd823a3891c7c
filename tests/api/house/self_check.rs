//! The house test checked itself: each rule broken once in a small crate
//! of its own, and the reader of Rust source on a sample.

use super::problems;
use super::scan::{blank_comments_and_literals, imports_of};

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
    write("stray.rs", &"// a line\n".repeat(401));
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
        "src/stray.rs: 401 lines, over the house's 400",
    ] {
        assert!(found.contains(expected), "no {expected:?} in:\n{found}");
    }
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
