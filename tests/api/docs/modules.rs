//! docs/architecture.md's module map is `src/lib.rs`'s: the same modules in
//! the same (dependency) order, and every source file or folder it names
//! is there.

use std::path::Path;

/// The names of a numbered list's entries: "N. `name`" (markdown) or
/// "//! N. [`name`]" (lib.rs's doc comment), in order.
fn numbered(text: &str, doc_comment: bool) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let line = if doc_comment {
                line.strip_prefix("//! ")?
            } else {
                line
            };
            let (number, rest) = line.split_once(". ")?;
            number.parse::<u32>().ok()?;
            let rest = rest.strip_prefix('[').unwrap_or(rest);
            let name = rest.strip_prefix('`')?.split('`').next()?;
            Some(name.to_owned())
        })
        .collect()
}

pub(crate) fn modules(root: &Path) -> Vec<String> {
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap_or_default();
    let (lib, page) = (read("src/lib.rs"), read("docs/architecture.md"));
    let map = page
        .split("## The module map")
        .nth(1)
        .and_then(|m| m.split("\n## ").next())
        .unwrap_or("");
    let mut errors = Vec::new();
    let (code, doc) = (numbered(&lib, true), numbered(map, false));
    if code.is_empty() || code != doc {
        errors.push(format!(
            "docs/architecture.md's module map lists {doc:?}; src/lib.rs lists {code:?}"
        ));
    }
    // Every `folder/file.rs` or `folder/sub/` in backticks in the map, read
    // from the repository, src/, the entry's module folder or the lock
    // crate's src/, is there.
    let mut module = String::new();
    for line in map.lines() {
        if let Some(name) = numbered(line, false).pop() {
            module = name;
        }
        for (i, token) in line.split('`').enumerate() {
            // A path with a folder in it (a bare file name is read in the
            // entry's own words, not checked).
            let path_like = (token.ends_with(".rs") || token.ends_with('/'))
                && token.trim_end_matches('/').contains('/')
                && !token.contains(' ');
            if i % 2 == 0 || !path_like {
                continue;
            }
            let there = [
                root.to_path_buf(),
                root.join("src"),
                root.join("src").join(&module),
                root.join("crates/stocklock-lock/src"),
            ]
            .iter()
            .any(|base| base.join(token).exists());
            if !there {
                errors.push(format!(
                    "docs/architecture.md's module map names `{token}` (under `{module}`), which is not in src/"
                ));
            }
        }
    }
    errors
}
