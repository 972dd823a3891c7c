//! A counterexample in words: each step of a path as the table, the JSON
//! and the drawings say it ("A takes the lock", "tick 3: A wakes").

use super::Step;
use super::model::{self, Action, Sale, World, script};

/// A path of `sale`'s model in words.
pub fn steps(sale: &Sale, path: &[(World, Option<Action>)]) -> Vec<Step> {
    path.windows(2)
        .filter_map(|pair| {
            let (before, action) = (&pair[0].0, pair[0].1?);
            let after = &pair[1].0;
            Some(Step {
                action,
                text: describe(sale, before, action, after),
                at: before.now,
            })
        })
        .collect()
}

/// What `action` of `sale`'s model did between `before` and `after`.
pub fn describe(sale: &Sale, before: &World, action: Action, after: &World) -> String {
    let name = |n: u8| char::from(b'A' + n);
    match action {
        Action::Tick | Action::LateTick(_) => {
            let mut events = Vec::new();
            if let Action::LateTick(n) = action {
                events.push(format!("{}'s renewal comes late", name(n)));
            }
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
            let expired =
                |nodes: &[model::Node]| nodes.iter().filter(|node| node.lock.is_some()).count();
            if expired(&before.nodes) > expired(&after.nodes) {
                events.push("node leases run out".to_owned());
            }
            match events.is_empty() {
                true => format!("tick {}", after.now),
                false => format!("tick {}: {}", after.now, events.join(", ")),
            }
        }
        Action::Crash(n) => format!("{} crashes", name(n)),
        Action::Freeze(n) => format!(
            "{} freezes ({}), past its lease",
            name(n),
            before.buyers[usize::from(n)].pc.moment()
        ),
        Action::Vanish => "the lock key vanishes".to_owned(),
        Action::Restart(k) if !before.nodes[usize::from(k)].up => {
            format!("node {} comes back, empty", k + 1)
        }
        Action::Restart(k) => format!("node {} restarts empty", k + 1),
        Action::HoldReplication => "replication to the replica stops".to_owned(),
        Action::Failover => "the master dies: its replica is promoted".to_owned(),
        Action::RedisDown => {
            let cut: Vec<String> = (before.buyers.iter().zip(&after.buyers))
                .enumerate()
                .filter(|(_, (was, now))| was.pc != now.pc)
                .map(|(n, _)| name(n as u8).to_string())
                .collect();
            match cut.is_empty() {
                true => "Redis stops: every call fails (503)".to_owned(),
                false => format!(
                    "Redis stops: every call fails (503); {} ends with it",
                    cut.join(" and ")
                ),
            }
        }
        Action::RedisBack => format!(
            "Redis comes back empty; the SKU is reset (stock {})",
            after.stock
        ),
        Action::CutOff(n) => format!(
            "{}'s call waits on a paused Redis: told unknown, its script queued",
            name(n)
        ),
        Action::Deliver(n) => format!(
            "Redis wakes and runs {}'s queued script: {}",
            name(n),
            script::says_result(sale, before, n, after)
        ),
        Action::AnswerLost(n) => format!(
            "{}'s commit is run by PostgreSQL and its answer lost on the way back (unknown): {}",
            name(n),
            match after.sold == before.sold {
                true => "nothing sold",
                false => "a unit sold",
            }
        ),
        Action::DatabaseCrash(lost) => {
            let rolled_back: Vec<String> = (0..before.buyers.len())
                .filter(|&n| before.buyers[n].holds_mutex && Some(n as u8) != lost)
                .map(|n| name(n as u8).to_string())
                .collect();
            let mut text = "PostgreSQL crashes and starts again on what it committed".to_owned();
            if let Some(n) = lost {
                text += &format!(
                    "; {}'s commit made it, its answer lost (unknown): {}",
                    name(n),
                    match after.sold == before.sold {
                        true => "nothing sold",
                        false => "a unit sold",
                    }
                );
            }
            if !rolled_back.is_empty() {
                text += &format!(
                    "; {}'s transaction rolled back (503), its lock with it",
                    rolled_back.join(" and ")
                );
            }
            text
        }
        Action::Order(step) => super::pipeline::describe(before, step, after),
        Action::Step(n) if before.redis == model::Outage::Down => {
            format!("{}'s call fails: Redis is down (503)", name(n))
        }
        Action::Step(n) => {
            let pc = before.buyers[usize::from(n)].pc;
            format!("{} {}", name(n), pc.says(sale, before, after, n))
        }
    }
}
