//! Redlock's nodes under an exploration: the nodes a scenario has down
//! from the start are killed before its schedule and started again,
//! empty, on their port for the next one that wants them up; a node
//! restarts empty (or comes back) as a fault of the schedule. A node
//! started again belongs to the stack (`Stack::adopted`), which stops it.

use std::time::Duration;

use anyhow::{Context, bail};

use super::Run;
use crate::harness::stack::Stack;
use crate::up::redis::RedisServer;

/// How long a killed node may take to close its port.
const CLOSING: Duration = Duration::from_secs(5);

fn port(stack: &Stack, k: usize) -> anyhow::Result<u16> {
    stack
        .redlock_nodes
        .get(k)
        .and_then(|node| node.port())
        .with_context(|| format!("the stack has no Redlock node {}", k + 1))
}

/// Whether node `k` answers on its port.
async fn is_up(stack: &Stack, k: usize) -> anyhow::Result<bool> {
    let port = port(stack, k)?;
    Ok(tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_ok())
}

/// Kills node `k` (the stack's, or the one started in its place).
async fn down(stack: &Stack, k: usize) -> anyhow::Result<()> {
    match stack.adopted.lock().await.remove(&k) {
        Some(mut server) => server.stop().await,
        None => crate::os::signal(
            stack.redlock_nodes[k].pid,
            nix::sys::signal::Signal::SIGKILL,
        ),
    }
    if !crate::os::until_closed(port(stack, k)?, CLOSING).await {
        bail!(
            "Redlock node {} still answers {CLOSING:?} after it was killed",
            k + 1
        );
    }
    Ok(())
}

/// Starts node `k` again, empty, on its port.
async fn up(stack: &Stack, k: usize) -> anyhow::Result<()> {
    let server = RedisServer::start(Some(port(stack, k)?)).await?;
    stack.adopted.lock().await.insert(k, server);
    Ok(())
}

/// Puts Redlock's nodes as a schedule begins: the last `down` of them
/// down, the others up.
pub(in crate::explore) async fn set(stack: &Stack, down_from_start: usize) -> anyhow::Result<()> {
    let count = stack.redlock_nodes.len();
    for k in 0..count {
        match (
            k >= count - down_from_start.min(count),
            is_up(stack, k).await?,
        ) {
            (true, true) => down(stack, k).await?,
            (false, false) => up(stack, k).await?,
            _ => {}
        }
    }
    Ok(())
}

impl Run<'_> {
    /// Node `k` restarts empty (killed, if it was up, then started again),
    /// and the buyers waiting for the lock are woken.
    pub(in crate::explore) async fn node_restart(&mut self, k: usize) -> anyhow::Result<()> {
        if is_up(self.stack, k).await? {
            down(self.stack, k).await?;
        }
        up(self.stack, k).await?;
        self.wake().await
    }

    /// The nodes down now.
    pub(in crate::explore) async fn nodes_down(&self) -> anyhow::Result<Vec<usize>> {
        let mut down = Vec::new();
        for k in 0..self.nodes.len() {
            if !is_up(self.stack, k).await? {
                down.push(k);
            }
        }
        Ok(down)
    }
}

/// Clients of the nodes of `variant`'s lock on `stack` (Redlock's; none
/// for the others). An attached stack shows none: Redlock is explored on
/// a stack of the explorer's own.
pub(in crate::explore) fn nodes_of(
    stack: &Stack,
    variant: crate::variants::Variant,
) -> anyhow::Result<Vec<redis::Client>> {
    if variant != crate::variants::Variant::Redlock {
        return Ok(Vec::new());
    }
    if stack.redlock_nodes.is_empty() {
        bail!("redlock is explored on a stack of the explorer's own, whose Redlock nodes it sees");
    }
    let nodes = stack.redlock_nodes.iter();
    Ok(nodes
        .map(|node| redis::Client::open(node.url.as_str()))
        .collect::<Result<_, _>>()?)
}

/// A connection to a Redlock node, `None` when it is down.
pub(in crate::explore) async fn node_conn(
    node: &redis::Client,
) -> Option<redis::aio::MultiplexedConnection> {
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_millis(200)));
    node.get_multiplexed_async_connection_with_config(&config)
        .await
        .ok()
}
