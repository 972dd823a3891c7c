//! Who holds a Redlock right now, as its nodes say: the dashboard's view of
//! the `redlock` card's lock, which lives on the nodes, not the main Redis.

use std::time::Duration;

use super::Redlock;

/// Who holds a Redlock right now, as the nodes say (for the dashboard).
///
/// ```no_run
/// # async fn example(lock: stocklock_lock::Redlock) {
/// let holding = lock.holding().await; // GET and PTTL on every node
/// if let Some((owner, nodes)) = &holding.owner {
///     let majority = *nodes >= lock.quorum();
///     println!("{owner} on {nodes} of {} answering (majority: {majority})", holding.answered);
/// }
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holding {
    /// The owner most nodes name, and on how many nodes.
    pub owner: Option<(String, usize)>,
    /// The shortest lease left among that owner's nodes.
    pub ttl: Option<Duration>,
    /// Nodes that answered.
    pub answered: usize,
}

impl Redlock {
    /// Asks every node who holds the lock (GET and PTTL, node timeout each).
    pub async fn holding(&self) -> Holding {
        let answers = self
            .nodes
            .ask_every_node(|mut conn| async move {
                let (owner, pttl): (Option<String>, i64) = redis::pipe()
                    .get(&self.key)
                    .pttl(&self.key)
                    .query_async(&mut conn)
                    .await?;
                Ok((owner, pttl))
            })
            .await;
        let answered = answers.iter().flatten().count();
        let mut counts: std::collections::BTreeMap<String, (usize, i64)> = Default::default();
        for (owner, pttl) in answers.into_iter().flatten() {
            if let Some(owner) = owner {
                let entry = counts.entry(owner).or_insert((0, i64::MAX));
                entry.0 += 1;
                entry.1 = entry.1.min(pttl);
            }
        }
        let top = counts.into_iter().max_by_key(|(_, (n, _))| *n);
        Holding {
            ttl: top
                .as_ref()
                .and_then(|(_, (_, pttl))| u64::try_from(*pttl).ok())
                .map(Duration::from_millis),
            owner: top.map(|(owner, (n, _))| (owner, n)),
            answered,
        }
    }
}
