//! `src/lib.rs` read for the house: its numbered list of the top-level
//! modules, in order, and the modules it declares.

use std::collections::BTreeSet;

use super::scan::{blank_comments_and_literals, tokens};

/// The modules of `lib.rs`'s numbered list (`//! 3. [`name`]: ...`), in order.
pub(super) fn listed_order(lib: &str) -> Vec<String> {
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
pub(super) fn declared_modules(lib: &str) -> BTreeSet<String> {
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
