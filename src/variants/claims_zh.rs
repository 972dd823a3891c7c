//! The claims in Chinese: each behaviour's word and each note a variant's
//! row of the matrix uses, for the Chinese pages. One table: a note
//! written in a variant's file without its Chinese here fails
//! `every_claim_has_its_chinese` below.

use super::claims::{Behaviour, Claim};

impl Behaviour {
    /// [`Behaviour::name`] in Chinese.
    pub fn name_zh(self) -> &'static str {
        match self {
            Behaviour::NotApplicable => "-",
            Behaviour::Safe => "安全",
            Behaviour::Oversells => "超卖",
            Behaviour::Deadlock => "死锁",
            Behaviour::Frees => "锁会释放",
            Behaviour::Recovers => "能恢复",
            Behaviour::KeepsSelling => "照常卖出",
            Behaviour::Busy => "忙",
            Behaviour::LosesUnits => "少卖",
        }
    }
}

impl Claim {
    /// [`Claim::text`] in Chinese: `安全(过期的 token 被拒绝)`.
    pub fn text_zh(&self) -> String {
        match self.note {
            "" => self.behaviour.name_zh().to_owned(),
            note => format!(
                "{}({})",
                self.behaviour.name_zh(),
                note_zh(note).unwrap_or(note)
            ),
        }
    }
}

/// A claim's note in Chinese; `None` for a note this table lacks.
pub fn note_zh(note: &str) -> Option<&'static str> {
    Some(match note {
        "Redis keeps the time" => "时间由 Redis 计",
        "Redis only filters: the truth is in PostgreSQL" => "Redis 只做过滤:真相在 PostgreSQL",
        "WAIT covers the lock, not the write the failover rolls back" => {
            "WAIT 保住了锁,保不住被故障转移回滚的写入"
        }
        "WAIT saw no replica: released" => "WAIT 没等到副本:锁已释放",
        "a second owner finds a majority" => "第二个持有者也拿到了多数派",
        "adds nothing to the race" => "对并发竞争没有影响",
        "after expiry" => "过期之后",
        "after lease" | "after the lease" => "租约到期之后",
        "after lease: the EXPIRE was set" => "租约到期之后:EXPIRE 已设上",
        "after the session" => "会话结束之后",
        "committed or rolled back; each id resolves" => "要么提交要么回滚;每个 id 都有结论",
        "cut-off batches: every id resolves" => "被切断的批次:每个 id 都有结论",
        "deleted after the last renewal: nothing notices before the write" => {
            "在最后一次续约之后被删:写入之前没人发现"
        }
        "each unpaid unit returned once" => "每件未付款的商品只退回一次",
        "every unknown id resolves" => "每个结果未知的 id 都有结论",
        "frees others' locks" => "释放了别人的锁",
        "holds no lock while working" => "执行业务时不持有锁",
        "in-flight orders go with Redis; reconcile says LEDGER_LOST" => {
            "在途订单随 Redis 一起丢失;`reconcile` 报告 `LEDGER_LOST`"
        }
        "its nodes are not replicated" => "它的节点没有副本",
        "lease kept alive" => "租约一直续着",
        "lock never expires" => "锁永不过期",
        "no gap in the sale: one script" => "售卖没有空隙:一个脚本",
        "no gap: one script per batch" => "没有空隙:每批一个脚本",
        "no gap: one script" => "没有空隙:一个脚本",
        "no lease" => "没有租约",
        "no lock to lose" => "没有可丢的锁",
        "no lock" => "没有锁",
        "no quorum; sells again when the nodes return" => "凑不够多数派;节点回来后恢复售卖",
        "one mutex per process" => "每个进程一把互斥锁",
        "one process, one mutex" => "一个进程,一把互斥锁",
        "one sale per request_id" => "每个 request_id 只卖一次",
        "orders wait in the stream" => "订单在流里等着",
        "redelivered, inserted once" => "重新投递,只插入一次",
        "renewed" => "已续约",
        "session kept alive" => "会话一直保持",
        "stale revision refused" => "过期的 `revision` 被拒绝",
        "stale token refused" | "the store refuses the stale token" => "存储拒绝过期的 token",
        "stale zxid refused" => "过期的 `zxid` 被拒绝",
        "steals a live lock" => "抢走了仍然有效的锁",
        "the crash comes between the sale and its XADD" => "崩溃发生在售出与 XADD 之间",
        "the database answers whom Redis turned away" => "被 Redis 拒绝的买家由数据库回答",
        "the database ends a silent holder's session within its lease: its late write is refused" => {
            "数据库在租约内结束了沉默持有者的会话:它迟到的写入被拒绝"
        }
        "the fence counter failed over with the lock" => "fencing 计数器随锁一起故障转移",
        "the lock is in the process" => "锁在进程里",
        "the lock is the transaction's, heard while it works" => {
            "锁属于事务,事务执行时一直有人应答"
        }
        "the lock lives on ZooKeeper" => "锁在 ZooKeeper 上",
        "the lock lives on etcd" => "锁在 etcd 上",
        "the lock lives on the Redlock nodes" => "锁在 Redlock 的节点上",
        "the lock never reached the replica" => "锁没有同步到副本",
        "the lock outlives a server" => "一台服务器挂了,锁还在",
        "the lock outlives the leader" => "领导者挂了,锁还在",
        "the order is in the sale's script" => "订单就在售卖的脚本里",
        "the renewal notices first; the holder backs off" => "续约先发现;持有者退出",
        "the renewal notices; the holder backs off" => "续约发现了;持有者退出",
        "the row stays locked through the work" => "业务期间这一行一直锁着",
        "the stock is in PostgreSQL" => "库存在 PostgreSQL 里",
        "the transaction dies with its connection" => "事务随连接一起结束",
        "token shows it" => "由 `token` 变体演示",
        "unknown, then its id's record" => "先是 `unknown`,再由 id 的记录给出结果",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::note_zh;
    use crate::variants::{Scenario, Variant};

    #[test]
    fn every_claim_has_its_chinese() {
        let names = Variant::and_scenario_names();
        for variant in Variant::ALL {
            for scenario in Scenario::ALL {
                let claim = scenario.claim(variant);
                if !claim.note.is_empty() {
                    assert!(
                        note_zh(claim.note).is_some(),
                        "{variant:?} {scenario:?}: {:?} has no Chinese",
                        claim.note
                    );
                }
                let zh = crate::wire::Said {
                    en: claim.text(),
                    zh: claim.text_zh(),
                };
                assert_eq!(zh.stray_english(&names), Vec::<String>::new(), "{}", zh.zh);
            }
        }
    }
}
