//! Every sentence of the judges in Chinese too, by its text: each `said!`
//! and `said_of!` of the judges, the lab and what they read, whether or
//! not a test reaches it (`branches` reaches the ones the other tests do
//! not, and every judgement passes through [`said_in_both`] as it is made).

use std::path::Path;

use super::*;
use crate::wire::said::english_words;

/// The two string literals of each `said!(` and `said_of!(` in `source`.
fn literals(source: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for opening in ["said!(", "said_of!("] {
        for (at, _) in source.match_indices(opening) {
            let mut rest = &source[at + opening.len()..];
            let mut pair = Vec::new();
            while pair.len() < 2 {
                rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
                let Some(text) = rest.strip_prefix('"') else {
                    break;
                };
                let (literal, after) = literal(text);
                pair.push(literal);
                rest = after;
            }
            if let [en, zh] = &pair[..] {
                found.push((en.clone(), zh.clone()));
            }
        }
    }
    found
}

/// A string literal's text (`text` starts after its opening quote), with
/// its escapes and line continuations undone, and what follows it.
fn literal(text: &str) -> (String, &str) {
    let mut out = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return (out, &text[i + 1..]),
            '\\' => match chars.next() {
                Some((_, '\n')) => {
                    let rest = &text[i + 2..];
                    let skipped = rest.len() - rest.trim_start().len();
                    for _ in 0..skipped {
                        chars.next();
                    }
                }
                Some((_, 'n')) => out.push('\n'),
                Some((_, other)) => out.push(other),
                None => {}
            },
            c => out.push(c),
        }
    }
    (out, "")
}

/// A format string without its placeholders (`{n}`, `{:.2}`).
fn unformatted(text: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for c in text.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth = (depth as i32 - 1).max(0) as usize,
            c if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

fn sources(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// Every sentence written for the judges' evidence, whether or not a test
/// reaches it: the judges, the lab's plays and runner, the harness they
/// share, and the books' verdicts they read.
#[test]
fn every_sentence_written_for_the_evidence_has_its_chinese() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for dir in ["judge", "lab", "harness"] {
        sources(&root.join(dir), &mut files);
    }
    files.push(root.join("wire/reconciliation.rs"));
    files.push(root.join("pgstock/both.rs"));
    // Not this file: its own words are about the macros, not said with them.
    files.retain(|f| !f.ends_with("judge/tests/said.rs"));
    let allowed = allowed();
    let mut count = 0;
    for file in &files {
        let source = std::fs::read_to_string(file).unwrap();
        for (en, zh) in literals(&source) {
            count += 1;
            let said = Said {
                en: unformatted(&en),
                zh: unformatted(&zh),
            };
            let english = !english_words(&said.en).is_empty();
            let place = file.display();
            assert!(
                !english || !zh.trim().is_empty(),
                "{place}: no Chinese for {en:?}"
            );
            assert!(!english || zh != en, "{place}: {en:?} is its own Chinese");
            let stray = said.stray_english(&allowed);
            assert!(stray.is_empty(), "{place}: English {stray:?} in {zh:?}");
        }
    }
    assert!(count > 200, "only {count} sentences found");
}
