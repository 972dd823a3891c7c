//! Step mode: the learner is the scheduler. A run of three buyers of one
//! cell on the live stack (chaos mode), each on a SKU of its own, driven
//! by the explorer's [`Session`](crate::explore::Session): the learner picks each step among those
//! the session offers (a buyer let go from its gate, one of the scenario's
//! faults), and after every step reads the stores' real state.
//!
//! A run lives in the instance that started it (its buyers' requests are
//! that process's), but any instance takes its steps: a step is a command
//! pushed on the run's list in Redis, which the run pops, takes, and
//! answers with the view after it (on a reply list of the command's own).
//! Every instance reads the run's last view from Redis. A run nobody
//! moves for [`IDLE`] ends by itself, letting its buyers go.
//!
//! Every fault it offers touches only the run's SKU and buyers (the lock
//! deleted, the lease run out, a buyer crashed or frozen, Redis's restart
//! as the SKU sees it): learners on one stack never disturb each other.
//! The cells whose faults would touch the whole stack (a paused Redis, a
//! failover, the order pipeline's faults) and Redlock's (whose nodes the
//! run does not see) are not offered.

pub mod anyway;
mod driver;
mod plan;

use std::time::Duration;

use anyhow::{Context, bail};
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};

use crate::check::{self, protocol::Protocol};
use crate::explore::{Choice, Lane, matrix};
use crate::harness::stack::Stack;
use crate::store::Store;
use crate::variants::{Scenario, Variant};
use crate::wire::StateSnapshot;

/// How long a run may wait for its next step before it ends itself.
pub const IDLE: Duration = Duration::from_secs(15 * 60);
/// How long a step may take before its caller stops waiting for the view.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(60);
/// The buyers' lease: the learner lets it run out (a button), it never
/// runs out by itself while someone thinks.
const LEASE_MS: u64 = crate::knobs::MAX_LEASE_MS;
/// How many buyers a run may have: the checker's three, or two.
pub const BUYERS: std::ops::RangeInclusive<u8> = 2..=3;
/// How many gates one buyer's step of the shortest way may pass.
const MAX_GATES: usize = 10;
/// How often a waiting run looks for a command.
const POLL: Duration = Duration::from_millis(50);

/// Step mode's keys: each run's view, commands and replies.
fn key(id: &str, what: &str) -> String {
    format!("{{stocklock:step}}:{id}:{what}")
}

/// Why a cell of a stack with a paused Redis is not played.
const PAUSE_STOPS_EVERYONE: &str =
    "a paused Redis would stop every learner's run, and the gates with it";
/// Why the order pipeline's cells are not played.
const ORDERS_WHOLE_STACK: &str = "the order pipeline is scheduled for the whole stack: `stocklock explore` plays it on a stack of its own";
/// Why Redlock's cells are not played.
const REDLOCK_NODES: &str =
    "Redlock's nodes are restarted and read by `stocklock explore` on a stack of its own";
/// Why a cell without a claim is not played.
const NO_CLAIM: &str = "the variant makes no claim in this scenario";

/// [`unplayable`]'s reason in Chinese.
pub fn in_chinese(why: &str) -> &'static str {
    match why {
        PAUSE_STOPS_EVERYONE => "暂停 Redis 会让每个学员的运行都停下来,闸门也一起停",
        ORDERS_WHOLE_STACK => {
            "订单流水线是整套环境一起调度的:`stocklock explore` 在它自己的一套环境上演示它"
        }
        REDLOCK_NODES => "Redlock 的节点由 `stocklock explore` 在它自己的一套环境上重启和读取",
        NO_CLAIM => "这个变体在这个场景下没有结论",
        matrix::FAILOVER_NEEDS_OWN_STACKS => {
            "故障转移无法撤销:每个调度都在探索器自己的一套环境上运行"
        }
        matrix::DATABASE_FAULTS_NOT_STRUCK => {
            "PostgreSQL 在买家之下崩溃,或者提交的应答丢失:探索器不注入这些故障(`stocklock lab` 演示它们,`stocklock check` 探索它们的模型)"
        }
        _ => "(没有中文说明)",
    }
}

/// Why step mode cannot play a cell on a live stack, or `None` when it can.
pub fn unplayable(variant: Variant, scenario: Scenario) -> Option<&'static str> {
    if !scenario.claim(variant).applies() {
        return Some(NO_CLAIM);
    }
    let bounds = check::bounds(scenario, Protocol::of(variant));
    if bounds.cutoffs > 0 {
        return Some(PAUSE_STOPS_EVERYONE);
    }
    if bounds.failovers > 0 {
        return Some(matrix::FAILOVER_NEEDS_OWN_STACKS);
    }
    if bounds.database_faults() {
        return Some(matrix::DATABASE_FAULTS_NOT_STRUCK);
    }
    if bounds.orders.is_some() {
        return Some(ORDERS_WHOLE_STACK);
    }
    if variant == Variant::Redlock {
        return Some(REDLOCK_NODES);
    }
    None
}

/// What the page shows of a run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StepView {
    pub id: String,
    pub variant: String,
    pub scenario: String,
    pub sku: String,
    /// Counts the views published: a newer view has a larger one.
    pub version: u64,
    pub lanes: Vec<Lane>,
    /// What may happen now: the buyers' releases, then the faults.
    pub releases: Vec<Choice>,
    pub faults: Vec<Choice>,
    pub steps: Vec<Choice>,
    /// The SKU as the stores hold it now, and its lock's last fencing
    /// token.
    pub state: Option<StateSnapshot>,
    pub fence: Option<i64>,
    /// The run is over (every buyer answered or dead, or it was ended).
    pub over: bool,
    /// How far the checker's shortest way was played, of how many steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shortest: Option<(usize, usize)>,
    /// Every step so far was the checker's shortest way's (none the
    /// learner's own): the run is the checker's, not the learner's.
    #[serde(default)]
    pub by_checker: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<StepVerdict>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The ledger's verdict on a run that is over, beside the checker's.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StepVerdict {
    pub violation: bool,
    pub ledger: String,
    /// The same, in Chinese.
    #[serde(default)]
    pub ledger_zh: String,
    /// The property the checker's shortest counterexample of the cell
    /// breaks, and its steps; `None` where the checker finds none.
    pub checker_breaks: Option<String>,
    /// `checker_breaks` in Chinese.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checker_breaks_zh: Option<String>,
    pub checker_steps: Option<usize>,
    /// The states the checker explored of the cell's model.
    #[serde(default)]
    pub checker_states: usize,
    /// Par: the steps the checker's shortest way took when it was last
    /// played to its end on this stack, if it ever was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub par: Option<usize>,
    /// The history checker's verdict of what the run's buyers were told
    /// (`linearizable`, `not_linearizable: ...`, `unsafe: ...`), and where
    /// it and the ledger's disagree on safety, which one was wrong.
    pub history: String,
    pub disagreement: Option<String>,
    /// The two in Chinese.
    #[serde(default)]
    pub history_zh: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disagreement_zh: Option<String>,
}

/// A learner's step: one of the offered choices, or the end of the run.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Command {
    Take(Choice),
    /// The next step of the checker's shortest counterexample of the cell.
    Shortest,
    End,
}

#[derive(Serialize, Deserialize)]
struct Envelope {
    reply: String,
    command: Command,
}

/// Starts a run of `variant` in `scenario` on `stack` (whose stock's Redis
/// is `redis_url`), driven by this process until it is over; its first
/// view, once every buyer waits at its first gate.
pub async fn start(
    store: Store,
    stack: Stack,
    redis_url: String,
    (variant, scenario): (Variant, Scenario),
    buyers: u8,
) -> anyhow::Result<StepView> {
    if let Some(why) = unplayable(variant, scenario) {
        bail!("{variant} in {scenario} is not played in step mode: {why}");
    }
    let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
    let (first, first_view) = tokio::sync::oneshot::channel();
    let run_id = id.clone();
    tokio::spawn(async move {
        let driver = driver::Driver {
            store: store.clone(),
            id: run_id.clone(),
            variant,
            scenario,
            buyers,
            version: 0,
            plan: None,
            played: 0,
            off_plan: false,
        };
        driver.drive(&stack, &redis_url, first).await;
    });
    first_view
        .await
        .context("the run ended before its first view")?
}

/// The last view of run `id`, `None` when there is no such run (or it
/// ended long ago).
pub async fn view(store: &Store, id: &str) -> anyhow::Result<Option<StepView>> {
    let mut conn = store.conn().await?;
    let json: Option<String> = conn.get(key(id, "view")).await?;
    Ok(json.and_then(|json| serde_json::from_str(&json).ok()))
}

/// Where the par of a cell is kept: the live steps of its checker's way.
fn par_key(variant: Variant, scenario: Scenario) -> String {
    format!("{{stocklock:step}}:par:{variant}/{scenario}")
}

/// Marks run `id` as `seat`'s: only that seat (and the teacher) may read
/// and step it.
pub async fn set_owner(store: &Store, id: &str, seat: &str) -> anyhow::Result<()> {
    let mut conn = store.conn().await?;
    let _: () = conn
        .set_ex(key(id, "owner"), seat, 2 * IDLE.as_secs())
        .await?;
    Ok(())
}

/// The seat run `id` is, `None` for a teacher's run.
pub async fn owner(store: &Store, id: &str) -> anyhow::Result<Option<String>> {
    let mut conn = store.conn().await?;
    Ok(conn.get(key(id, "owner")).await?)
}

/// Sends `command` to run `id` and waits for the view after it.
pub async fn command(store: &Store, id: &str, command: Command) -> anyhow::Result<StepView> {
    let reply = key(id, &format!("reply:{}", uuid::Uuid::new_v4().simple()));
    let envelope = serde_json::to_string(&Envelope {
        reply: reply.clone(),
        command,
    })?;
    let mut conn = store.conn().await?;
    let commands = key(id, "commands");
    let _: () = redis::pipe()
        .rpush(&commands, envelope)
        .pexpire(&commands, IDLE.as_millis() as i64)
        .query_async(&mut conn)
        .await?;
    // A blocking pop on a connection of its own, without a response
    // timeout shorter than its own.
    let client = store.master_client().await?;
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
    let mut waiting = client
        .get_multiplexed_async_connection_with_config(&config)
        .await?;
    let popped: Option<(String, String)> =
        waiting.blpop(&reply, STEP_TIMEOUT.as_secs_f64()).await?;
    let (_, json) = popped.context("the run did not answer the step in time")?;
    let answer: Result<StepView, String> = serde_json::from_str(&json)?;
    answer.map_err(anyhow::Error::msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_a_cell_is_not_played_is_said_in_chinese_too() {
        let mut reasons = std::collections::BTreeSet::new();
        for variant in Variant::ALL {
            for scenario in Scenario::ALL {
                reasons.extend(unplayable(variant, scenario));
            }
        }
        assert!(reasons.len() >= 5, "{reasons:?}");
        for why in reasons {
            assert_ne!(in_chinese(why), "(没有中文说明)", "{why}");
        }
    }
}
