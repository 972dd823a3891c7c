//! Redlock in a replay. The model asks its three nodes one after another;
//! the code asks every node at once, each question held at its own gate
//! (`vote:K`) and its answer noted at `voted:K`. A model step that asks
//! node K lets the buyer's `vote:K` go and waits for its `voted:K`, so the
//! live round asks the nodes in the model's order, one at a time. The
//! round counts by itself once every node answered: the model's count is
//! the buyer reaching `after_acquire` (a majority) or its next round's
//! first vote (none). A tick on which a node's lease runs out waits until
//! the live node's key is gone.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use redis::AsyncCommands;

use super::live::{Live, name};
use crate::check::model::redlock::Pc;
use crate::check::model::{At, World};
use crate::gate::points::VOTE;

impl Live<'_> {
    /// Buyer `n`'s Redlock step from `from` to `to` (the world before it).
    pub(super) async fn redlock_step(
        &mut self,
        n: u8,
        from: Pc,
        to: Pc,
        before: &World,
    ) -> anyhow::Result<String> {
        let i = usize::from(n);
        let mut said = Vec::new();
        match from {
            Pc::Acquire | Pc::Vote => {
                if from == Pc::Acquire {
                    // A round begins: the first at the section's door.
                    if *self.rounds.entry(n).or_insert(0) == 0 {
                        self.reach(n, "before_acquire").await?;
                        let arrival = self.heard.remove(&n).context("no arrival")?;
                        self.scheduler.release(&arrival).await?;
                        said.push(format!("{} goes on from before_acquire", name(n)));
                    }
                    *self.rounds.entry(n).or_insert(0) += 1;
                }
                let k = match from {
                    Pc::Acquire => 0,
                    _ => usize::from(before.buyers[i].asked),
                };
                let vote = self.vote_of(n, k).await?;
                self.scheduler.release(&vote).await?;
                self.voted_of(n, k).await?;
                said.push(format!(
                    "{} asks node {} ({VOTE}:{k} goes; the node answers)",
                    name(n),
                    k + 1
                ));
            }
            Pc::Count if crate::check::model::Pc::from(to).at() == At::Read => {
                let passed = self.reach(n, "after_acquire").await?;
                said.push(match passed.is_empty() {
                    true => "its round counts a majority: now at after_acquire".to_owned(),
                    false => format!("through {}, now at after_acquire", passed.join(", ")),
                });
            }
            Pc::Count => {
                said.push("its round counts no majority: it lets go and tries again".to_owned())
            }
            other => bail!("{other:?} is not a step of a Redlock round"),
        }
        Ok(said.join("; "))
    }

    /// Buyer `n`'s question to node `k`, held at `vote:k`.
    async fn vote_of(&mut self, n: u8, k: usize) -> anyhow::Result<crate::gate::Arrival> {
        let heard = |live: &Self| live.votes.contains_key(&(n, k));
        self.keep_until(heard, || format!("{} reached no {VOTE}:{k}", name(n)))
            .await?;
        self.votes.remove(&(n, k)).context("a vote heard")
    }

    /// Waits for the answer of buyer `n`'s current round from node `k`.
    async fn voted_of(&mut self, n: u8, k: usize) -> anyhow::Result<()> {
        let round = self.rounds.get(&n).copied().unwrap_or(1);
        let answered = |live: &Self| live.voted.get(&(n, k)).copied().unwrap_or(0) >= round;
        self.keep_until(answered, || {
            format!("node {} answered {} nothing", k + 1, name(n))
        })
        .await
    }

    /// Waits until node `k`'s key is gone (its lease ran out).
    pub(super) async fn node_lock_gone(&mut self, k: usize) -> anyhow::Result<String> {
        let node = self
            .stack
            .redlock_nodes
            .get(k)
            .with_context(|| format!("the stack has no Redlock node {k}"))?;
        let mut conn = redis::Client::open(node.url.as_str())?
            .get_multiplexed_async_connection()
            .await?;
        let started = Instant::now();
        let limit = Duration::from_millis(self.lease_ms) + Duration::from_secs(2);
        while conn.exists::<_, bool>(&self.keys.lock).await? {
            if started.elapsed() > limit {
                bail!("node {k}'s lock outlived its lease by 2 s");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(format!(
            "node {}'s lease ran out ({} ms later)",
            k + 1,
            started.elapsed().as_millis()
        ))
    }
}

impl Live<'_> {
    /// Kills live node `k` (SIGKILL), and waits until its port is closed.
    pub(super) async fn node_down(&mut self, k: usize) -> anyhow::Result<()> {
        let node = self
            .stack
            .redlock_nodes
            .get(k)
            .with_context(|| format!("the stack has no Redlock node {k}"))?;
        match self.restarted.remove(&k) {
            // One the replay started: stopped by its handle.
            Some(mut server) => server.stop().await,
            None => crate::os::signal(node.pid, nix::sys::signal::Signal::SIGKILL),
        }
        let port = node.port().context("a Redlock node without a port")?;
        match crate::os::until_closed(port, Duration::from_secs(5)).await {
            true => Ok(()),
            false => bail!("Redlock node {} still answers 5 s after SIGKILL", k + 1),
        }
    }

    /// Node `k` restarts empty (killed first if it was up): a new
    /// redis-server on its port, with nothing of the old one's.
    pub(super) async fn node_restart(&mut self, k: usize, was_up: bool) -> anyhow::Result<String> {
        if was_up {
            self.node_down(k).await?;
        }
        let port = self.stack.redlock_nodes[k]
            .port()
            .context("a Redlock node without a port")?;
        let server = crate::up::redis::RedisServer::start(Some(port)).await?;
        self.restarted.insert(k, server);
        Ok(match was_up {
            true => format!("node {} is killed and starts again, empty", k + 1),
            false => format!("node {} starts again, empty", k + 1),
        })
    }
}
