//! Which process listens on an address, read from /proc (Linux).

use std::net::SocketAddr;
use std::path::PathBuf;

/// Whether process `pid` holds a TCP socket listening on `addr` (read from
/// /proc, Linux): that a port answers proves only that *someone* listens
/// there, and another process may have taken a port we picked as free.
pub fn listens_on(pid: u32, addr: SocketAddr) -> bool {
    holds_any(pid, &listening_sockets(&[addr]))
}

/// The sockets listening on any of `addrs`, as /proc names a process's
/// file descriptors for them (`socket:[INODE]`): the kernel's table read
/// once (it lists every TCP socket of the machine, thousands after a load
/// test, so a caller asking about many processes reads it once).
pub fn listening_sockets(addrs: &[SocketAddr]) -> Vec<PathBuf> {
    let mut sockets = Vec::new();
    for (table, v6) in [("/proc/net/tcp", false), ("/proc/net/tcp6", true)] {
        let locals: Vec<String> = addrs
            .iter()
            .filter(|addr| addr.is_ipv6() == v6)
            .map(|addr| table_address(*addr))
            .collect();
        if locals.is_empty() {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        // Columns: sl local_address rem_address st ... inode; st 0A is LISTEN.
        for line in text.lines() {
            let mut fields = line.split_ascii_whitespace();
            let local = fields.nth(1);
            let state = fields.nth(1);
            let inode = fields.nth(5);
            if state == Some("0A")
                && local.is_some_and(|l| locals.iter().any(|w| w == l))
                && let Some(inode) = inode
            {
                sockets.push(PathBuf::from(format!("socket:[{inode}]")));
            }
        }
    }
    sockets
}

/// Whether process `pid` holds one of `sockets` ([`listening_sockets`]).
pub fn holds_any(pid: u32, sockets: &[PathBuf]) -> bool {
    if sockets.is_empty() {
        return false;
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten()
        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| sockets.contains(&target)))
}

/// `addr` as /proc/net/tcp{,6} writes a local address: the address's
/// 32-bit words in the machine's byte order, in hex, then the port.
fn table_address(addr: SocketAddr) -> String {
    match addr {
        SocketAddr::V4(v4) => format!(
            "{:08X}:{:04X}",
            u32::from_le_bytes(v4.ip().octets()),
            v4.port()
        ),
        SocketAddr::V6(v6) => {
            let words: String = v6
                .ip()
                .octets()
                .chunks(4)
                .map(|w| format!("{:08X}", u32::from_le_bytes([w[0], w[1], w[2], w[3]])))
                .collect();
            format!("{words}:{:04X}", v6.port())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::free_port;
    use std::net::{Ipv4Addr, Ipv6Addr, TcpListener};

    #[test]
    fn a_listening_socket_is_found_in_its_owner_only() {
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).unwrap();
        let addr = listener.local_addr().unwrap();
        assert!(listens_on(std::process::id(), addr));
        let other = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port().unwrap()));
        assert!(
            !listens_on(std::process::id(), other),
            "nobody listens there"
        );
        // PID 1 exists and does not hold our socket (or cannot be read).
        assert!(!listens_on(1, addr));
        drop(listener);
        assert!(!listens_on(std::process::id(), addr));
    }

    /// One read of the table answers for several addresses, IPv6 too.
    #[test]
    fn the_sockets_of_several_addresses_are_found_in_one_read() {
        let v4 = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).unwrap();
        let v6 = TcpListener::bind(SocketAddr::from((Ipv6Addr::LOCALHOST, 0)));
        let mut addrs = vec![v4.local_addr().unwrap()];
        addrs.extend(v6.as_ref().ok().map(|l| l.local_addr().unwrap()));
        let sockets = listening_sockets(&addrs);
        assert_eq!(sockets.len(), addrs.len(), "{sockets:?}");
        assert!(holds_any(std::process::id(), &sockets));
        assert!(!holds_any(std::process::id(), &[]));
    }
}
