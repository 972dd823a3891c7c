//! Gates: a schedule of the real code, not of a model. A request that
//! joins a scheduled run (`schedule=RUN:BUYER`, chaos mode only) stops at
//! each named point of the section and of its lock (a gate), announces
//! "buyer B reached gate G", and waits there until the run's
//! [`Scheduler`] lets it go. The announcement and the release go through
//! Redis, so one scheduler orders buyers on every instance.
//!
//! - An arrival is pushed on the run's list of arrivals by a script that
//!   first checks whether the run was abandoned: a buyer of an abandoned
//!   run passes every gate at once.
//! - The buyer then waits for a release on a list of its own for that
//!   gate (`BLPOP`, on a connection of its own), at most [`DEADLINE`]: a
//!   scheduler that died holds nobody for longer. One buyer may wait at
//!   two gates at once (its section at one, its watchdog's renewal or a
//!   Redlock node's vote at another): each is released by itself.
//! - [`Scheduler::abandon`] lets every waiting buyer go and opens every
//!   later gate of the run.
//!
//! A request outside a schedule never reaches any of this: its hook is
//! [`Hook::none`](crate::lock::Hook::none), one branch per point. Every
//! key of a run shares one hash tag and expires [`RUN_TTL`] after its last
//! arrival.

use std::sync::LazyLock;
use std::time::Duration;

use redis::{AsyncCommands, Script};

use crate::store::StoreError;

/// How long a buyer waits at a gate for its release at most.
pub const DEADLINE: Duration = Duration::from_secs(30);
/// How long a run's keys outlive its last arrival.
pub const RUN_TTL: Duration = Duration::from_secs(600);

mod buyer;
pub mod points;
mod scheduler;

pub mod orders;
pub mod workers;

pub use buyer::Gate;
pub use scheduler::{Answers, Scheduler};

/// Where a process's gates meet: the stock's own Redis (the default),
/// or a Redis apart (`serve --gate-redis`). A replay of a failover keeps
/// its schedule apart: the master it kills would take the run with it.
#[derive(Clone)]
pub struct Gates {
    store: crate::store::Store,
    apart: Option<redis::Client>,
}

impl Gates {
    /// Where the gates of a process with `chaos` meet (chaos mode only:
    /// `None` off it), `store` being its stock's.
    pub fn of(chaos: &crate::chaos::Chaos, store: &crate::store::Store) -> Option<Gates> {
        chaos.enabled().then(|| Gates {
            store: store.clone(),
            apart: chaos.gate_redis().cloned(),
        })
    }

    /// A client of the Redis the gates meet on (the stock's: its master
    /// now).
    pub async fn client(&self) -> Result<redis::Client, StoreError> {
        match &self.apart {
            Some(client) => Ok(client.clone()),
            None => Ok(self.store.master_client().await?),
        }
    }
}

/// The keys of one run.
struct RunKeys {
    arrivals: String,
    open: String,
    /// Set while someone (a learner in step mode) may take longer than
    /// [`DEADLINE`] over a step: a buyer waits on while it exists.
    patient: String,
    /// What the run's buyers were seen doing: `BUYER instance` (the
    /// instance its request went through), `BUYER read` (the stock its
    /// section read).
    seen: String,
    prefix: String,
}

impl RunKeys {
    fn of(run: &str) -> RunKeys {
        let prefix = format!("{{stocklock:gate:{run}}}");
        RunKeys {
            arrivals: format!("{prefix}:arrivals"),
            open: format!("{prefix}:open"),
            patient: format!("{prefix}:patient"),
            seen: format!("{prefix}:seen"),
            prefix,
        }
    }

    /// Where the release of `buyer` at `gate` is pushed.
    fn go(&self, buyer: &str, gate: &str) -> String {
        format!("{}:go:{buyer}:{gate}", self.prefix)
    }
}

/// Announces an arrival unless the run was abandoned: 1 announced (wait
/// for the release), 0 open (go on). The instance it came through, when
/// it names one, is noted among what the run's buyers were seen doing.
static ARRIVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[3] .. ' instance', ARGV[4])
  redis.call('PEXPIRE', KEYS[3], ARGV[2])
end
return 1",
    )
});

/// A connection of its own for a wait at a gate: `BLPOP` holds the one it
/// is sent on, and must not time out before its deadline.
async fn waiting_conn(
    client: &redis::Client,
) -> Result<redis::aio::MultiplexedConnection, StoreError> {
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
    Ok(client
        .get_multiplexed_async_connection_with_config(&config)
        .await?)
}

/// Announces `buyer` at `gate` of `run`, through `instance` (`""`: none
/// to note): `false` when the run was abandoned (go on).
async fn arrive(
    conn: &mut redis::aio::MultiplexedConnection,
    run: &str,
    (buyer, instance): (&str, &str),
    gate: &str,
) -> Result<bool, StoreError> {
    let keys = RunKeys::of(run);
    let arrived: i64 = ARRIVE
        .key(&keys.arrivals)
        .key(&keys.open)
        .key(&keys.seen)
        .arg(format!("{buyer} {gate}"))
        .arg(RUN_TTL.as_millis() as u64)
        .arg(buyer)
        .arg(instance)
        .invoke_async(conn)
        .await?;
    Ok(arrived == 1)
}

/// What one buyer of a run was seen doing: the instance its request went
/// through, the stock its section read (a lock's section: a script reads
/// and writes in one step, and none is noted).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    pub instance: Option<String>,
    pub read: Option<i64>,
}

/// Every buyer of the run of `keys` as seen so far, by name.
async fn seen(
    conn: &mut redis::aio::MultiplexedConnection,
    keys: &RunKeys,
) -> Result<std::collections::BTreeMap<String, Seen>, StoreError> {
    let fields: std::collections::HashMap<String, String> = conn.hgetall(&keys.seen).await?;
    let mut seen = std::collections::BTreeMap::<String, Seen>::new();
    for (field, value) in fields {
        let Some((buyer, what)) = field.split_once(' ') else {
            continue;
        };
        let entry = seen.entry(buyer.to_owned()).or_default();
        match what {
            "instance" => entry.instance = Some(value),
            "read" => entry.read = value.parse().ok(),
            _ => {}
        }
    }
    Ok(seen)
}

/// Waits for the release of `buyer` at `gate` of `run`, [`DEADLINE`] at
/// most (again and again while the run is patient): `false` when none
/// came.
async fn await_release(
    conn: &mut redis::aio::MultiplexedConnection,
    run: &str,
    buyer: &str,
    gate: &str,
) -> Result<bool, StoreError> {
    let keys = RunKeys::of(run);
    let go = keys.go(buyer, gate);
    loop {
        let released: Option<(String, String)> = conn.blpop(&go, DEADLINE.as_secs_f64()).await?;
        if released.is_some() {
            return Ok(true);
        }
        let patient: bool = conn.exists(&keys.patient).await?;
        if !patient {
            return Ok(false);
        }
    }
}

/// One buyer at one gate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arrival {
    pub buyer: String,
    /// The gate's name (`after_read`, `vote:2`).
    pub gate: String,
}

/// The name of the `n`-th buyer of a run driven by a tool (`A`, `B`, ...).
pub fn buyer_name(n: u8) -> String {
    char::from(b'A' + n.min(25)).to_string()
}

impl Arrival {
    /// Which buyer of a tool's run it is: `A` is 0, `B` 1, ...; `None` for
    /// a name no tool gives (a request someone else scheduled on the run).
    pub fn buyer_index(&self) -> Option<u8> {
        match self.buyer.as_bytes() {
            [letter @ b'A'..=b'Z'] => Some(letter - b'A'),
            _ => None,
        }
    }

    /// An entry of the arrivals list: `BUYER GATE`.
    fn parse(entry: &str) -> Option<Arrival> {
        let (buyer, gate) = entry.split_once(' ')?;
        Some(Arrival {
            buyer: buyer.to_owned(),
            gate: gate.to_owned(),
        })
    }
}

/// The pseudo-gate of an answer: a tool's request announces, once it has
/// its answer, `BUYER answered` among the arrivals (nobody waits there).
pub const ANSWERED: &str = "answered";

/// The note of a buyer that found its lock held and waits for it
/// ([`crate::lock::WAITS`]): an arrival nobody lets go.
pub const WAITS_FOR_LOCK: &str = crate::lock::WAITS.name;

/// Whether an arrival at `gate` is only a note that the buyer got there
/// (a wait for a lock, a Redlock vote's answer): nobody waits there, and
/// nothing is to be let go.
pub fn is_note(gate: &str) -> bool {
    gate == WAITS_FOR_LOCK
        || gate
            .strip_prefix(points::VOTED)
            .is_some_and(|k| k.starts_with(':'))
}

/// Which arrival a Redlock round made: `vote:K` or `voted:K`, and K.
pub fn vote_gate(gate: &str) -> Option<(bool, usize)> {
    let (point, k) = gate.split_once(':')?;
    let k = k.parse().ok()?;
    match point {
        points::VOTE => Some((false, k)),
        points::VOTED => Some((true, k)),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
