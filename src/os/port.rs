//! Free loopback ports for the servers the tools and tests start.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};

/// A loopback port free now, for a server about to be started on it.
///
/// Chosen below the kernel's ephemeral range: a port the kernel handed out
/// by `bind(0)` is one it also gives to outgoing connections, so between
/// the pick and the server's own bind another process's connection (an etcd
/// member dialling its peers, a test's client) could take it: CI saw
/// `bind: address already in use` that way. Below the range only a server
/// binding it on purpose can take it; each port is handed out once per
/// process (a counter from a random start, so parallel tests and concurrent
/// processes rarely meet), and is checked free by binding it. Falls back to
/// `bind(0)` where the range leaves too little room below it.
pub fn free_port() -> std::io::Result<u16> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    const FLOOR: u32 = 10_000;
    let ceiling = ephemeral_floor().unwrap_or(32_768);
    if ceiling < FLOOR + 1_000 {
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
        return Ok(listener.local_addr()?.port());
    }
    let span = ceiling - FLOOR;
    let _ = NEXT.compare_exchange(
        u32::MAX,
        random_start() % span,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    for _ in 0..span {
        let offset = NEXT.fetch_add(1, Ordering::Relaxed) % span;
        let Ok(port) = u16::try_from(FLOOR + offset) else {
            continue;
        };
        if TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).is_ok() {
            return Ok(port);
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AddrInUse,
        format!("no free loopback port in {FLOOR}..{ceiling}"),
    ))
}

/// The lowest port the kernel gives to outgoing connections.
fn ephemeral_floor() -> Option<u32> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    range.split_whitespace().next()?.parse().ok()
}

/// A start that differs between processes and runs.
fn random_start() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.finish() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_lie_below_the_ephemeral_range_and_differ() {
        let ports: Vec<u16> = (0..200).map(|_| free_port().unwrap()).collect();
        let floor = ephemeral_floor().unwrap();
        for port in &ports {
            assert!(u32::from(*port) < floor, "{port} is in the ephemeral range");
            TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, *port))).unwrap();
        }
        let distinct: std::collections::BTreeSet<_> = ports.iter().collect();
        assert_eq!(distinct.len(), ports.len(), "a port handed out twice");
    }
}
