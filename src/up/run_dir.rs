//! `up`'s run directory (nginx's config, the stores' data): a temporary
//! directory with `up`'s pid in it, so that a later `up` can tell a run
//! whose `up` was killed (SIGKILL leaves no chance to clean up; its children
//! die with it) and remove what that run left.

use std::path::{Path, PathBuf};

use anyhow::Context;
use tempfile::TempDir;

use crate::os::is_alive;

const PREFIX: &str = "stocklock-up-";
const PID_FILE: &str = "up.pid";

/// Creates this run's directory in `parent` (the system's temporary
/// directory when `None`), with this process's pid in it, after removing
/// the directories of runs whose `up` is gone. Removed with the returned
/// handle.
pub(super) fn create(parent: Option<&Path>) -> anyhow::Result<TempDir> {
    create_marked(parent, PREFIX)
}

/// The same for any temporary directory of a server we start (named
/// `prefix...`, e.g. a Redis's data of its own): marked with this
/// process's pid, and the directories of that prefix whose process is
/// gone (killed before it could remove them) removed first.
pub(crate) fn create_marked(parent: Option<&Path>, prefix: &str) -> anyhow::Result<TempDir> {
    let parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
    for (dir, pid) in abandoned(&parent, prefix) {
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => say!(
                "removed {}: left by an up that is gone (pid {pid})",
                dir.display()
            ),
            Err(err) => tracing::warn!("cannot remove {}: {err}", dir.display()),
        }
    }
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(&parent)?;
    // nginx's workers run as another user when started by root; let them in.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
    }
    std::fs::write(dir.path().join(PID_FILE), std::process::id().to_string())
        .context("cannot write the directory's pid file")?;
    Ok(dir)
}

/// Run directories in `parent` whose pid file names a process that no
/// longer exists. A directory without a pid file (a run still creating
/// it, or not ours) is left alone.
fn abandoned(parent: &Path, prefix: &str) -> Vec<(PathBuf, u32)> {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(prefix))
        .filter_map(|entry| {
            let pid = std::fs::read_to_string(entry.path().join(PID_FILE)).ok()?;
            let pid: u32 = pid.trim().parse().ok()?;
            (!is_alive(pid)).then(|| (entry.path(), pid))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_runs_of_a_dead_up_are_removed() {
        let parent = tempfile::tempdir().unwrap();
        let live = create(Some(parent.path())).unwrap();
        let dead = parent.path().join(format!("{PREFIX}dead"));
        std::fs::create_dir(&dead).unwrap();
        // A pid that cannot exist (above the kernel's pid_max of 2^22).
        std::fs::write(dead.join(PID_FILE), "4194305").unwrap();
        let unmarked = parent.path().join(format!("{PREFIX}unmarked"));
        std::fs::create_dir(&unmarked).unwrap();

        let next = create(Some(parent.path())).unwrap();
        assert!(!dead.exists(), "a dead up's run was kept");
        assert!(live.path().exists(), "a live up's run was removed");
        assert!(
            unmarked.exists(),
            "a directory without a pid file was removed"
        );
        assert!(next.path().join(PID_FILE).exists());
    }
}
