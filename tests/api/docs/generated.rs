//! The regions a page does not write by hand: `<!-- include PATH -->`
//! (a file shown as it is) and `<!-- generated: KIND ARGS -->` ...
//! `<!-- end generated -->` (the CLI reference from clap's tree, the lab
//! matrix from a `lab --json` file). Each is compared with what it must
//! be; blessing rewrites it instead.

use std::fmt::Write as _;
use std::path::Path;

use clap::{Arg, Command};
use stocklock::lab::{Cell, LabReport, Scenario};
use stocklock::variants::Variant;

use super::Page;
use super::markdown::{self, Line};

/// What to do with a page whose regions are out of date.
pub(crate) const HOW_TO_BLESS: &str = "STOCKLOCK_BLESS=1 cargo test --test api docs:: rewrites it";

/// Checks (or, blessing, rewrites) every include and generated region of
/// the pages. Returns the faults and the pages' new texts (only those that
/// changed, only when blessing).
pub(crate) fn regions(
    root: &Path,
    cli: &Command,
    pages: &[Page],
    bless: bool,
) -> (Vec<String>, Vec<(usize, String)>) {
    let mut errors = Vec::new();
    let mut rewritten = Vec::new();
    for (index, page) in pages.iter().enumerate() {
        let lines = markdown::lines(&page.text);
        // (first line replaced, one past the last, what goes there)
        let mut edits: Vec<(usize, usize, String)> = Vec::new();
        for (i, line) in lines.iter().enumerate() {
            if line.code.is_some() {
                continue;
            }
            let at = format!("{}:{}", page.path.display(), line.number);
            let marker = line.text.trim();
            if let Some(path) = marker
                .strip_prefix("<!-- include ")
                .and_then(|r| r.strip_suffix("-->"))
            {
                match include(root, path.trim(), &lines[i + 1..]) {
                    Ok(None) => {}
                    Ok(Some((len, wanted))) => {
                        errors.push(format!("{at}: the block after `include {}` is not the file as it is; {HOW_TO_BLESS}", path.trim()));
                        edits.push((i + 2, i + 2 + len, wanted));
                    }
                    Err(why) => errors.push(format!("{at}: {why}")),
                }
            } else if let Some(spec) = marker
                .strip_prefix("<!-- generated: ")
                .and_then(|r| r.strip_suffix("-->"))
            {
                let Some(end) = lines[i + 1..]
                    .iter()
                    .position(|l| l.code.is_none() && l.text.trim() == "<!-- end generated -->")
                else {
                    errors.push(format!(
                        "{at}: `generated: {}` has no `<!-- end generated -->`",
                        spec.trim()
                    ));
                    continue;
                };
                let rendered = match render(root, cli, spec.trim()) {
                    Ok(rendered) => format!("\n{}\n\n", rendered.trim_end()),
                    Err(why) => {
                        errors.push(format!("{at}: {why}"));
                        continue;
                    }
                };
                let present: String = lines[i + 1..i + 1 + end]
                    .iter()
                    .map(|l| format!("{}\n", l.text))
                    .collect();
                if present != rendered {
                    errors.push(format!("{at}: the region `generated: {}` differs from what it renders; {HOW_TO_BLESS}", spec.trim()));
                    edits.push((i + 1, i + 1 + end, rendered));
                }
            }
        }
        if bless && !edits.is_empty() {
            rewritten.push((index, apply(&lines, &edits)));
        }
    }
    if bless {
        errors.retain(|e| !e.ends_with(HOW_TO_BLESS));
    }
    (errors, rewritten)
}

/// The included file's content, if the fenced block right after the marker
/// differs from it: (the block's content lines, the file).
fn include(root: &Path, path: &str, after: &[Line<'_>]) -> Result<Option<(usize, String)>, String> {
    let mut wanted = std::fs::read_to_string(root.join(path))
        .map_err(|e| format!("cannot read the included {path}: {e}"))?;
    if !wanted.ends_with('\n') {
        wanted.push('\n');
    }
    let Some(open) = after.first().filter(|l| l.fence) else {
        return Err(format!(
            "`include {path}` is not directly followed by a fenced block"
        ));
    };
    let body: Vec<&Line<'_>> = after[1..].iter().take_while(|l| !l.fence).collect();
    if after.get(1 + body.len()).is_none_or(|l| !l.fence) {
        return Err(format!(
            "the block after `include {path}` (line {}) is never closed",
            open.number
        ));
    }
    let present: String = body.iter().map(|l| format!("{}\n", l.text)).collect();
    Ok((present != wanted).then_some((body.len(), wanted)))
}

/// The page with each range of lines replaced.
fn apply(lines: &[Line<'_>], edits: &[(usize, usize, String)]) -> String {
    let mut out = String::new();
    let mut i = 0;
    for (from, to, text) in edits {
        for line in &lines[i..*from] {
            out.push_str(line.text);
            out.push('\n');
        }
        out.push_str(text);
        i = *to;
    }
    for line in &lines[i..] {
        out.push_str(line.text);
        out.push('\n');
    }
    out
}

fn render(root: &Path, cli: &Command, spec: &str) -> Result<String, String> {
    let mut words = spec.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (Some("cli"), None, _) => Ok(cli_reference(cli)),
        (Some("postgres-settings"), None, _) => Ok(postgres_settings()),
        (Some("lab-matrix"), Some(file), None) => {
            let text = std::fs::read_to_string(root.join(file))
                .map_err(|e| format!("cannot read {file}: {e}"))?;
            let report: LabReport = serde_json::from_str(&text)
                .map_err(|e| format!("{file} is not `lab --json` output: {e}"))?;
            lab_matrix(&report).map_err(|why| format!("{file}: {why}"))
        }
        _ => Err(format!(
            "unknown region `generated: {spec}` (kinds: `cli`, `lab-matrix FILE`, `postgres-settings`)"
        )),
    }
}

/// What `up` sets in its PostgreSQL, as a table: each setting, its value
/// and why (`stocklock::up::postgres::SETTINGS`).
fn postgres_settings() -> String {
    let mut out = String::from("| setting | value | why |\n|---|---|---|\n");
    for s in stocklock::up::postgres::SETTINGS {
        let why = s.why.split_whitespace().collect::<Vec<_>>().join(" ");
        out += &format!("| `{}` | `{}` | {why} |\n", s.name, s.value);
    }
    out
}

/// The CLI reference: every visible subcommand with its about, its usage
/// and each argument's help, default, environment variable and values.
pub(crate) fn cli_reference(cli: &Command) -> String {
    let mut cli = cli.clone();
    cli.build();
    let mut out = String::new();
    let about = cli
        .get_long_about()
        .or(cli.get_about())
        .map(|s| s.to_string())
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "{about}\n\n```text\n{}\n```\n",
        cli.render_usage().to_string().trim_end()
    );
    let commands: Vec<&Command> = cli
        .get_subcommands()
        .filter(|c| !c.is_hide_set() && c.get_name() != "help")
        .collect();
    for command in &commands {
        let summary = command
            .get_about()
            .map(|s| s.to_string())
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "- [`{0}`](#stocklock-{0}): {summary}",
            command.get_name()
        );
    }
    let _ = writeln!(out, "\nOptions of `stocklock` itself:\n");
    arguments(&cli, &mut out);
    for command in commands {
        let mut command = command.clone();
        let about = command
            .get_long_about()
            .or(command.get_about())
            .map(|s| s.to_string())
            .unwrap_or_default();
        let usage = command.render_usage().to_string();
        let _ = writeln!(
            out,
            "\n## stocklock {}\n\n{}\n\n```text\n{}\n```\n",
            command.get_name(),
            about.trim(),
            usage.trim_end()
        );
        arguments(&command, &mut out);
        if let Some(after) = command.get_after_long_help().or(command.get_after_help()) {
            let _ = writeln!(out, "\n```text\n{}\n```", after.to_string().trim_end());
        }
    }
    out
}

/// One list item per visible argument, positionals first.
fn arguments(command: &Command, out: &mut String) {
    let visible = |a: &&Arg| !a.is_hide_set();
    let positionals = command.get_positionals().filter(visible);
    let options = command
        .get_arguments()
        .filter(|a| !a.is_positional())
        .filter(visible);
    for arg in positionals.chain(options) {
        let _ = writeln!(out, "- `{}`{}", signature(arg), describe(arg));
    }
}

/// `-c, --concurrency <CONCURRENCY>`, `--chaos`, `[SCENARIO]...`.
fn signature(arg: &Arg) -> String {
    let value = arg
        .get_value_names()
        .and_then(|names| names.first())
        .map_or_else(|| arg.get_id().as_str().to_uppercase(), |n| n.to_string());
    let many = arg
        .get_num_args()
        .is_some_and(|range| range.max_values() > 1);
    let dots = if many { "..." } else { "" };
    if arg.is_positional() {
        return if arg.is_required_set() {
            format!("<{value}>{dots}")
        } else {
            format!("[{value}]{dots}")
        };
    }
    let mut names = Vec::new();
    if let Some(short) = arg.get_short() {
        names.push(format!("-{short}"));
    }
    if let Some(long) = arg.get_long() {
        names.push(format!("--{long}"));
    }
    let mut shown = names.join(", ");
    if arg.get_action().takes_values() {
        let _ = write!(shown, " <{value}>");
    }
    shown
}

/// `: help. Default: ... Environment: ... Values: ...`, continuation lines indented.
fn describe(arg: &Arg) -> String {
    let help = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|s| s.to_string())
        .unwrap_or_default();
    let mut facts = Vec::new();
    let takes = arg.get_action().takes_values();
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if takes && !arg.is_hide_default_value_set() && !defaults.is_empty() {
        facts.push(format!("Default: `{}`.", defaults.join(",")));
    }
    if let Some(env) = arg.get_env().filter(|_| !arg.is_hide_env_set()) {
        facts.push(format!("Environment: `{}`.", env.to_string_lossy()));
    }
    let values: Vec<_> = if takes && !arg.is_hide_possible_values_set() {
        arg.get_possible_values()
            .into_iter()
            .filter(|v| !v.is_hide_set())
            .collect()
    } else {
        Vec::new()
    };
    let described = values.iter().any(|v| v.get_help().is_some());
    if !values.is_empty() && !described {
        let names: Vec<String> = values
            .iter()
            .map(|v| format!("`{}`", v.get_name()))
            .collect();
        facts.push(format!("Values: {}.", names.join(", ")));
    }
    let mut text = help.trim().to_owned();
    if !facts.is_empty() {
        if !text.is_empty() && !text.ends_with('.') {
            text.push('.');
        }
        text = format!("{text} {}", facts.join(" ")).trim().to_owned();
    }
    let mut out = if text.is_empty() {
        String::new()
    } else {
        format!(": {}", text.replace('\n', "\n  "))
    };
    if described {
        out.push_str("\n\n  Values:\n");
        for value in values {
            let help = value.get_help().map(|h| h.to_string()).unwrap_or_default();
            let _ = writeln!(out, "  - `{}`: {help}", value.get_name());
        }
    }
    out.lines()
        .map(|l| if l.trim().is_empty() { "" } else { l })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The lab's matrix as a Markdown table: a row per variant (in
/// `Variant::ALL` order), a column per scenario of the file (in the lab's
/// order), each cell the observed behaviour, marked when it contradicts the
/// claim (✗) or proved nothing (?), `-` where the scenario does not apply,
/// `not run` where the variant claims something of it but the file has no
/// such cell (a variant or a claim newer than the run).
pub(crate) fn lab_matrix(report: &LabReport) -> Result<String, String> {
    for cell in &report.cells {
        if Variant::ALL.iter().all(|v| v.name() != cell.variant) {
            return Err(format!("unknown variant `{}`", cell.variant));
        }
        if Scenario::ALL.iter().all(|s| s.name() != cell.scenario) {
            return Err(format!("unknown scenario `{}`", cell.scenario));
        }
    }
    let scenarios: Vec<Scenario> = Scenario::ALL
        .into_iter()
        .filter(|s| report.cells.iter().any(|c| c.scenario == s.name()))
        .collect();
    let mut out = String::from("| variant |");
    for scenario in &scenarios {
        let _ = write!(out, " {} |", scenario.name());
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(scenarios.len()));
    out.push('\n');
    for variant in Variant::ALL {
        let _ = write!(out, "| `{}` |", variant.name());
        for scenario in &scenarios {
            let cell = report
                .cells
                .iter()
                .find(|c| c.variant == variant.name() && c.scenario == scenario.name());
            let text = match cell {
                Some(cell) => shown(cell),
                None if scenario.claim(variant).applies() => "not run".to_owned(),
                None => "-".to_owned(),
            };
            let _ = write!(out, " {text} |");
        }
        out.push('\n');
    }
    out.push_str(
        "\nEach cell is what the lab observed. ✗ marks an observation that contradicts the \
         variant's claim, ? a cell that proved nothing (inconclusive: its fault did not land), \
         - a scenario that does not apply to the variant, and \"not run\" a cell the variant \
         claims something of that this run did not play (a variant or a claim newer than the \
         run).\n",
    );
    Ok(out)
}

fn shown(cell: &Cell) -> String {
    match (cell.pass, cell.observed.as_str()) {
        (true, observed) => observed.to_owned(),
        (false, "inconclusive") => "inconclusive ?".to_owned(),
        (false, observed) => format!("{observed} ✗"),
    }
}
