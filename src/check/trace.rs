//! A counterexample in words: each step of a path as the table, the JSON
//! and the drawings say it ("A takes the lock", "tick 3: A wakes").

use super::Step;
use super::model::{self, Action, Sale, World, script};
use crate::wire::Said;

/// A path of `sale`'s model in words.
pub fn steps(sale: &Sale, path: &[(World, Option<Action>)]) -> Vec<Step> {
    path.windows(2)
        .filter_map(|pair| {
            let (before, action) = (&pair[0].0, pair[0].1?);
            let after = &pair[1].0;
            let Said { en, zh } = describe(sale, before, action, after);
            Some(Step {
                action,
                text: en,
                text_zh: zh,
                at: before.now,
            })
        })
        .collect()
}

/// Buyer `n`'s letter: A, B, C.
fn name(n: u8) -> char {
    char::from(b'A' + n)
}

/// Buyers' letters joined: "A and B", "A 和 B".
fn letters(buyers: &[String]) -> Said {
    Said {
        en: buyers.join(" and "),
        zh: buyers.join(" 和 "),
    }
}

/// Nothing sold, or a unit sold, between `before` and `after`.
fn sold_or_not(before: &World, after: &World) -> Said {
    match after.sold == before.sold {
        true => crate::said!("nothing sold", "什么都没卖出"),
        false => crate::said!("a unit sold", "卖出了一件"),
    }
}

/// What `action` of `sale`'s model did between `before` and `after`.
pub fn describe(sale: &Sale, before: &World, action: Action, after: &World) -> Said {
    match action {
        Action::Tick | Action::LateTick(_) => tick(before, action, after),
        Action::Crash(n) => crate::said!("{} crashes", "{} 崩溃"; name(n)),
        Action::Freeze(n) => {
            let (n, moment) = (name(n), before.buyers[usize::from(n)].pc.moment());
            Said {
                en: format!("{n} freezes ({}), past its lease", moment.en),
                zh: format!("{n} 冻结({}),一直冻到租约过期之后", moment.zh),
            }
        }
        Action::Vanish => crate::said!("the lock key vanishes", "锁的键消失了"),
        Action::Restart(k) if !before.nodes[usize::from(k)].up => {
            crate::said!("node {} comes back, empty", "节点 {} 恢复,数据是空的"; k + 1)
        }
        Action::Restart(k) => {
            crate::said!("node {} restarts empty", "节点 {} 重启,数据清空"; k + 1)
        }
        Action::HoldReplication => {
            crate::said!("replication to the replica stops", "到副本的复制停了")
        }
        Action::Failover => crate::said!(
            "the master dies: its replica is promoted",
            "主节点宕机:它的副本被提升为主节点"
        ),
        Action::RedisDown => {
            let cut: Vec<String> = (before.buyers.iter().zip(&after.buyers))
                .enumerate()
                .filter(|(_, (was, now))| was.pc != now.pc)
                .map(|(n, _)| name(n as u8).to_string())
                .collect();
            let down = crate::said!(
                "Redis stops: every call fails (503)",
                "Redis 停止:每次调用都失败(503)"
            );
            match cut.is_empty() {
                true => down,
                false => {
                    let cut = letters(&cut);
                    down.then(
                        &Said::default(),
                        &Said {
                            en: format!("; {} ends with it", cut.en),
                            zh: format!(";{} 随之结束", cut.zh),
                        },
                    )
                }
            }
        }
        Action::RedisBack => crate::said!(
            "Redis comes back empty; the SKU is reset (stock {})",
            "Redis 恢复,数据是空的;这个 SKU 被重置(库存 {})";
            after.stock
        ),
        Action::CutOff(n) => crate::said!(
            "{}'s call waits on a paused Redis: told unknown, its script queued",
            "{} 的调用卡在暂停的 Redis 上:得到结果未知的答复,它的脚本排着队";
            name(n)
        ),
        Action::Deliver(n) => {
            let (n, result) = (name(n), script::says_result(sale, before, n, after));
            Said {
                en: format!("Redis wakes and runs {n}'s queued script: {}", result.en),
                zh: format!("Redis 醒来,执行 {n} 排队的脚本:{}", result.zh),
            }
        }
        Action::AnswerLost(n) => {
            let (n, sold) = (name(n), sold_or_not(before, after));
            Said {
                en: format!(
                    "{n}'s commit is run by PostgreSQL and its answer lost on the way back (unknown): {}",
                    sold.en
                ),
                zh: format!(
                    "{n} 的提交被 PostgreSQL 执行了,答复却在返回途中丢失(结果未知):{}",
                    sold.zh
                ),
            }
        }
        Action::DatabaseCrash(lost) => database_crash(before, lost, after),
        Action::Order(step) => super::pipeline::describe(before, step, after),
        Action::Step(n) if before.redis == model::Outage::Down => crate::said!(
            "{}'s call fails: Redis is down (503)",
            "{} 的调用失败:Redis 宕机了(503)";
            name(n)
        ),
        Action::Step(n) => {
            let pc = before.buyers[usize::from(n)].pc;
            let says = pc.says(sale, before, after, n);
            let n = name(n);
            Said {
                en: format!("{n} {}", says.en),
                zh: format!("{n} {}", says.zh),
            }
        }
    }
}

/// A tick, and what happened on it: a late renewal, a lease run out, a
/// buyer woken, a watchdog finding its lock gone, node leases run out.
fn tick(before: &World, action: Action, after: &World) -> Said {
    let mut events = Vec::new();
    if let Action::LateTick(n) = action {
        let n = name(n);
        events.push(crate::said!("{n}'s renewal comes late", "{n} 的续约来迟了"));
    }
    if before.lock.is_some() && after.lock.is_none() {
        events.push(crate::said!("the lock's lease runs out", "锁的租约到期"));
    }
    for (n, (was, now)) in before.buyers.iter().zip(&after.buyers).enumerate() {
        let n = name(n as u8);
        if was.frozen_until.is_some() && now.frozen_until.is_none() {
            events.push(crate::said!("{n} wakes", "{n} 醒来"));
        }
        if !was.lost && now.lost {
            events.push(crate::said!(
                "{n}'s watchdog finds the lock gone",
                "{n} 的看门狗发现锁已经没了"
            ));
        }
    }
    let expired = |nodes: &[model::Node]| nodes.iter().filter(|node| node.lock.is_some()).count();
    if expired(&before.nodes) > expired(&after.nodes) {
        events.push(crate::said!("node leases run out", "节点上的租约到期"));
    }
    let now = after.now;
    let tick = crate::said!("tick {now}", "第 {now} 拍");
    match events.is_empty() {
        true => tick,
        false => tick.then(
            &crate::said!(": ", ":"),
            &Said::join(&events, &crate::said!(", ", ",")),
        ),
    }
}

/// The database crashing: the commit whose answer it lost, if any, and
/// the transactions it rolled back.
fn database_crash(before: &World, lost: Option<u8>, after: &World) -> Said {
    let rolled_back: Vec<String> = (0..before.buyers.len())
        .filter(|&n| before.buyers[n].holds_mutex && Some(n as u8) != lost)
        .map(|n| name(n as u8).to_string())
        .collect();
    let mut said = crate::said!(
        "PostgreSQL crashes and starts again on what it committed",
        "PostgreSQL 崩溃,用它已提交的数据重新启动"
    );
    if let Some(n) = lost {
        let (n, sold) = (name(n), sold_or_not(before, after));
        said = said.then(
            &Said::default(),
            &Said {
                en: format!(
                    "; {n}'s commit made it, its answer lost (unknown): {}",
                    sold.en
                ),
                zh: format!(";{n} 的提交生效了,答复却丢了(结果未知):{}", sold.zh),
            },
        );
    }
    if !rolled_back.is_empty() {
        let rolled_back = letters(&rolled_back);
        said = said.then(
            &Said::default(),
            &Said {
                en: format!(
                    "; {}'s transaction rolled back (503), its lock with it",
                    rolled_back.en
                ),
                zh: format!(";{} 的事务被回滚(503),它的锁也随之释放", rolled_back.zh),
            },
        );
    }
    said
}
