//! The checks that read the pages as they are: links and commands. Each
//! returns one message per fault, naming the file and line.

use std::path::{Component, Path, PathBuf};

use clap::Command;

use super::Page;
use super::markdown::{self, Line};

/// Every relative link, image and `<img src>`/`<a href>` resolves to a
/// file of the repository, and its anchor to a heading (or an explicit
/// `<a id>`/`<a name>`) of a Markdown target. External links are not fetched.
pub(crate) fn links(root: &Path, pages: &[Page]) -> Vec<String> {
    let mut errors = Vec::new();
    for page in pages {
        let lines = markdown::lines(&page.text);
        for paragraph in markdown::paragraphs(&lines) {
            let prose = paragraph.without_code();
            for (offset, target) in targets(&prose) {
                let line = paragraph.line_of(offset);
                if let Err(why) = resolve(root, page, &target) {
                    errors.push(format!(
                        "{}:{line}: link `{target}`: {why}",
                        page.path.display()
                    ));
                }
            }
        }
    }
    errors
}

/// Link targets in prose (code spans blanked): `[..](t)`, `![..](t)`,
/// `[ref]: t`, `src="t"`, `href="t"`; with their offsets.
fn targets(prose: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = prose[from..].find("](") {
        let start = from + at + 2;
        let mut depth = 0;
        let end = prose[start..]
            .char_indices()
            .find(|&(_, c)| match c {
                '(' => {
                    depth += 1;
                    false
                }
                ')' if depth == 0 => true,
                ')' => {
                    depth -= 1;
                    false
                }
                _ => c == '\n',
            })
            .map_or(prose.len(), |(i, _)| start + i);
        out.push((start, prose[start..end].to_owned()));
        from = end;
    }
    for (start, line) in prose.split('\n').scan(0, |offset, line| {
        let start = *offset;
        *offset += line.len() + 1;
        Some((start, line))
    }) {
        let trimmed = line.trim_start();
        if trimmed.starts_with('[')
            && let Some(close) = trimmed.find("]:")
        {
            let target = trimmed[close + 2..].trim();
            out.push((start, target.to_owned()));
        }
        let mut rest = line;
        while let Some(at) = rest.find('<') {
            rest = &rest[at + 1..];
            let tag = &rest[..rest.find('>').unwrap_or(rest.len())];
            for attribute in ["src=", "href="] {
                if let Some(value) = markdown::attribute_value(tag, attribute) {
                    out.push((start, value.to_owned()));
                }
            }
        }
    }
    out
}

fn resolve(root: &Path, page: &Page, target: &str) -> Result<(), String> {
    let target = target.trim();
    let target = match target.strip_prefix('<') {
        Some(rest) => rest.split('>').next().unwrap_or(""),
        None => target.split_whitespace().next().unwrap_or(""),
    };
    if target.contains("://") || target.starts_with("mailto:") {
        return Ok(());
    }
    let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
    let path = path.replace("%20", " ");
    let file = if path.is_empty() {
        root.join(&page.path)
    } else if let Some(absolute) = path.strip_prefix('/') {
        root.join(absolute)
    } else {
        root.join(page.path.parent().unwrap_or(Path::new("")))
            .join(&path)
    };
    let file = normalize(&file);
    if !file.starts_with(root) {
        return Err("points outside the repository".into());
    }
    if !file.exists() {
        return Err(format!(
            "no such file {}",
            file.strip_prefix(root).unwrap_or(&file).display()
        ));
    }
    let markdown = file.extension().is_some_and(|e| e == "md");
    if anchor.is_empty() || !markdown || file.is_dir() {
        return Ok(());
    }
    let text = std::fs::read_to_string(&file).map_err(|e| e.to_string())?;
    if markdown::anchors(&text).iter().any(|a| a == anchor) {
        Ok(())
    } else {
        Err(format!(
            "no heading or <a id> gives the anchor #{anchor} in {}",
            file.strip_prefix(root).unwrap_or(&file).display()
        ))
    }
}

/// `a/b/../c` → `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Info strings of the fenced blocks whose lines are commands or output.
const SHELL: [&str; 9] = [
    "",
    "sh",
    "bash",
    "shell",
    "console",
    "text",
    "zsh",
    "sh-session",
    "shell-session",
];

/// Every `stocklock CMD --flag` (also `target/release/stocklock`,
/// `./scripts/up.sh` for `up`, and a code span that starts with a
/// subcommand and a flag: `up --persist`) in code spans and shell or
/// text blocks names a subcommand and flags that exist in `cli`.
pub(crate) fn commands(cli: &Command, pages: &[Page]) -> Vec<String> {
    let mut errors = Vec::new();
    for page in pages {
        let lines = markdown::lines(&page.text);
        for paragraph in markdown::paragraphs(&lines) {
            for (offset, span) in paragraph.code_spans() {
                let at = format!("{}:{}", page.path.display(), paragraph.line_of(offset));
                check_command_line(cli, &span, true, true, &at, &mut errors);
            }
        }
        for (number, info, line) in block_commands(&lines) {
            let at = format!("{}:{number}", page.path.display());
            let strict = !["text", "console"].contains(&info);
            check_command_line(cli, &line, false, strict, &at, &mut errors);
        }
    }
    errors
}

/// The lines of shell and text blocks, continuation lines (`\`) joined.
fn block_commands<'a>(lines: &[Line<'a>]) -> Vec<(usize, &'a str, String)> {
    let mut out: Vec<(usize, &str, String)> = Vec::new();
    let mut continued = false;
    for line in lines
        .iter()
        .filter(|l| !l.fence && l.code.is_some_and(|info| SHELL.contains(&info)))
    {
        let text = line.text.trim();
        let (text, continues) = match text.strip_suffix('\\') {
            Some(text) => (text, true),
            None => (text, false),
        };
        match out.last_mut() {
            Some((_, _, last)) if continued => {
                last.push(' ');
                last.push_str(text);
            }
            _ => out.push((line.number, line.code.unwrap_or(""), text.to_owned())),
        }
        continued = continues;
    }
    out
}

/// The flags `scripts/up.sh` takes itself before handing the rest to `up`.
const UP_SH: [&str; 1] = ["minimal"];

/// Words before a command that leave it the command.
const PREFIXES: [&str; 6] = ["$", "sudo", "exec", "time", "nohup", "env"];

/// Checks the commands on one line (or code span). `strict`: a word after
/// `stocklock` that is no subcommand is an error (in shell blocks and code
/// spans; in text blocks it is output, `stocklock is up: URL`).
fn check_command_line(
    cli: &Command,
    line: &str,
    span: bool,
    strict: bool,
    at: &str,
    errors: &mut Vec<String>,
) {
    let words: Vec<&str> = line.split_whitespace().collect();
    let words = &words[..words
        .iter()
        .position(|w| w.starts_with('#'))
        .unwrap_or(words.len())];
    for (index, command) in words
        .split(|w| ["|", "||", "&&", ";", "&"].contains(w))
        .enumerate()
    {
        let start = command
            .iter()
            .position(|w| !PREFIXES.contains(w) && !is_assignment(w))
            .unwrap_or(command.len());
        let command = &command[start..];
        let Some((&first, rest)) = command.split_first() else {
            continue;
        };
        if first == "cargo" && rest.first() == Some(&"test") {
            check_cargo_test(&rest[1..], at, errors);
            continue;
        }
        let mut script: &[&str] = &[];
        let (sub, flags) = if first == "stocklock" || first.ends_with("/stocklock") {
            match rest.split_first() {
                Some((&sub, flags)) => (sub, flags),
                None => continue,
            }
        } else if first == "./scripts/up.sh" || first == "scripts/up.sh" {
            script = &UP_SH;
            ("up", rest)
        } else if span
            && index == 0
            && cli.find_subcommand(first).is_some()
            && rest.first().is_some_and(|w| w.starts_with("--"))
        {
            (first, rest)
        } else if let Some(at) = command
            .iter()
            .position(|w| *w == "stocklock" || w.ends_with("/stocklock"))
        {
            // `docker compose exec a stocklock load ...`: only a known subcommand counts.
            match command.get(at + 1) {
                Some(&sub) if cli.find_subcommand(sub).is_some() => (sub, &command[at + 2..]),
                _ => continue,
            }
        } else {
            continue;
        };
        check_flags(cli, sub, flags, script, strict, at, errors);
    }
}

/// cargo's options for `cargo test` that take a value (the next word).
const CARGO_VALUES: [&str; 16] = [
    "--test",
    "--bin",
    "--example",
    "--bench",
    "-p",
    "--package",
    "--features",
    "-F",
    "--target",
    "--profile",
    "-j",
    "--jobs",
    "--manifest-path",
    "--target-dir",
    "--exclude",
    "--config",
];

/// `cargo test` runs the tests whose names contain its one filter: a
/// second word before `--` is an error (cargo refuses it).
fn check_cargo_test(words: &[&str], at: &str, errors: &mut Vec<String>) {
    let mut filters = Vec::new();
    let mut words = words.iter();
    while let Some(word) = words.next() {
        match *word {
            "--" => break,
            w if CARGO_VALUES.contains(&w) => {
                words.next();
            }
            w if w.starts_with('-') => {}
            w => filters.push(w),
        }
    }
    if filters.len() > 1 {
        errors.push(format!(
            "{at}: `cargo test` takes one test name filter, not {filters:?}: run it once per filter"
        ));
    }
}

/// `NAME=value` before a command.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    })
}

fn check_flags(
    cli: &Command,
    sub: &str,
    flags: &[&str],
    script: &[&str],
    strict: bool,
    at: &str,
    errors: &mut Vec<String>,
) {
    // `<command>`, `COMMAND`: a placeholder; `=`, `bench:`: not a command.
    let word = sub.starts_with(|c: char| c.is_ascii_lowercase())
        && sub
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    let placeholder = !word && !sub.starts_with('-');
    let (command, flags, shown) = if sub.starts_with('-') {
        let mut all = vec![sub];
        all.extend_from_slice(flags);
        (cli, all, "stocklock".to_owned())
    } else if placeholder {
        return;
    } else {
        match cli.find_subcommand(sub) {
            Some(mut command) => {
                // A command of commands (`history check`): down to the one named.
                let mut flags = flags.to_vec();
                let mut shown = format!("stocklock {}", command.get_name());
                while let Some(inner) = flags.first().and_then(|w| command.find_subcommand(w)) {
                    shown = format!("{shown} {}", inner.get_name());
                    command = inner;
                    flags.remove(0);
                }
                (command, flags, shown)
            }
            None => {
                if strict {
                    errors.push(format!("{at}: `stocklock {sub}`: no such subcommand"));
                }
                return;
            }
        }
    };
    for word in flags {
        if word == "--" {
            break;
        }
        let Some(name) = word.strip_prefix("--") else {
            continue;
        };
        let name: String = name
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .collect();
        let name = name.trim_end_matches('-');
        if name.is_empty() {
            continue;
        }
        let known = command.get_arguments().any(|arg| {
            arg.get_long() == Some(name)
                || arg
                    .get_all_aliases()
                    .is_some_and(|aliases| aliases.contains(&name))
        });
        if !known && !script.contains(&name) {
            errors.push(format!("{at}: `{shown}` has no flag --{name}"));
        }
    }
}
