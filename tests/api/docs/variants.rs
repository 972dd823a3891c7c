//! Every variant, everywhere a page claims to list them all: a table whose
//! first header cell is `variant`, or a list after `<!-- every variant -->`.

use std::collections::BTreeSet;

use stocklock::variants::Variant;

use super::Page;
use super::markdown::{self, Line};

/// Every table whose first header cell is `variant` has one row per
/// variant of `Variant::ALL`; every list after `<!-- every variant -->`
/// names each in backticks.
pub(crate) fn variants(pages: &[Page]) -> Vec<String> {
    let names: BTreeSet<String> = Variant::names().into_iter().collect();
    let mut errors = Vec::new();
    for page in pages {
        let lines = markdown::lines(&page.text);
        for table in markdown::tables(&lines) {
            let first = table
                .header
                .first()
                .map(|c| c.replace('`', "").trim().to_lowercase());
            if first.as_deref() != Some("variant") {
                continue;
            }
            let rows: Vec<String> = table
                .rows
                .iter()
                .map(|(_, cells)| markdown::cell_name(cells.first().map_or("", |c| c)))
                .collect();
            let at = format!("{}:{}", page.path.display(), table.line);
            let missing: Vec<&String> = names.iter().filter(|n| !rows.contains(n)).collect();
            if !missing.is_empty() {
                errors.push(format!(
                    "{at}: the variant table has no row for {missing:?}"
                ));
            }
            for (row, (number, _)) in rows.iter().zip(&table.rows) {
                if !names.contains(row) {
                    errors.push(format!(
                        "{}:{number}: `{row}` is not a variant",
                        page.path.display()
                    ));
                } else if rows.iter().filter(|r| *r == row).count() > 1 {
                    errors.push(format!(
                        "{}:{number}: `{row}` has more than one row",
                        page.path.display()
                    ));
                }
            }
        }
        for (i, line) in lines.iter().enumerate() {
            if line.code.is_some() || line.text.trim() != "<!-- every variant -->" {
                continue;
            }
            let list = list_after(&lines[i + 1..]);
            let named = markdown::code_words(&list);
            let missing: Vec<&String> = names.iter().filter(|n| !named.contains(n)).collect();
            if list.trim().is_empty() {
                errors.push(format!(
                    "{}:{}: no list follows `<!-- every variant -->`",
                    page.path.display(),
                    line.number
                ));
            } else if !missing.is_empty() {
                errors.push(format!(
                    "{}:{}: the list of every variant leaves out {missing:?}",
                    page.path.display(),
                    line.number
                ));
            }
        }
    }
    errors
}

/// The list (or paragraph) right after a marker: up to the first blank
/// line that is not followed by another item or an indented line.
fn list_after(lines: &[Line<'_>]) -> String {
    let item = |text: &str| {
        let t = text.trim_start();
        t.starts_with("- ")
            || t.starts_with("* ")
            || t.starts_with("+ ")
            || t.split_once(". ")
                .is_some_and(|(n, _)| n.chars().all(|c| c.is_ascii_digit()) && !n.is_empty())
    };
    let mut out = String::new();
    let mut started = false;
    for (i, line) in lines.iter().enumerate() {
        if line.text.trim().is_empty() {
            let next = lines[i + 1..].iter().find(|l| !l.text.trim().is_empty());
            if started && !next.is_some_and(|l| item(l.text) || l.text.starts_with("  ")) {
                break;
            }
            continue;
        }
        if started && markdown::heading(line.text).is_some() {
            break;
        }
        started = true;
        out.push_str(line.text);
        out.push('\n');
    }
    out
}
