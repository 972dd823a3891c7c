//! The lock key deleted under its holder, at two moments: early
//! (`lock-vanishes-early`: before its watchdog's next renewal) and at the
//! worst moment (`lock-vanishes`: after its last renewal before the write).

use std::time::{Duration, Instant};

use anyhow::Context;

use super::play::{query, vanish};
use crate::judge::{self, Check, Deletion, Duel, Judgement, check};
use crate::knobs::Sku;
use crate::lab::Lab;
use crate::said;
use crate::store::Keys;
use crate::variants::Variant;

/// `lock-vanishes`: the holder's lease, renewed every lease/3 (2 s, 4 s
/// after the grant), and its work: the write comes a second after the
/// first renewal and a second before the second, margins wide enough for
/// the lab to delete the lock and the newcomer to read the stock between.
const VANISH_LEASE: Duration = Duration::from_millis(6_000);
const VANISH_WORK: Duration = Duration::from_millis(3_000);
/// How often the lab reads a lock's TTL while it waits for a renewal.
const RENEWAL_POLL: Duration = Duration::from_millis(2);

/// The lock key is deleted while its holder works (1 s of work, 2 s
/// lease), before its watchdog's first renewal; a buyer on the other
/// instance comes right after.
pub(super) async fn lock_vanishes_early(lab: &Lab, v: &str) -> anyhow::Result<Judgement> {
    lab.client().reset(v, 5, 0).await?;
    let (duel, struck) = lab
        .duel(
            v,
            &query(v, "lease_ms=2000&work_ms=1000&wait_ms=0"),
            &query(v, "lease_ms=2000&work_ms=0&wait_ms=0"),
            Some(vanish(v)),
        )
        .await?;
    Ok(judge::lock_vanishes_early(&duel, struck["deleted"] == true))
}

/// Whether `variant`'s lock is renewed by a watchdog while held.
fn renews(variant: Variant) -> bool {
    matches!(variant, Variant::Watchdog | Variant::Fenced)
}

/// The lock key is deleted at the worst moment: after the holder's last
/// renewal before its write (6 s lease, renewed every 2 s; 3 s of work).
/// A lock that renews is deleted once the lab saw its first renewal (its
/// TTL went back up), a second before the write and two before the next
/// renewal; a lock that does not renew, right after the holder entered its
/// section. A buyer on the other instance comes right after the deletion.
pub(super) async fn lock_vanishes(lab: &Lab, variant: Variant) -> anyhow::Result<Judgement> {
    let v = variant.name();
    lab.client().reset(v, 5, 0).await?;
    let lease = VANISH_LEASE.as_millis();
    let entered = lab.section_entered(v).await?;
    let holder_sent = Instant::now();
    let holder = lab.send(
        &lab.instance(0).url,
        &query(
            v,
            &format!(
                "lease_ms={lease}&work_ms={}&wait_ms=0",
                VANISH_WORK.as_millis()
            ),
        ),
    );
    let entered = entered.await;
    let in_section = Instant::now();
    let when = if !renews(variant) {
        Deletion::AfterEntry
    } else if !entered {
        Deletion::NoRenewal(said!(
            "no section to renew a lock in",
            "没有可以在其中续约的临界区"
        ))
    } else {
        match renewal(lab, v, VANISH_LEASE).await? {
            Ok(()) => Deletion::AfterRenewal(in_section.elapsed()),
            Err(why) => Deletion::NoRenewal(why),
        }
    };
    // Struck on instance b, as the early play does.
    let struck = lab.chaos_on(1, &vanish(v)).await?;
    let newcomer = lab
        .send(
            &lab.instance(1).url,
            &query(v, &format!("lease_ms={lease}&work_ms=0&wait_ms=0")),
        )
        .await?;
    // The holder writes no sooner than its work after it was sent: a
    // newcomer done within that read and wrote before it.
    let newcomer_done = holder_sent.elapsed();
    let before_write = check(newcomer_done < VANISH_WORK, || {
        let (done, work) = (newcomer_done.as_millis(), VANISH_WORK.as_millis());
        said!(
            "the newcomer answered {done} ms after the holder was sent: not surely before the holder's write (after {work} ms of work)",
            "新来者在持有者发出请求 {done} ms 之后才应答:不能确定在持有者写入(业务处理 {work} ms 之后)之前"
        )
    });
    let duel = Duel {
        entered,
        holder: holder.await?,
        newcomer,
        ledger: lab.ledger(v).await?,
    };
    Ok(judge::lock_vanishes(
        &duel,
        struck["deleted"] == true,
        &when,
        &before_write,
    ))
}

/// Returns once the lease on `sku`'s lock was renewed: its TTL, read on
/// the lab's own connection, went back up (nothing else lengthens it
/// while one holder has it). Redis announces a TTL's change only as a
/// keyspace notification, which would mean changing the server's
/// configuration (a `--target`'s too): the TTL is read every
/// [`RENEWAL_POLL`] instead. Why not, if it was not renewed within
/// `within` or there was no lease to renew.
async fn renewal(lab: &Lab, sku: &str, within: Duration) -> anyhow::Result<Check> {
    let lock = Keys::new(&Sku::parse(sku)?).lock;
    let mut conn = lab.store.conn().await?;
    let deadline = Instant::now() + within;
    let mut last: i64 = redis::cmd("PTTL")
        .arg(&lock)
        .query_async(&mut conn)
        .await
        .context("PTTL of the lock")?;
    loop {
        if last < 0 {
            return Ok(Err(said!(
                "the holder's lock had no lease to renew (PTTL {last})",
                "持有者的锁没有可续约的租约(PTTL {last})"
            )));
        }
        if Instant::now() > deadline {
            let within = within.as_millis();
            return Ok(Err(said!(
                "no renewal of the holder's lock within {within} ms",
                "{within} ms 内持有者的锁没有续约"
            )));
        }
        tokio::time::sleep(RENEWAL_POLL).await;
        let ttl: i64 = redis::cmd("PTTL")
            .arg(&lock)
            .query_async(&mut conn)
            .await
            .context("PTTL of the lock")?;
        if ttl > last {
            return Ok(Ok(()));
        }
        last = ttl;
    }
}
