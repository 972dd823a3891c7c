//! Process and signal helpers, below every other module: the domain (chaos
//! mode's SIGCONT helper) and the tools (`serve`, `up`, `lab`, `load`) use
//! them alike, so none of them has to borrow another's.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

mod port;
mod sockets;
pub use port::free_port;
pub use sockets::{holds_any, listening_sockets, listens_on};

/// Hands the pages the allocator holds free back to the kernel; whether
/// any were. glibc keeps what a thread freed in that thread's arena, so a
/// burst (a reconciliation of thousands of orders, a run of many SKUs)
/// would otherwise leave an instance resident at its high-water mark long
/// after the memory is free. Cheap on an instance's small heap, but it locks
/// each arena in turn: called after a burst or when idle, never per request.
/// Other allocators (musl's, the system's elsewhere) need no such call.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[expect(unsafe_code, reason = "malloc_trim is glibc's, reached through libc")]
pub fn release_freed_memory() -> bool {
    // SAFETY: malloc_trim takes no pointer and rearranges only glibc's own
    // free lists, each under its arena's lock.
    unsafe { libc::malloc_trim(0) == 1 }
}

/// Elsewhere there is nothing to ask for.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_freed_memory() -> bool {
    false
}

/// Sends `signal` to `pid`; a process already gone is not an error.
pub fn signal(pid: u32, signal: Signal) {
    if let Ok(pid) = i32::try_from(pid) {
        let _ = kill(Pid::from_raw(pid), signal);
    }
}

/// Freezes `pid` (SIGSTOP) and waits (bounded, 5 s) until the kernel
/// reports every thread of it stopped: `kill` returns before the target
/// has stopped. From then on, whatever is sent to it waits in the kernel's
/// buffers until SIGCONT.
pub async fn freeze(pid: u32) -> anyhow::Result<()> {
    signal(pid, Signal::SIGSTOP);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    while !is_stopped(pid) {
        if is_gone(pid) {
            anyhow::bail!("process {pid} exited before it stopped");
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!("process {pid} was not stopped 5 s after SIGSTOP");
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    Ok(())
}

/// Whether every thread of `pid` is stopped (`T` in `/proc/PID/task/*/stat`);
/// false when it cannot tell (no such process).
pub fn is_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let mut any = false;
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            return false;
        };
        // `tid (comm) STATE ...`: the state follows the last parenthesis.
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next());
        if !matches!(state, Some("T" | "t")) {
            return false;
        }
        any = true;
    }
    any
}

/// Whether `pid` has exited: no such process, or a zombie.
pub fn is_gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            == Some("Z")
    })
}

/// Resolves on Ctrl-C, SIGTERM or SIGHUP: a closed terminal is a stop
/// asked for too, and its default action would kill us before we stop our
/// children. The handlers are installed when this is called, not when it
/// is first polled: a signal in between is kept, not fatal.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{Signal as Stream, SignalKind, signal};
    let streams = [
        SignalKind::interrupt(),
        SignalKind::terminate(),
        SignalKind::hangup(),
    ]
    .map(|kind| signal(kind).ok());
    async fn received(stream: Option<Stream>) {
        match stream {
            Some(mut stream) => {
                stream.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    }
    let [interrupt, terminate, hangup] = streams;
    async move {
        tokio::select! {
            _ = received(interrupt) => {},
            _ = received(terminate) => {},
            _ = received(hangup) => {},
        }
    }
}

/// Becomes `program` with `args`, killed by the kernel when `parent` dies
/// (PR_SET_PDEATHSIG), however it dies: `up` starts every child through
/// this (its hidden `__child` subcommand), since a SIGKILLed `up` cannot stop
/// them itself. Returns only on failure.
pub fn exec_owned(
    parent: u32,
    program: &std::ffi::OsStr,
    args: &[std::ffi::OsString],
) -> anyhow::Error {
    use std::os::unix::process::CommandExt;
    if let Err(err) = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL) {
        return anyhow::anyhow!("cannot ask to die with the parent: {err}");
    }
    // The parent may have died before the line above: we were then
    // reparented and no signal will come.
    if i32::try_from(parent).ok() != Some(nix::unistd::getppid().as_raw()) {
        return anyhow::anyhow!("the parent (pid {parent}) is gone");
    }
    let err = std::process::Command::new(program).args(args).exec();
    anyhow::anyhow!("cannot run {}: {err}", Path::new(program).display())
}

/// Waits for `parent` to die, then SIGKILLs process group `group`: the
/// processes a child of `up` forks (nginx's workers) are not `up`'s
/// children, outlive their master's death signal and keep its port. `up`
/// starts one of these (its hidden `__guard-group` subcommand) per such
/// group and SIGKILLs it on a clean stop. Runs before any thread exists.
pub fn guard_group(parent: u32, group: u32) -> anyhow::Result<()> {
    use nix::sys::signal::SigSet;
    let mut death = SigSet::empty();
    death.add(Signal::SIGTERM);
    // Blocked before it is asked for, so that it waits in the queue.
    death.thread_block()?;
    nix::sys::prctl::set_pdeathsig(Signal::SIGTERM)?;
    if i32::try_from(parent).ok() == Some(nix::unistd::getppid().as_raw()) {
        // SIGTERM is all it waits for: the parent's death, or a `kill`.
        death.wait()?;
    }
    let group = i32::try_from(group)?;
    let _ = nix::sys::signal::killpg(Pid::from_raw(group), Signal::SIGKILL);
    Ok(())
}

/// Whether a process with this pid exists (zombies included).
pub fn is_alive(pid: u32) -> bool {
    // Another user's process answers EPERM: it exists all the same.
    i32::try_from(pid)
        .is_ok_and(|pid| pid > 0 && kill(Pid::from_raw(pid), None) != Err(nix::errno::Errno::ESRCH))
}

/// Finds `name` on `PATH`, then in the sbin directories that a non-root
/// `PATH` often lacks (Debian installs nginx in /usr/sbin).
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Whether another socket holds `addr`: binding it (as a server would,
/// SO_REUSEADDR included) is refused. Nothing connects to find out: a
/// stranger's listener must not see us.
pub fn port_taken(addr: SocketAddr) -> bool {
    matches!(
        TcpListener::bind(addr),
        Err(err) if err.kind() == std::io::ErrorKind::AddrInUse
    )
}

/// Kills process `pid` and its children at once (SIGKILL): a crash of a
/// server whose parent forks a process per connection (PostgreSQL's
/// postmaster and its backends), with nothing left to shut down cleanly.
pub fn kill_with_children(pid: u32) {
    let mut all = children_of(pid);
    all.push(pid);
    for pid in all {
        signal(pid, Signal::SIGKILL);
    }
}

/// The live (not zombie) children of process `pid`, from /proc (Linux):
/// nginx's workers, which a reload replaces.
pub fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            // `pid (comm) S ppid ...`: the fields follow the last ')'.
            std::fs::read_to_string(format!("/proc/{child}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(')').is_some_and(|(_, rest)| {
                    let mut fields = rest.split_whitespace();
                    let state = fields.next();
                    let parent = fields.next().and_then(|p| p.parse::<u32>().ok());
                    state != Some("Z") && parent == Some(pid)
                })
            })
        })
        .collect()
}

/// A free loopback port, as the kernel hands them out. Another process may
/// take it before we use it; callers that can retry do.
/// Waits until nothing accepts connections on loopback `port` (a killed
/// process's port closes: no other event says it is gone); `false` when
/// something still does after `within`.
pub async fn until_closed(port: u16, within: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + within;
    while tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port))
        .await
        .is_ok()
    {
        if std::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The process's anonymous resident memory, in KiB.
    fn rss_anon_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("RssAnon:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// The burst of [`memory_a_burst_freed_is_given_back`], in a process of
    /// its own (the test binary run again for this test alone), so that no
    /// other test's memory moves the figures: prints them.
    #[test]
    fn burst_child() {
        if std::env::var_os("STOCKLOCK_BURST_CHILD").is_none() {
            return;
        }
        let before = rss_anon_kib();
        let burst: Vec<Vec<u8>> = (0..40_000).map(|i| vec![i as u8; 1000]).collect();
        // Still in use, above the burst: free cannot hand the heap's top back.
        let kept = vec![1u8; 1000];
        drop(burst);
        let freed = rss_anon_kib();
        release_freed_memory();
        let released = rss_anon_kib();
        assert_eq!(kept[999], 1);
        println!("burst: {before} {freed} {released}");
    }

    /// 40 MB of small blocks freed under one still in use stay resident
    /// after `free` (glibc gives back only a heap's top); the call gives
    /// them back.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn memory_a_burst_freed_is_given_back() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "os::tests::burst_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("STOCKLOCK_BURST_CHILD", "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line = stdout
            .lines()
            .find_map(|l| l.split_once("burst: ").map(|(_, figures)| figures));
        let figures: Vec<u64> = line
            .unwrap_or_else(|| panic!("the child printed no figures: {stdout}"))
            .split(' ')
            .map(|n| n.parse().unwrap())
            .collect();
        let [before, freed, released] = figures[..] else {
            panic!("three figures expected: {figures:?}");
        };
        assert!(
            freed > before + 30_000,
            "free alone kept the burst: {before} KiB before, {freed} after"
        );
        assert!(
            released < before + 10_000,
            "given back: {before} KiB before, {freed} freed, {released} after the call"
        );
    }

    #[test]
    fn a_port_is_taken_while_someone_listens_on_it() {
        // A loopback address of its own: a test binding 127.0.0.1:0 at the
        // same time may be given the port just freed (a suite run failed
        // so), and would take it on 127.0.0.1 only, not on this address.
        let own = Ipv4Addr::new(127, 62, 13, 7);
        let listener = TcpListener::bind(SocketAddr::from((own, 0))).unwrap();
        let addr = listener.local_addr().unwrap();
        assert!(port_taken(addr));
        drop(listener);
        assert!(!port_taken(addr));
    }

    #[test]
    fn a_child_is_listed_under_its_parent_until_it_exits() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        assert!(children_of(std::process::id()).contains(&child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!children_of(std::process::id()).contains(&child.id()));
    }
}
