//! A counterexample in words: each step of a path as the table, the JSON
//! and the drawings say it ("A takes the lock", "tick 3: A wakes").

use super::Step;
use super::model::{self, Action, World};

/// A path's steps in words.
pub fn steps(path: &[(World, Option<Action>)]) -> Vec<Step> {
    path.windows(2)
        .filter_map(|pair| {
            let (before, action) = (&pair[0].0, pair[0].1?);
            let after = &pair[1].0;
            Some(Step {
                action,
                text: describe(before, action, after),
                at: before.now,
            })
        })
        .collect()
}

/// What `action` did between `before` and `after`.
pub fn describe(before: &World, action: Action, after: &World) -> String {
    let name = |n: u8| char::from(b'A' + n);
    match action {
        Action::Tick => {
            let mut events = Vec::new();
            if before.lock.is_some() && after.lock.is_none() {
                events.push("the lock's lease runs out".to_owned());
            }
            for (n, (was, now)) in before.buyers.iter().zip(&after.buyers).enumerate() {
                let n = name(n as u8);
                if was.frozen_until.is_some() && now.frozen_until.is_none() {
                    events.push(format!("{n} wakes"));
                }
                if !was.lost && now.lost {
                    events.push(format!("{n}'s watchdog finds the lock gone"));
                }
            }
            match events.is_empty() {
                true => format!("tick {}", after.now),
                false => format!("tick {}: {}", after.now, events.join(", ")),
            }
        }
        Action::Crash(n) => format!("{} crashes", name(n)),
        Action::Freeze(n) => format!("{} freezes before its write", name(n)),
        Action::Vanish => "the lock key vanishes".to_owned(),
        Action::Restart(k) => format!("node {} restarts empty", k + 1),
        Action::HoldReplication => "replication to the replica stops".to_owned(),
        Action::Failover => "the master dies: its replica is promoted".to_owned(),
        Action::Step(n) => {
            let i = usize::from(n);
            let (was, now) = (&before.buyers[i], &after.buyers[i]);
            let sold = after.sold != before.sold;
            if !before.nodes.is_empty() && matches!(was.pc, model::Pc::Acquire | model::Pc::Vote) {
                // Redlock's SET NX PX on one node.
                let k = if was.pc == model::Pc::Acquire {
                    0
                } else {
                    was.asked
                };
                let said = match now.votes & (1 << k) {
                    0 => "is refused by",
                    _ => "gets",
                };
                return format!("{} {said} node {}", name(n), k + 1);
            }
            let what = match was.pc {
                model::Pc::Acquire if before.stock != after.stock => {
                    format!("sells unit {} in one script", before.stock)
                }
                model::Pc::Acquire if after.lock != before.lock || now.holds_mutex => {
                    "takes the lock".to_owned()
                }
                model::Pc::Acquire if now.pc == model::Pc::ReadExpiry => {
                    "finds the lock taken".to_owned()
                }
                model::Pc::Acquire if now.pc == model::Pc::Read => "goes in (no lock)".to_owned(),
                model::Pc::Acquire if now.pc == model::Pc::Done && before.stock == 0 => {
                    "finds it sold out (one script)".to_owned()
                }
                model::Pc::Acquire => "finds the lock taken: busy".to_owned(),
                model::Pc::Expire => "sets the lock's TTL (EXPIRE)".to_owned(),
                model::Pc::ReadExpiry if now.pc == model::Pc::TakeOver => {
                    "reads an expiry time that has passed by its clock".to_owned()
                }
                model::Pc::ReadExpiry => "reads a live expiry time: busy".to_owned(),
                model::Pc::TakeOver if now.pc == model::Pc::Read => {
                    "takes the lock over (GETSET)".to_owned()
                }
                model::Pc::TakeOver => "loses the GETSET race: busy".to_owned(),
                model::Pc::Token => format!("takes fencing token {}", now.token),
                model::Pc::Read if now.pc == model::Pc::Work => {
                    format!("reads stock {}", now.read)
                }
                model::Pc::Read => "is refused or finds it sold out".to_owned(),
                model::Pc::Work => "ends its work".to_owned(),
                model::Pc::Check if now.pc == model::Pc::Write => {
                    "hears from its watchdog: still held".to_owned()
                }
                model::Pc::Check => "hears from its watchdog: lock lost, no write".to_owned(),
                model::Pc::Write if sold => format!("writes: sells unit {}", was.read),
                model::Pc::Write => "writes with a stale token: refused".to_owned(),
                model::Pc::Release => "releases".to_owned(),
                model::Pc::Vote => "asks a node".to_owned(),
                model::Pc::Claim if now.pc == model::Pc::Acquire => {
                    "claims the request id".to_owned()
                }
                model::Pc::Claim => "finds the id claimed or answered: no sale".to_owned(),
                model::Pc::WaitReplica if now.pc == model::Pc::Read => {
                    "WAIT: a replica has the lock".to_owned()
                }
                model::Pc::WaitReplica => {
                    "WAIT: no replica has the lock, lets it go: busy".to_owned()
                }
                model::Pc::Count if now.pc == model::Pc::Read => {
                    format!("holds a majority ({} nodes)", was.votes.count_ones())
                }
                model::Pc::Count => "has no majority: lets go, tries again".to_owned(),
                model::Pc::Done => "is done".to_owned(),
            };
            format!("{} {what}", name(n))
        }
    }
}
