//! The strikes themselves: a crash now or a moment from now, a lock key
//! deleted, the Redis paused or stopped, the whole process frozen and the
//! helper that wakes it.

use std::time::Duration;

use redis::AsyncCommands;

use crate::store::{Conn, Keys, Store, StoreError};

/// Aborts the process now: a real crash, as chaos mode armed it.
pub fn crash(when: &str) -> ! {
    eprintln!("chaos: crashing {when}");
    std::process::abort();
}

/// Deletes a SKU's lock key, whoever holds it (`lock_vanishes`: the
/// stand-in for a failover or a clock jump). Whether there was one.
pub async fn vanish_lock(conn: &mut Conn, keys: &Keys) -> Result<bool, StoreError> {
    let deleted: i64 = conn.del(&keys.lock).await?;
    Ok(deleted == 1)
}

/// Freezes the Redis for `pause` (`DEBUG SLEEP`) and returns at once. On a
/// connection of its own: the pause blocks whoever asks.
pub fn pause_redis(store: &Store, pause: Duration) {
    let store = store.clone();
    tokio::spawn(async move {
        let Ok(client) = store.master_client().await else {
            return;
        };
        if let Ok(mut conn) = client.get_multiplexed_async_connection().await {
            let _: Result<String, _> = redis::cmd("DEBUG")
                .arg("SLEEP")
                .arg(pause.as_millis() as f64 / 1000.0)
                .query_async(&mut conn)
                .await;
        }
    });
}

/// Stops the Redis without saving (`SHUTDOWN NOSAVE`); `up`, which owns
/// it, starts it again.
pub async fn restart_redis(store: &Store) -> Result<(), StoreError> {
    let mut own = store
        .master_client()
        .await?
        .get_multiplexed_async_connection()
        .await?;
    // The answer never comes: the server goes away.
    let _: Result<(), _> = redis::cmd("SHUTDOWN")
        .arg("NOSAVE")
        .query_async(&mut own)
        .await;
    Ok(())
}

/// Aborts this process a moment from now (`crash`): long enough for the
/// answer that says so to leave.
pub fn crash_soon() {
    tokio::spawn(async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        eprintln!("chaos: crashing, as asked");
        std::process::abort();
    });
}

/// Stops this whole process (every thread, the watchdog's included) with
/// SIGSTOP, after starting a helper that sends SIGCONT `pause` later. A
/// process cannot wake itself: it is frozen.
pub(super) fn freeze(binary: &std::path::Path, pause: Duration) {
    let pid = std::process::id();
    let helper = std::process::Command::new(binary)
        .args([
            "resume",
            "--pid",
            &pid.to_string(),
            "--after-ms",
            &pause.as_millis().to_string(),
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn();
    match helper {
        Ok(mut helper) => {
            tracing::warn!(pid, ?pause, "chaos: freezing the whole process");
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
            // Reap the helper once it is done, off the async threads.
            std::thread::spawn(move || {
                let _ = helper.wait();
            });
        }
        Err(err) => tracing::error!(%err, "chaos: cannot start the SIGCONT helper; not freezing"),
    }
}

/// `stocklock resume`: the helper that wakes a frozen process.
pub fn resume(pid: u32, after: Duration) {
    std::thread::sleep(after);
    crate::os::signal(pid, nix::sys::signal::Signal::SIGCONT);
}
