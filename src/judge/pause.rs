//! Judges of a frozen holder (`pause-holder`): every lock's, whose late
//! write must be refused, and a database lock's, whose lease is its
//! session's idle timeout: frozen, then cut off from PostgreSQL, the
//! database must end each silent session within that lease.

use std::time::Duration;

use super::duel::Duel;
use super::{Behaviour, Check, Judgement, Observed, check, decide, said_of};
use crate::said;
use crate::wire::Said;

/// How late, past its lease, the database may end a silent holder's
/// session and the newcomer waiting for its lock sell: PostgreSQL checks
/// the idle timeout on a timer of its own, then the newcomer's lock wait
/// wakes, and the sale's statements run.
const SESSION_SLACK: Duration = Duration::from_millis(500);

/// `pause-holder`: the holder froze longer than its lease right before
/// its write. Safe only when its stale write was refused. For a database
/// lock (`session_lease`: the lease its transaction may sit silent,
/// `idle_in_transaction_session_timeout`), only when the database ended
/// the frozen holder's session within that lease (the newcomer sold
/// within it and `SESSION_SLACK`) and the holder's late write was
/// refused with it (`lock_lost`).
pub fn pause_holder(duel: &Duel, pause: Duration, session_lease: Option<Duration>) -> Judgement {
    silenced(duel, pause, session_lease, &said!("froze", "冻结了"))
}

/// `pause-holder` for a database lock, whose lease is its session's idle
/// timeout (`lease`): the holder frozen (`frozen`), then a holder cut off
/// from PostgreSQL by a partition (`cut`), each for `pause`. Safe only
/// when both were ended by the database within the lease, their late
/// writes refused.
pub fn silent_holder(frozen: &Duel, cut: &Duel, pause: Duration, lease: Duration) -> Judgement {
    let first = silenced(
        frozen,
        pause,
        Some(lease),
        &said!("frozen: froze", "冻结:持有者冻结了"),
    );
    let second = silenced(
        cut,
        pause,
        Some(lease),
        &said!("cut off from PostgreSQL for", "与 PostgreSQL 断开了"),
    );
    let observed = match first.observed {
        Observed::Seen(Behaviour::Safe) => second.observed,
        observed => observed,
    };
    Judgement::new(
        observed,
        said_of!("{}; then {}", "{};然后{}"; first.evidence, second.evidence),
    )
}

/// A holder silenced (`how`: frozen, cut off) for `pause`: see [`pause_holder`].
fn silenced(
    duel: &Duel,
    pause: Duration,
    session_lease: Option<Duration>,
    how: &Said,
) -> Judgement {
    let landed = duel.entered().and_then(|()| duel.frozen(pause));
    let secs = pause.as_secs_f64();
    let evidence = duel.evidence(&said_of!("{} {secs:.1} s; ", "{} {secs:.1} s;"; how));
    let earned = match session_lease {
        // A database lock whose newcomer sold only once the holder spoke
        // again: the SKU sold nothing while its holder was silent.
        Some(_) if landed.is_ok() && duel.newcomer.took >= pause => {
            return Judgement::new(
                Observed::Stuck,
                said_of!(
                    "the database never ended the silent holder's session: {}",
                    "数据库始终没有结束沉默的持有者的会话:{}";
                    evidence
                ),
            );
        }
        Some(lease) => session_ended(duel, lease),
        None => duel.stale_write_refused(),
    };
    decide(landed, &duel.ledger, earned, evidence)
}

/// A database lock's holder gone silent (frozen, cut off) for longer than
/// `lease`: its session ended by the database within the lease and
/// `SESSION_SLACK` (the newcomer waiting for the lock sold by then) and
/// its late write refused (`lock_lost`).
fn session_ended(duel: &Duel, lease: Duration) -> Check {
    let bound = lease + SESSION_SLACK;
    check(duel.holder.refused("lock_lost"), || {
        said_of!(
            "the holder answered {}: its late write was not refused",
            "持有者应答 {}:它迟到的写入没有被拒绝";
            duel.holder.said()
        )
    })
    .and_then(|()| {
        check(duel.newcomer.sold() && duel.newcomer.took <= bound, || {
            let (lease, slack) = (lease.as_millis(), SESSION_SLACK.as_millis());
            said_of!(
                "the newcomer answered {}: it did not sell within the lease ({lease} ms) and {slack} ms",
                "新来者应答 {}:它没有在租约({lease} ms)加 {slack} ms 之内卖出";
                duel.newcomer.said()
            )
        })
    })
}
