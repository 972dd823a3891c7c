//! A counterexample in words: each step of a path as the table, the JSON
//! and the drawings say it ("A takes the lock", "tick 3: A wakes").

use super::Step;
use super::model::{self, Action, Sale, World};
use super::protocol::{Acquire, Enqueue};

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
            moment(before.buyers[usize::from(n)].pc)
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
            script_result(sale, before, n, after)
        ),
        Action::Order(step) => super::pipeline::describe(before, step, after),
        Action::Step(n) if before.redis == model::Outage::Down => {
            format!("{}'s call fails: Redis is down (503)", name(n))
        }
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
                model::Pc::Acquire if sale.protocol.acquire == Acquire::Atomic => {
                    let in_script = sale.bounds.orders.is_some()
                        && sale.protocol.enqueue == Enqueue::InScript
                        && script_sold(before, after, n);
                    let order = match in_script {
                        true => " (its order's message in it)",
                        false => "",
                    };
                    format!(
                        "{} in one script{order}",
                        script_result(sale, before, n, after)
                    )
                }
                model::Pc::Acquire if now.token > was.token => {
                    format!("takes the lock with fencing token {}", now.token)
                }
                model::Pc::Acquire if after.lock != before.lock || now.holds_mutex => {
                    "takes the lock".to_owned()
                }
                model::Pc::Acquire if now.pc == model::Pc::ReadExpiry => {
                    "finds the lock taken".to_owned()
                }
                model::Pc::Acquire if now.pc == model::Pc::Read => "goes in (no lock)".to_owned(),
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
                model::Pc::Read if now.pc == model::Pc::Work => {
                    format!("reads stock {}", now.read)
                }
                model::Pc::Read => "is refused or finds it sold out".to_owned(),
                model::Pc::Work => "ends its work".to_owned(),
                model::Pc::Check if now.pc == model::Pc::Write => {
                    "hears from its watchdog: still held".to_owned()
                }
                model::Pc::Check if was.lost => {
                    "hears from its watchdog: lock lost, no write".to_owned()
                }
                model::Pc::Check => {
                    "is past its local deadline (no renewal for a lease): no write".to_owned()
                }
                model::Pc::Write if sold => format!("writes: sells unit {}", was.read),
                model::Pc::Write if was.read_epoch != before.epoch => {
                    "writes: refused, its read came before the SKU's reset".to_owned()
                }
                model::Pc::Write
                    if !matches!(before.request, model::Request::Pending(m, _) if m == n)
                        && sale.claims_ids() =>
                {
                    "writes: refused, its request id's claim was taken over".to_owned()
                }
                model::Pc::Write => "writes with a stale token: refused".to_owned(),
                model::Pc::Release => "releases".to_owned(),
                model::Pc::Vote => "asks a node".to_owned(),
                model::Pc::Claim
                    if now.pc == model::Pc::Acquire
                        && matches!(before.request, model::Request::Pending(..)) =>
                {
                    "takes over the request id's expired claim".to_owned()
                }
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
                model::Pc::Count if was.votes.count_ones() as u8 >= sale.majority() => {
                    "counts a majority, but its round outlived the lease: lets go, tries again"
                        .to_owned()
                }
                model::Pc::Count => "has no majority: lets go, tries again".to_owned(),
                model::Pc::Retry => format!(
                    "asks again with its request id: {}",
                    script_result(sale, before, n, after)
                ),
                model::Pc::Enqueue => "adds its order's message (XADD)".to_owned(),
                model::Pc::Done => "is done".to_owned(),
            };
            format!("{} {what}", name(n))
        }
    }
}

/// Whether buyer `n`'s sale script sold a unit between `before` and `after`.
pub(super) fn script_sold(before: &World, after: &World, n: u8) -> bool {
    let i = usize::from(n);
    after.script_sales[i] > before.script_sales[i]
}

/// What buyer `n`'s script did: sold, answered from its id's record, or
/// found the SKU sold out.
fn script_result(sale: &Sale, before: &World, n: u8, after: &World) -> String {
    let recorded = sale
        .script_id(n)
        .is_some_and(|id| before.answered & (1 << id) != 0);
    if script_sold(before, after, n) {
        format!("sells unit {}", after.buyers[usize::from(n)].read)
    } else if recorded {
        "its id has a record: answered from it, nothing sold".to_owned()
    } else {
        "finds it sold out".to_owned()
    }
}

/// Where a buyer at `pc` is, in a few words (where a freeze finds it).
fn moment(pc: model::Pc) -> &'static str {
    match pc {
        model::Pc::Vote | model::Pc::Count => "in the middle of its round of votes",
        model::Pc::Expire => "between SETNX and EXPIRE",
        model::Pc::ReadExpiry | model::Pc::TakeOver => "while taking an expired lock over",
        model::Pc::WaitReplica => "before its WAIT",
        model::Pc::Read => "before its read",
        model::Pc::Work => "in its business work",
        model::Pc::Check => "before its watchdog's word",
        model::Pc::Write => "before its write",
        model::Pc::Release => "before its release",
        _ => "in its section",
    }
}
