//! The lock library stays a lean crate of its own: `cargo tree` of
//! `stocklock-lock` never reaches the application's heavy dependencies
//! (with its default features or with all of them), and the count of
//! crates its default build needs is the one docs/lock-library.md gives;
//! and what `cargo package` makes of it compiles as a user's dependency,
//! taken with the docs' dependency line.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// What the application needs and a lock must never pull in.
const HEAVY: &[&str] = &[
    "axum",
    "askama",
    "tokio-postgres",
    "deadpool-postgres",
    "stateright",
    "clap",
    "governor",
    "indicatif",
    "metrics-exporter-prometheus",
    "hdrhistogram",
];

/// The distinct crates (name and version) of the library's normal
/// dependency tree, itself included, with `features` on.
fn tree(features: &[&str]) -> BTreeSet<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cargo = Command::new(env!("CARGO"));
    cargo
        .current_dir(root)
        .args(["tree", "--locked", "--offline", "-p", "stocklock-lock"])
        .args(["-e", "normal", "--prefix", "none"]);
    if !features.is_empty() {
        cargo.args(["--features", &features.join(",")]);
    }
    let output = cargo.output().expect("run cargo tree");
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            Some((words.next()?.to_owned(), words.next()?.to_owned()))
        })
        .collect()
}

fn heavy_in(tree: &BTreeSet<(String, String)>) -> Vec<&str> {
    HEAVY
        .iter()
        .copied()
        .filter(|heavy| tree.iter().any(|(name, _)| name == heavy))
        .collect()
}

#[test]
fn the_lock_library_never_reaches_the_applications_heavy_dependencies() {
    let lean = tree(&[]);
    assert!(
        lean.iter().any(|(name, _)| name == "redis")
            && lean.iter().any(|(name, _)| name == "tokio"),
        "not the library's tree: {lean:?}"
    );
    assert_eq!(heavy_in(&lean), Vec::<&str>::new(), "default features");
    let full = tree(&["full"]);
    assert!(full.len() > lean.len(), "the features add nothing?");
    assert_eq!(heavy_in(&full), Vec::<&str>::new(), "every feature");
    // The extra stores' clients stay out of the default build.
    assert!(
        !lean
            .iter()
            .any(|(name, _)| ["zookeeper-client", "reqwest", "base64"].contains(&name.as_str())),
        "an optional store's client in the default build"
    );
}

#[test]
fn the_docs_give_the_default_builds_true_count() {
    let count = tree(&[]).len();
    let page =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/lock-library.md"))
            .unwrap();
    let said = page
        .lines()
        .find_map(|line| {
            let (_, after) = line.split_once("its default build needs ")?;
            after.split_whitespace().next()?.parse::<usize>().ok()
        })
        .expect("docs/lock-library.md says \"its default build needs N crates\"");
    assert_eq!(
        said, count,
        "docs/lock-library.md says {said} crates; cargo tree -p stocklock-lock -e normal counts {count}"
    );
}

/// `cargo package` of the library succeeds (holding its README, licence
/// and scripts), and what it packaged compiles as a user would take it: a
/// new crate with the dependency line docs/lock-library.md gives, as
/// written (its path is the package, unpacked where the line points), and
/// the README's first example as its `main.rs`, checks on the library's
/// default features. (`cargo check`, not `build`: what is in question is
/// the package's and the example's code, not linking; one compile of the
/// dependencies, not two.)
#[test]
fn the_packaged_library_compiles_as_a_users_dependency_with_the_docs_line() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target");
    let cargo = |cwd: &Path, args: &[&str]| {
        let output = Command::new(env!("CARGO"))
            .current_dir(cwd)
            .env("CARGO_TARGET_DIR", &target)
            .args(args)
            .output()
            .expect("run cargo");
        assert!(
            output.status.success(),
            "cargo {args:?} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let package = [
        "package",
        "-p",
        "stocklock-lock",
        "--offline",
        "--locked",
        "--allow-dirty",
    ];
    let files = cargo(root, &[&package[..], &["--list"]].concat());
    for needed in [
        "README.md",
        "LICENSE",
        "Cargo.toml",
        "src/lib.rs",
        "src/scripts/lease_release.lua",
    ] {
        assert!(
            files.lines().any(|f| f == needed),
            "{needed} not packaged:\n{files}"
        );
    }
    cargo(root, &[&package[..], &["--no-verify"]].concat());
    let packaged = target.join("package/stocklock-lock-0.1.0.crate");
    assert!(packaged.exists(), "no {packaged:?}");

    // The docs' line points at `../stocklock/crates/stocklock-lock` from
    // the user's crate: the package is unpacked there.
    let page = std::fs::read_to_string(root.join("docs/lock-library.md")).unwrap();
    let line = page
        .lines()
        .find(|line| {
            line.starts_with("stocklock-lock = { path = \"../stocklock/crates/stocklock-lock\"")
        })
        .expect("docs/lock-library.md gives the path dependency line");
    let crates = dir.path().join("stocklock/crates");
    std::fs::create_dir_all(&crates).unwrap();
    let untar = Command::new("tar")
        .arg("-xzf")
        .arg(&packaged)
        .arg("-C")
        .arg(&crates)
        .status()
        .expect("run tar");
    assert!(untar.success(), "tar failed");
    std::fs::rename(
        crates.join("stocklock-lock-0.1.0"),
        crates.join("stocklock-lock"),
    )
    .unwrap();

    let readme = std::fs::read_to_string(root.join("crates/stocklock-lock/README.md")).unwrap();
    let example = readme
        .split("```rust,no_run\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the README's first example");
    let user = dir.path().join("user");
    std::fs::create_dir_all(user.join("src")).unwrap();
    std::fs::write(
        user.join("Cargo.toml"),
        format!(
            "[package]\nname = \"user\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
             [dependencies]\n{line}\n\
             tokio = {{ version = \"1\", features = [\"macros\", \"rt-multi-thread\"] }}\n\n\
             [workspace]\n"
        ),
    )
    .unwrap();
    std::fs::write(user.join("src/main.rs"), example).unwrap();
    // The workspace's lock file: the versions this machine has already.
    std::fs::copy(root.join("Cargo.lock"), user.join("Cargo.lock")).unwrap();
    cargo(&user, &["check", "--offline", "--quiet"]);
}
