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
//! [`Hook::none`], one branch per point. Every key of a run shares one hash
//! tag and expires [`RUN_TTL`] after its last arrival.

use std::sync::LazyLock;
use std::time::Duration;

use redis::{AsyncCommands, Script};

use crate::knobs::Schedule;
use crate::lock::{Held, Hook, Point, Reached};
use crate::store::StoreError;

/// How long a buyer waits at a gate for its release at most.
pub const DEADLINE: Duration = Duration::from_secs(30);
/// How long a run's keys outlive its last arrival.
pub const RUN_TTL: Duration = Duration::from_secs(600);

pub mod points;

pub mod orders;
pub mod workers;

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
    prefix: String,
}

impl RunKeys {
    fn of(run: &str) -> RunKeys {
        let prefix = format!("{{stocklock:gate:{run}}}");
        RunKeys {
            arrivals: format!("{prefix}:arrivals"),
            open: format!("{prefix}:open"),
            patient: format!("{prefix}:patient"),
            prefix,
        }
    }

    /// Where the release of `buyer` at `gate` is pushed.
    fn go(&self, buyer: &str, gate: &str) -> String {
        format!("{}:go:{buyer}:{gate}", self.prefix)
    }
}

/// Announces an arrival unless the run was abandoned: 1 announced (wait
/// for the release), 0 open (go on).
static ARRIVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1",
    )
});

/// A buyer of a scheduled run: the hook its request's locks and section
/// stop at.
pub struct Gate {
    client: redis::Client,
    schedule: Schedule,
    /// The instance and the SKU, for the timeline's events.
    instance: String,
    sku: String,
}

impl Gate {
    /// The hook of a request of `schedule` for `sku` on `instance`, on the
    /// Redis `client` speaks to.
    pub fn hook(client: redis::Client, schedule: Schedule, instance: &str, sku: &str) -> Hook {
        Hook::new(std::sync::Arc::new(Gate {
            client,
            schedule,
            instance: instance.to_owned(),
            sku: sku.to_owned(),
        }))
    }

    /// A hold or a release on the SKU's timeline.
    async fn seen(&self, conn: &mut redis::aio::MultiplexedConnection, kind: &str, detail: String) {
        let (instance, sku) = (Some(self.instance.as_str()), Some(self.sku.as_str()));
        crate::timeline::event(conn, kind, instance, sku, detail).await;
    }

    async fn wait(&self, point: Point) -> Result<(), StoreError> {
        let mut conn = waiting_conn(&self.client).await?;
        let buyer = &self.schedule.buyer;
        let gate = point.to_string();
        // A wait for a lock and a vote's answer are only noted.
        if !arrive(&mut conn, &self.schedule.run, buyer, &gate).await? || is_note(&gate) {
            return Ok(());
        }
        self.seen(&mut conn, "gate_hold", format!("{buyer} waits at {point}"))
            .await;
        let released = await_release(&mut conn, &self.schedule.run, buyer, &gate).await?;
        let how = match released {
            true => "goes on from",
            false => "was let go by no one (deadline) at",
        };
        self.seen(&mut conn, "gate_release", format!("{buyer} {how} {point}"))
            .await;
        if !released {
            tracing::warn!(
                run = self.schedule.run,
                buyer = self.schedule.buyer,
                %point,
                "nobody released the gate within its deadline: going on"
            );
        }
        Ok(())
    }
}

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

/// Announces `buyer` at `gate` of `run`: `false` when the run was
/// abandoned (go on).
async fn arrive(
    conn: &mut redis::aio::MultiplexedConnection,
    run: &str,
    buyer: &str,
    gate: &str,
) -> Result<bool, StoreError> {
    let keys = RunKeys::of(run);
    let arrived: i64 = ARRIVE
        .key(&keys.arrivals)
        .key(&keys.open)
        .arg(format!("{buyer} {gate}"))
        .arg(RUN_TTL.as_millis() as u64)
        .invoke_async(conn)
        .await?;
    Ok(arrived == 1)
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

impl Reached for Gate {
    fn reached(&self, point: Point) -> Held<'_> {
        Box::pin(async move {
            // A gate that cannot reach Redis holds nothing: the request
            // meets the failure in its own next command.
            if let Err(err) = self.wait(point).await {
                tracing::warn!(%err, %point, "a gate could not reach Redis: going on");
            }
        })
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

/// Announces a tool's buyers' answers on its run's arrivals list.
#[derive(Clone)]
pub struct Answers {
    conn: redis::aio::MultiplexedConnection,
    arrivals: String,
}

impl Answers {
    /// `buyer` has its answer.
    pub async fn answered(&self, buyer: &str) -> Result<(), StoreError> {
        let _: () = redis::pipe()
            .rpush(&self.arrivals, format!("{buyer} {ANSWERED}"))
            .pexpire(&self.arrivals, RUN_TTL.as_millis() as i64)
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(())
    }
}

/// The run's side: hears arrivals, lets buyers go.
pub struct Scheduler {
    client: redis::Client,
    conn: redis::aio::MultiplexedConnection,
    keys: RunKeys,
    /// Arrivals not let go yet.
    waiting: Vec<Arrival>,
}

impl Scheduler {
    /// Starts run `run` on the Redis at `url`, forgetting anything an
    /// earlier run of that name left.
    pub async fn start(url: &str, run: &str) -> Result<Scheduler, StoreError> {
        let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
        let client = redis::Client::open(url)?;
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        let keys = RunKeys::of(run);
        let _: () = conn
            .del(&[&keys.arrivals, &keys.open, &keys.patient])
            .await?;
        Ok(Scheduler {
            client,
            conn,
            keys,
            waiting: Vec::new(),
        })
    }

    /// An arrival already announced, without waiting.
    pub async fn try_next(&mut self) -> Result<Option<Arrival>, StoreError> {
        let entry: Option<String> = self.conn.lpop(&self.keys.arrivals, None).await?;
        Ok(entry.and_then(|entry| self.heard(&entry)))
    }

    /// Where a tool's own requests announce their answers ([`ANSWERED`]),
    /// so that one wait hears both arrivals and answers. On a connection
    /// of its own: the scheduler's may be blocked in its `BLPOP`, and a
    /// push sent behind it would wait for it.
    pub async fn answers(&self) -> Result<Answers, StoreError> {
        Ok(Answers {
            conn: self.client.get_multiplexed_async_connection().await?,
            arrivals: self.keys.arrivals.clone(),
        })
    }

    fn heard(&mut self, entry: &str) -> Option<Arrival> {
        let arrival = Arrival::parse(entry)?;
        if arrival.gate != ANSWERED && !is_note(&arrival.gate) {
            self.waiting.push(arrival.clone());
        }
        Some(arrival)
    }

    /// The next arrival, if one comes within `timeout`.
    pub async fn next(&mut self, timeout: Duration) -> Result<Option<Arrival>, StoreError> {
        let popped: Option<(String, String)> = self
            .conn
            .blpop(&self.keys.arrivals, timeout.as_secs_f64())
            .await?;
        Ok(popped.and_then(|(_, entry)| self.heard(&entry)))
    }

    /// Lets the buyer of `arrival` go on from its gate.
    pub async fn release(&mut self, arrival: &Arrival) -> Result<(), StoreError> {
        self.waiting.retain(|waiting| waiting != arrival);
        let go = self.keys.go(&arrival.buyer, &arrival.gate);
        let _: () = redis::pipe()
            .rpush(&go, 1)
            .pexpire(&go, RUN_TTL.as_millis() as i64)
            .query_async(&mut self.conn)
            .await?;
        Ok(())
    }

    /// Makes the run's buyers wait at their gates past [`DEADLINE`] for
    /// `for_` from now (a learner thinking over a step): said again at
    /// each step, it lapses `for_` after the last.
    pub async fn be_patient(&mut self, for_: Duration) -> Result<(), StoreError> {
        let _: () = self
            .conn
            .pset_ex(&self.keys.patient, 1, for_.as_millis() as u64)
            .await?;
        Ok(())
    }

    /// The arrivals heard and not let go yet.
    pub fn waiting(&self) -> &[Arrival] {
        &self.waiting
    }

    /// Ends the run: every waiting buyer goes on, and no gate of the run
    /// holds anyone again.
    pub async fn abandon(&mut self) -> Result<(), StoreError> {
        let _: () = redis::pipe()
            .set_ex(&self.keys.open, 1, RUN_TTL.as_secs())
            .del(&self.keys.patient)
            .query_async(&mut self.conn)
            .await?;
        // Arrivals announced before the run was opened and not heard yet
        // wait too; none comes after (the arrival script checks first).
        while self.try_next().await?.is_some() {}
        for arrival in std::mem::take(&mut self.waiting) {
            self.release(&arrival).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
