//! Live mutants: a mechanism the checker credits, taken out of the real
//! code, so that a test can see `stocklock explore` (or the lab) find what
//! that mechanism prevents, and the code with it pass the same schedules.
//!
//! An instance runs one mutant when its environment has
//! `STOCKLOCK_MUTANT=<name>` (`up` and its instances inherit it). Mutants
//! exist only in debug builds (`cfg(debug_assertions)`, the builds
//! `cargo test` makes): in a release build [`on`] is `false` for every
//! mutant and the variable is ignored. It is deliberately neither a
//! command-line option of `serve`/`up` nor a Cargo feature.

/// The environment variable that picks an instance's mutant.
pub const VAR: &str = "STOCKLOCK_MUTANT";

/// One mechanism taken out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mutant {
    /// `token` releases its lock with a plain `DEL`, whoever holds it.
    PlainDel,
    /// The watchdog's section writes even when its lock is lost (its
    /// renewal was refused, or its local deadline passed).
    NoLostCheck,
    /// `fenced`, `etcd` and `zookeeper` run with no fence: plain reads,
    /// unfenced writes.
    NoFence,
    /// A request id is not claimed before the section: a retry of an id
    /// sells again while its first attempt is in flight or done.
    NoClaim,
    /// `redis-then-pg` answers a buyer Redis turned away with Redis's
    /// sold-out, never asking the database, which may hold units Redis
    /// lost track of.
    RedisSaysSoldOut,
    /// `token`'s lock loses its lease once taken (`PERSIST`): a holder
    /// that dies leaves it for ever, where the claim says it frees itself.
    NoLease,
    /// An instance gives Redis each of its sale scripts once (as a program
    /// that loads them when it starts) and never again: after Redis
    /// restarted, its script cache empty, `lua` and `lua-batch` fail every
    /// sale (NOSCRIPT), where the claim says they recover.
    NoScriptReload,
    /// `redlock`, finding no majority of its nodes in its first round,
    /// falls back to `token`'s lock on the stack's Redis and sells, where the claim says it
    /// refuses every buyer while the majority is down.
    QuorumFallback,
    /// The write takes the request id's claim back whatever stands there:
    /// an attempt whose claim ran out and was taken over by a retry still
    /// writes (the claim is no fence).
    NoClaimFence,
    /// `pg-for-update` and `pg-batch` read the stock row without `FOR
    /// UPDATE`: nothing is locked from the read to the commit.
    NoRowLock,
    /// `pg-advisory` takes no advisory lock before its read.
    NoAdvisoryLock,
    /// `pg-optimistic` writes whatever the row's version is now.
    NoVersionCheck,
    /// `pg-update`'s `UPDATE` decrements with no `remaining > 0`: past
    /// zero, it sells units that do not exist.
    NoStockCheck,
    /// `pg-for-update` and `pg-advisory` set no
    /// `idle_in_transaction_session_timeout`: a holder the database no
    /// longer hears (frozen, cut off) keeps its lock as long as it is silent.
    NoIdleTimeout,
    /// The database variants neither look a request id up nor record its
    /// answer: an attempt asked again after its commit's answer was lost
    /// sells again (the contrast of `commit-answer-lost` and
    /// `postgres-restart`).
    NoIdRecord,
    /// `redis-then-pg` keeps a unit taken in Redis when the database
    /// refused the sale: Redis's books drift from the database's.
    NoGiveBack,
}

impl Mutant {
    pub const ALL: [Mutant; 16] = [
        Mutant::PlainDel,
        Mutant::NoLostCheck,
        Mutant::NoFence,
        Mutant::NoClaim,
        Mutant::RedisSaysSoldOut,
        Mutant::NoLease,
        Mutant::NoScriptReload,
        Mutant::QuorumFallback,
        Mutant::NoClaimFence,
        Mutant::NoRowLock,
        Mutant::NoAdvisoryLock,
        Mutant::NoVersionCheck,
        Mutant::NoStockCheck,
        Mutant::NoIdleTimeout,
        Mutant::NoIdRecord,
        Mutant::NoGiveBack,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mutant::PlainDel => "plain-del",
            Mutant::NoLostCheck => "no-lost-check",
            Mutant::NoFence => "no-fence",
            Mutant::NoClaim => "no-claim",
            Mutant::RedisSaysSoldOut => "redis-says-sold-out",
            Mutant::NoLease => "no-lease",
            Mutant::NoScriptReload => "no-script-reload",
            Mutant::QuorumFallback => "quorum-fallback",
            Mutant::NoClaimFence => "no-claim-fence",
            Mutant::NoRowLock => "no-row-lock",
            Mutant::NoAdvisoryLock => "no-advisory-lock",
            Mutant::NoVersionCheck => "no-version-check",
            Mutant::NoStockCheck => "no-stock-check",
            Mutant::NoIdleTimeout => "no-idle-timeout",
            Mutant::NoIdRecord => "no-id-record",
            Mutant::NoGiveBack => "no-give-back",
        }
    }

    #[cfg_attr(not(debug_assertions), allow(dead_code))]
    fn parse(name: &str) -> Option<Mutant> {
        Mutant::ALL.into_iter().find(|m| m.name() == name)
    }
}

impl std::fmt::Display for Mutant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether this build can run mutants at all (a debug build).
pub const AVAILABLE: bool = cfg!(debug_assertions);

/// Whether this process runs `mutant` (never, in a release build).
#[inline]
pub fn on(mutant: Mutant) -> bool {
    #[cfg(debug_assertions)]
    {
        *CHOSEN == Some(mutant)
    }
    #[cfg(not(debug_assertions))]
    {
        let _ = mutant;
        false
    }
}

#[cfg(debug_assertions)]
static CHOSEN: std::sync::LazyLock<Option<Mutant>> = std::sync::LazyLock::new(|| {
    let name = std::env::var(VAR).ok()?;
    let chosen = Mutant::parse(&name);
    match chosen {
        Some(mutant) => tracing::warn!(
            "{VAR}={mutant}: this instance runs a LIVE MUTANT (a test's switch): a mechanism of its locks is taken out"
        ),
        None => tracing::error!("{VAR}={name:?} names no mutant; running the code as it is"),
    }
    chosen
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for mutant in Mutant::ALL {
            assert_eq!(Mutant::parse(mutant.name()), Some(mutant));
        }
        assert_eq!(Mutant::parse("plain_del"), None);
    }

    /// The test binary runs no mutant: its environment names none.
    #[test]
    fn off_unless_named() {
        if std::env::var_os(VAR).is_none() {
            assert!(Mutant::ALL.into_iter().all(|m| !on(m)));
        }
    }
}
