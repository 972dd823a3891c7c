//! Each check, shown failing: a small repository in a temporary directory
//! with one fault of each kind, and the message the check gives for it.

use std::path::Path;

use stocklock::lab::{Cell, LabReport};
use stocklock::variants::Variant;

use super::{checks, cli, generated, markdown, pages, variants};

/// A temporary repository holding these files.
fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temporary directory");
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("create directories");
        std::fs::write(path, text).expect("write a fixture");
    }
    dir
}

/// Exactly these faults, in this order (each message contains its part).
fn assert_faults(errors: &[String], expected: &[&str]) {
    assert_eq!(
        errors.len(),
        expected.len(),
        "expected {expected:?}, got:\n{}",
        errors.join("\n")
    );
    for (error, part) in errors.iter().zip(expected) {
        assert!(error.contains(part), "expected `{part}` in `{error}`");
    }
}

#[test]
fn headings_give_githubs_anchors() {
    assert_eq!(
        markdown::slug("The ledger: what every verdict is read from"),
        "the-ledger-what-every-verdict-is-read-from"
    );
    assert_eq!(
        markdown::slug("`lua-sharded` and [Cluster](scaling.md)"),
        "lua-sharded-and-cluster"
    );
    assert_eq!(
        markdown::slug("Costs, side by side (2 cores)"),
        "costs-side-by-side-2-cores"
    );
    let anchors = markdown::anchors(
        "# A\n\n## Run\n\n```sh\n# not a heading\n```\n\n## Run\n\n<a id=\"bench-1\"></a>\n",
    );
    assert_eq!(anchors, ["a", "run", "run-1", "bench-1"]);
}

#[test]
fn a_broken_link_or_anchor_is_reported_with_its_line() {
    let dir = repo(&[
        (
            "README.md",
            "# R\n\n[fine](docs/a.md#two-words) and [again](docs/a.md#two-words-1)\n\
             [gone](docs/missing.md), `[in code](nowhere.md)`\n\n\
             ![picture](docs/a.png) <img src=\"docs/b.png\">\n\n[bad anchor](docs/a.md#two-word)\n\
             [external](https://example.com/nowhere.md) [here](#r) [there](#nowhere)\n",
        ),
        ("docs/a.md", "# A\n\n## Two words\n\n## Two words\n"),
        ("docs/a.png", ""),
    ]);
    let errors = checks::links(dir.path(), &pages(dir.path()));
    assert_faults(
        &errors,
        &[
            "README.md:4: link `docs/missing.md`: no such file docs/missing.md",
            "README.md:6: link `docs/b.png`: no such file docs/b.png",
            "README.md:8: link `docs/a.md#two-word`: no heading or <a id> gives the anchor #two-word in docs/a.md",
            "README.md:9: link `#nowhere`",
        ],
    );
}

#[test]
fn an_unknown_flag_or_subcommand_is_reported_with_its_line() {
    let dir = repo(&[(
        "docs/x.md",
        "# X\n\n```sh\nstocklock up --port 8081 --worker-threads 2   # the flag is serve's\n\
         ./scripts/up.sh --minimal --host 0.0.0.0\ntarget/release/stocklock load --variant all \\\n  --stock 50 --nope\n\
         stocklock frobnicate\ncargo test --release --test api a_waiter -- --nocapture\n```\n\n```text\nstocklock is up: http://127.0.0.1:8080/\nstocklock load --variant all --nah\n```\n\n\
         Run `serve --worker-threads 2`, `up --persist`, `lab --json out.json` and\n`up --zookeeper 3 --bogus`; \
         `stocklock --version`; `up` alone; `stocklock = { path = \"..\" }`;\n`cargo test --release a_waiter_is_woken a_redlock_waiter -- --nocapture`.\n\n```rust\nstocklock up --not-checked-in-rust\n```\n",
    )]);
    let errors = checks::commands(&cli(), &pages(dir.path()));
    assert_faults(
        &errors,
        &[
            "docs/x.md:18: `stocklock up` has no flag --bogus",
            "docs/x.md:19: `cargo test` takes one test name filter, not [\"a_waiter_is_woken\", \"a_redlock_waiter\"]",
            "docs/x.md:4: `stocklock up` has no flag --worker-threads",
            "docs/x.md:6: `stocklock load` has no flag --nope",
            "docs/x.md:8: `stocklock frobnicate`: no such subcommand",
            "docs/x.md:14: `stocklock load` has no flag --nah",
        ],
    );
}

/// Every variant's row but the last, and one that is not a variant.
fn table(extra: &str) -> String {
    let names = Variant::names();
    let rows: String = names[..names.len() - 1]
        .iter()
        .map(|n| format!("| `{n}` | x |\n"))
        .collect();
    format!("| `variant` | protection |\n|---|---|\n{rows}{extra}")
}

#[test]
fn a_variant_missing_from_a_table_or_list_is_reported() {
    let last = Variant::ALL[Variant::ALL.len() - 1].name();
    let whole: String = Variant::names()
        .iter()
        .map(|n| format!("- `{n}`\n"))
        .collect();
    let partial: String = Variant::names()[1..]
        .iter()
        .map(|n| format!("- `{n}`: why\n"))
        .collect();
    let text = format!(
        "# V\n\n{}\n| other | x |\n|---|---|\n| `none` | x |\n\n<!-- every variant -->\n\n{whole}\n\
         <!-- every variant -->\n{partial}\nText.\n\n| variant | y |\n|---|---|\n{}",
        table("| `bogus` | x |\n"),
        Variant::names()
            .iter()
            .map(|n| format!("| {n} | y |\n"))
            .collect::<String>()
    );
    // The bogus row's line moves with the number of variants: found in
    // the fixture's text itself, not counted the way the check counts.
    let bogus = 1 + text
        .lines()
        .position(|line| line == "| `bogus` | x |")
        .expect("the fixture has the bogus row");
    let dir = repo(&[("docs/v.md", &text)]);
    let errors = variants::variants(&pages(dir.path()));
    assert_faults(
        &errors,
        &[
            &format!("docs/v.md:3: the variant table has no row for [\"{last}\"]"),
            &format!("docs/v.md:{bogus}: `bogus` is not a variant"),
            "the list of every variant leaves out [\"none\"]",
        ],
    );
}

const EXAMPLE: &str = "fn main() {\n    println!(\"held\");\n}\n";

#[test]
fn a_drifted_include_is_reported_and_blessing_rewrites_it() {
    let page = "# L\n\n<!-- include examples/lease.rs -->\n```rust\nfn main() {}\n```\n\nAfter.\n";
    let dir = repo(&[("docs/l.md", page), ("examples/lease.rs", EXAMPLE)]);
    let (errors, rewritten) = generated::regions(dir.path(), &cli(), &pages(dir.path()), false);
    assert_faults(
        &errors,
        &[
            "docs/l.md:3: the block after `include examples/lease.rs` is not the file as it is; STOCKLOCK_BLESS=1",
        ],
    );
    assert!(rewritten.is_empty(), "nothing is written unless blessing");

    let (errors, rewritten) = generated::regions(dir.path(), &cli(), &pages(dir.path()), true);
    assert_faults(&errors, &[]);
    assert_eq!(
        rewritten[0].1,
        format!("# L\n\n<!-- include examples/lease.rs -->\n```rust\n{EXAMPLE}```\n\nAfter.\n")
    );
    bless_and_recheck(dir.path(), rewritten);

    let missing = repo(&[(
        "docs/l.md",
        "<!-- include examples/none.rs -->\n```rust\n```\n",
    )]);
    let (errors, _) = generated::regions(missing.path(), &cli(), &pages(missing.path()), true);
    assert_faults(
        &errors,
        &["docs/l.md:1: cannot read the included examples/none.rs"],
    );
}

fn bless_and_recheck(root: &Path, rewritten: Vec<(usize, String)>) {
    let all = pages(root);
    for (index, text) in rewritten {
        std::fs::write(root.join(&all[index].path), text).expect("write");
    }
    let (errors, rewritten) = generated::regions(root, &cli(), &pages(root), false);
    assert_faults(&errors, &[]);
    assert!(rewritten.is_empty());
}

#[test]
fn a_stale_cli_reference_is_reported_and_blessing_rewrites_it() {
    let page = "# CLI\n\n<!-- generated: cli -->\n## stocklock up\n\n- `--worker-threads`\n<!-- end generated -->\n\nAfter.\n";
    let dir = repo(&[("docs/cli.md", page)]);
    let (errors, _) = generated::regions(dir.path(), &cli(), &pages(dir.path()), false);
    assert_faults(
        &errors,
        &[
            "docs/cli.md:3: the region `generated: cli` differs from what it renders; STOCKLOCK_BLESS=1 cargo test --test api docs:: rewrites it",
        ],
    );
    let (_, rewritten) = generated::regions(dir.path(), &cli(), &pages(dir.path()), true);
    let text = &rewritten[0].1;
    assert!(
        text.ends_with("<!-- end generated -->\n\nAfter.\n"),
        "{text}"
    );
    for shown in [
        "## stocklock serve",
        "- `--worker-threads <WORKER_THREADS>`",
        "Environment: `STOCKLOCK_LISTEN`",
        "- `[SCENARIO]...`",
        "  - `pause-holder`: ",
    ] {
        assert!(text.contains(shown), "`{shown}` missing from:\n{text}");
    }
    for hidden in [
        "## stocklock resume",
        "## stocklock relay",
        "--exit-with-stdin",
        "--lesson",
        "## stocklock help",
    ] {
        assert!(
            !text.contains(hidden),
            "`{hidden}` is hidden but shown in:\n{text}"
        );
    }
    let up = &text
        [text.find("## stocklock up").expect("up")..text.find("## stocklock load").expect("load")];
    assert!(!up.contains("--worker-threads"), "{up}");
    bless_and_recheck(dir.path(), rewritten);
    // The reference passes the other checks too.
    let errors = [
        checks::links(dir.path(), &pages(dir.path())),
        checks::commands(&cli(), &pages(dir.path())),
    ]
    .concat();
    assert_faults(&errors, &[]);

    let unended = repo(&[("docs/cli.md", "<!-- generated: cli -->\n")]);
    let (errors, _) = generated::regions(unended.path(), &cli(), &pages(unended.path()), true);
    assert_faults(&errors, &["has no `<!-- end generated -->`"]);
}

fn cell(scenario: &str, variant: &str, observed: &str, pass: bool) -> Cell {
    Cell {
        scenario: scenario.into(),
        variant: variant.into(),
        expected: "whatever".into(),
        expected_zh: String::new(),
        observed: observed.into(),
        observed_zh: String::new(),
        pass,
        evidence: String::new(),
        evidence_zh: String::new(),
        model: None,
        model_zh: None,
        history: None,
        history_zh: None,
    }
}

#[test]
fn the_lab_matrix_marks_contradictions_and_inconclusive_cells() {
    let report = LabReport {
        cells: vec![
            cell("pause-holder", "watchdog", "safe", false),
            cell("race", "none", "oversells", true),
            cell("race", "lua", "safe", true),
            cell("pause-holder", "fenced", "inconclusive", false),
        ],
    };
    let json = serde_json::to_string(&report).expect("json");
    let page =
        "# Lab\n\n<!-- generated: lab-matrix docs/results/lab-1.json -->\n<!-- end generated -->\n";
    let dir = repo(&[("docs/lab.md", page), ("docs/results/lab-1.json", &json)]);
    let (errors, rewritten) = generated::regions(dir.path(), &cli(), &pages(dir.path()), false);
    assert_faults(
        &errors,
        &["docs/lab.md:3: the region `generated: lab-matrix docs/results/lab-1.json` differs"],
    );
    let (_, rewritten_too) = generated::regions(dir.path(), &cli(), &pages(dir.path()), true);
    assert!(rewritten.is_empty());
    let text = &rewritten_too[0].1;
    // Columns in the lab's order, whatever the file's; a claim with no
    // cell is "not run", a scenario that does not apply is "-".
    for row in [
        "| variant | race | pause-holder |",
        "| `none` | oversells | - |",
        "| `lua` | safe | - |",
        "| `watchdog` | not run | safe ✗ |",
        "| `fenced` | not run | inconclusive ? |",
    ] {
        assert!(text.contains(row), "`{row}` missing from:\n{text}");
    }
    bless_and_recheck(dir.path(), rewritten_too);
    assert_faults(&variants::variants(&pages(dir.path())), &[]);

    let bad = serde_json::to_string(&LabReport {
        cells: vec![cell("race", "mutex", "safe", true)],
    })
    .expect("json");
    std::fs::write(dir.path().join("docs/results/lab-1.json"), bad).expect("write");
    let (errors, _) = generated::regions(dir.path(), &cli(), &pages(dir.path()), true);
    assert_faults(
        &errors,
        &["docs/results/lab-1.json: unknown variant `mutex`"],
    );
}
