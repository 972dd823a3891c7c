//! The stack `replay` and `explore` play on: one of their own, or a
//! running chaos-mode stack (`--target`).

use anyhow::{Context, bail};

use crate::chaos::mutant::{self, Mutant};
use crate::harness::TargetArgs;
use crate::harness::stack::{Stack, UpOptions};

/// What a stack of a command's own runs beside its Redis and instances.
#[derive(Clone, Debug, Default)]
pub struct Beside {
    /// The order pipeline (PostgreSQL, the workers).
    pub orders: bool,
    /// etcd members and ZooKeeper servers (`etcd`, `zookeeper`): one
    /// each, or three for a failover of their leader.
    pub etcd: u8,
    pub zookeeper: u8,
    /// A Redis apart where the gates meet (`up --gate-redis`), so that a
    /// schedule goes on while the stock's Redis is paused.
    pub gate_redis: Option<String>,
    /// A PostgreSQL of the command's own for the orders (`up
    /// --postgres-url`), which it stops and starts; its workers then claim
    /// a message left pending at once (`--claim-idle 1ms`): a dead worker's
    /// is another's at its next turn.
    pub postgres_url: Option<String>,
}

/// The stack a command plays on: the `--target` one (checked to run
/// chaos mode), or a Redis and a stack of its own ([`start`], with what
/// `beside` asks for). The Redis it started, if any (stopped when
/// dropped), the stack, and its Redis URL.
pub async fn stack_for(
    target: &TargetArgs,
    echo: bool,
    mutant: Option<Mutant>,
    beside: Beside,
) -> anyhow::Result<(Option<crate::up::redis::RedisServer>, Stack, String)> {
    let (Some(url), Some(token), Some(redis_url)) =
        (&target.target, &target.admin_token, &target.redis_url)
    else {
        let (redis, stack) = start(echo, mutant, beside).await?;
        let url = redis.url();
        return Ok((Some(redis), stack, url));
    };
    if mutant.is_some() {
        bail!(
            "--mutant needs a stack of the command's own: it cannot change a running stack's instances"
        );
    }
    let stack = Stack::attach(url, token).await?;
    // A schedule is refused outside chaos mode: ask with one that stops
    // nowhere (a SKU never stocked answers before any gate).
    let probe = format!(
        "/deductStock/none?sku=schedule-probe-{}&schedule=probe:A",
        uuid::Uuid::new_v4().simple()
    );
    let answer = stack.client.deduct(&probe).await;
    if answer.status == 400 {
        bail!(
            "{url} refused a schedule ({}): run it with stocklock up --chaos",
            answer.reason().unwrap_or("bad request")
        );
    }
    Ok((None, stack, redis_url.clone()))
}

/// `up`'s arguments for a stack of a replay's or an exploration's own:
/// chaos mode, three instances (one per model buyer), three Redlock nodes
/// (as the model has), and what `beside` asks for.
fn up_args(beside: &Beside) -> Vec<String> {
    let on = |yes: bool, many: &'static str, none: &'static str| if yes { many } else { none };
    [
        "--chaos",
        "--instances",
        "3",
        "--redlock",
        "3",
        "--orders",
        on(beside.orders, "on", "off"),
    ]
    .map(str::to_owned)
    .into_iter()
    .chain(["--etcd".to_owned(), beside.etcd.to_string()])
    .chain(["--zookeeper".to_owned(), beside.zookeeper.to_string()])
    .chain((beside.gate_redis.iter()).flat_map(|url| ["--gate-redis".to_owned(), url.clone()]))
    .chain(
        (beside.postgres_url.iter())
            .flat_map(|url| ["--postgres-url", url, "--claim-idle", "1ms"].map(str::to_owned)),
    )
    .collect()
}

/// With `mutant`, the instances run that live mutant (debug builds only).
pub async fn start(
    echo: bool,
    mutant: Option<Mutant>,
    beside: Beside,
) -> anyhow::Result<(crate::up::redis::RedisServer, Stack)> {
    let redis = crate::up::redis::RedisServer::start(None).await?;
    let stack = Stack::start(&UpOptions {
        redis_url: Some(redis.url()),
        args: up_args(&beside),
        echo,
        env: mutant
            .map(|m| (mutant::VAR.to_owned(), m.name().to_owned()))
            .into_iter()
            .collect(),
        ..UpOptions::default()
    })
    .await?;
    Ok((redis, stack))
}

/// The stack an order cell's replay needs: the order pipeline on, and
/// the Redis `up` started (a data loss restarts it); the stack and that
/// Redis's URL.
pub async fn start_orders(echo: bool) -> anyhow::Result<(Stack, String)> {
    let beside = Beside {
        orders: true,
        ..Beside::default()
    };
    start_with_its_redis(up_args(&beside), echo).await
}

/// The stack a failover cell's replay needs: `up --replica` (its Redis, a
/// replica through a relay, three Sentinels) with the gates on a Redis
/// apart, which the failover leaves alone. That Redis (stopped when
/// dropped), the stack, and the stack's master's URL.
pub async fn start_failover(
    echo: bool,
) -> anyhow::Result<(crate::up::redis::RedisServer, Stack, String)> {
    let gates = crate::up::redis::RedisServer::start(None).await?;
    let mut args = up_args(&Beside::default());
    args.extend([
        "--replica".to_owned(),
        "--gate-redis".to_owned(),
        gates.url(),
    ]);
    let (stack, url) = start_with_its_redis(args, echo).await?;
    Ok((gates, stack, url))
}

/// `up` with `args`, starting its own Redis: the stack and that Redis's URL.
async fn start_with_its_redis(args: Vec<String>, echo: bool) -> anyhow::Result<(Stack, String)> {
    let stack = Stack::start(&UpOptions {
        args,
        echo,
        ..UpOptions::default()
    })
    .await?;
    let url = stack
        .redis_url
        .clone()
        .context("the stack announced no Redis")?;
    Ok((stack, url))
}
