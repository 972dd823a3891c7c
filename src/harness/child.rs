//! This program run again as a child (`stocklock lab`, `stocklock
//! explore`), for work started from a page: its result read from the
//! JSON it writes.

use std::ffi::OsStr;

/// Runs this binary with `args` and `--json FILE`, and reads `T` from
/// that file; `Err` with the child's last line on stderr (or why it
/// could not run) when it wrote nothing readable.
pub async fn json_of<T: serde::de::DeserializeOwned>(
    args: &[impl AsRef<OsStr>],
) -> Result<T, String> {
    let dir = tempfile::tempdir().map_err(|err| format!("no temporary directory: {err}"))?;
    let binary = std::env::current_exe().map_err(|err| format!("no binary to run: {err}"))?;
    let json = dir.path().join("result.json");
    let output = tokio::process::Command::new(binary)
        .args(args)
        .arg("--json")
        .arg(&json)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|err| err.to_string())?;
    let read = std::fs::read(&json)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<T>(&bytes).ok());
    read.ok_or_else(|| {
        String::from_utf8_lossy(&output.stderr)
            .lines()
            .last()
            .unwrap_or("the command wrote no result")
            .to_owned()
    })
}
