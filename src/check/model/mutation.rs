//! What a test may take out of a protocol: the [`Mutation`]s that show
//! the checker finds what each mechanism prevents.

/// A variant's protocol, with a part of it possibly taken out (the
/// mutations the tests use to show the checker finds what that part prevents).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mutation {
    /// The fenced read and write admit any token.
    pub no_fence_check: bool,
    /// The owner-token release deletes the lock whoever holds it.
    pub plain_del_release: bool,
    /// The watchdog never renews.
    pub no_renewal: bool,
    /// The section writes even when its watchdog found the lock gone.
    pub no_lost_check: bool,
    /// The section counts on its lock past its local deadline (its last
    /// renewal plus a lease).
    pub no_local_deadline: bool,
    /// `setnx-expiry`'s GETSET takes the lock over whatever value it swapped out.
    pub no_getset_compare: bool,
    /// Redlock holds the lock with one node's vote, not a majority.
    pub one_vote: bool,
    /// Redlock counts its votes however long the round took (no validity time).
    pub no_validity: bool,
    /// `WAIT` is not asked: the holder goes on whatever the replica has.
    pub no_wait: bool,
    /// The write does not check that its read came after the SKU's last reset.
    pub no_epoch_check: bool,
    /// The write does not check that its request id's claim is still its own.
    pub no_claim_check: bool,
    /// Request ids are neither claimed nor checked by the write.
    pub no_request_claim: bool,
    /// The worker's insert writes a row even when the sale has one.
    pub no_on_conflict: bool,
    /// Giving a unit back does not record the sale's return first.
    pub no_give_back_once: bool,
    /// `redis-then-pg`: Redis's sold-out is the answer by itself (the
    /// database does not answer the buyers Redis turns away).
    pub redis_sold_out_final: bool,
    /// `pg-update`'s UPDATE has no `remaining > 0`: it decrements past zero.
    pub no_stock_check: bool,
    /// `pg-optimistic`'s write does not compare the version it read.
    pub no_version_check: bool,
    /// `redis-then-pg` asks Redis first, not the database for the id's answer.
    pub no_answer_first: bool,
    /// `redis-then-pg` keeps the Redis unit of a buyer the database refused.
    pub no_give_back: bool,
    /// `pg-for-update` reads without `FOR UPDATE`, `pg-advisory` takes no
    /// advisory lock: the database's lock is never waited for.
    pub no_database_lock: bool,
    /// A database lock's transaction has no idle timeout: the database
    /// never ends the session of a holder it stopped hearing from.
    pub no_idle_timeout: bool,
}
