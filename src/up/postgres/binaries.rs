//! PostgreSQL's programs: where Debian (or `PATH`) has them, the user they
//! run as when we are root, and the command that runs one of them.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::Context;
use tokio::process::Command;

use crate::up::process;

/// Where Debian's `postgresql-N` packages put their binaries: `N/bin`.
const DEBIAN_LIB: &str = "/usr/lib/postgresql";

/// The programs, and the user they run as when we are root.
pub(super) struct Binaries {
    pub(super) initdb: PathBuf,
    pub(super) postgres: PathBuf,
    /// `(uid, gid)` of the `postgres` user when running as root.
    pub(super) run_as: Option<(u32, u32)>,
}

/// A command for one of PostgreSQL's programs: as the `postgres` user when
/// we are root, with English messages, in `dir` (a directory it may enter).
pub(super) fn command(binaries: &Binaries, program: &Path, dir: &Path) -> Command {
    let mut command = match binaries.run_as {
        Some((uid, gid)) => {
            let mut command = process::command_as(program, uid, gid);
            command.env("HOME", dir);
            command
        }
        None => process::command(program),
    };
    command
        .current_dir(dir)
        .env("LC_ALL", "C")
        .env_remove("PGDATA")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// The binaries (the newest of Debian's `/usr/lib/postgresql/N/bin`, or
/// `initdb` and `postgres` on `PATH`, symlinks resolved), and the user to
/// run them as; or how to install them.
pub(super) fn require_postgres() -> anyhow::Result<Binaries> {
    let bin = bin_dir().context(
        "PostgreSQL is not installed (no initdb and postgres). Install it with:\n    sudo apt-get update && sudo apt-get install -y postgresql",
    )?;
    let run_as = if nix::unistd::geteuid().is_root() {
        let user = nix::unistd::User::from_name("postgres")
            .ok()
            .flatten()
            .context(
                "initdb and postgres refuse to run as root, and there is no `postgres` user to run them as (Debian's postgresql package creates it)",
            )?;
        Some((user.uid.as_raw(), user.gid.as_raw()))
    } else {
        None
    };
    Ok(Binaries {
        initdb: bin.join("initdb"),
        postgres: bin.join("postgres"),
        run_as,
    })
}

/// Whether PostgreSQL's server binaries are installed.
pub fn installed() -> bool {
    bin_dir().is_some()
}

/// The directory of the server's binaries: the newest version under
/// `/usr/lib/postgresql`, else the one `initdb` on `PATH` resolves to.
pub fn bin_dir() -> Option<PathBuf> {
    let has_both = |dir: &Path| dir.join("initdb").is_file() && dir.join("postgres").is_file();
    let newest = std::fs::read_dir(DEBIAN_LIB)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = version_of(&entry.file_name().to_string_lossy())?;
            let bin = entry.path().join("bin");
            has_both(&bin).then_some((version, bin))
        })
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, bin)| bin);
    newest.or_else(|| {
        let initdb = std::fs::canonicalize(crate::os::find_program("initdb")?).ok()?;
        let bin = initdb.parent()?.to_owned();
        has_both(&bin).then_some(bin)
    })
}

/// `15` → `[15]`, `9.6` → `[9, 6]`; `None` for a name that is no version.
fn version_of(name: &str) -> Option<Vec<u32>> {
    name.split('.').map(|part| part.parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::version_of;

    #[test]
    fn versions_compare_as_numbers() {
        assert!(version_of("16") > version_of("9.6"));
        assert!(version_of("15") > version_of("9"));
        assert_eq!(version_of("common"), None);
    }
}
