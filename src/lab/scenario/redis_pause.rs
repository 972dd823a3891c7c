//! `redis-pause`: Redis stops answering under buyers with request ids,
//! mid-sale, and answers again; each buyer told `unknown` asks again.

use std::time::Duration;

use super::play::query;
use crate::judge::{self, Doubted, Judgement, RedisPause};
use crate::lab::Lab;
use crate::variants::Variant;

/// How long `redis-pause` freezes Redis: past the 1 s an instance waits for
/// an answer, twice over (`lua-batch`: a buyer's first call, then the batch
/// queued behind it, both sent into the pause).
const REDIS_PAUSE: Duration = Duration::from_millis(2_500);
/// `redis-pause`'s stock and buyers: a few buyers one after the other
/// before the pause (the sale under way, its script loaded in Redis), then
/// more buyers than units left, at once, into the pause.
const PAUSE_STOCK: i64 = 10;
const BEFORE_PAUSE: usize = 3;
const PAUSE_BUYERS: usize = 30;
/// How many times a buyer of `redis-pause` asks again, at most, and how
/// long it waits between two of its retries.
const RETRIES: usize = 5;
const RETRY_BACKOFF: Duration = Duration::from_millis(200);

/// Mid-sale (three buyers served), Redis stops answering (`DEBUG SLEEP`,
/// 2.5 s) under 30 buyers with request ids, sent through nginx to both
/// instances: every call in flight (for `lua-batch`, whole batches) waits
/// its 1 s and is answered `unknown`. Once Redis answers again, with its
/// data, each buyer not yet answered sold or sold out asks again with its
/// id until it is.
pub(super) async fn play(lab: &Lab, variant: Variant) -> anyhow::Result<Judgement> {
    let v = variant.name();
    lab.client()
        .reset(v, PAUSE_STOCK, variant.buckets())
        .await?;
    let id = |i: usize| format!("{v}-pause-{i}");
    let path = |i: usize| query(v, &format!("request_id={}", id(i)));
    let mut buyers = Vec::with_capacity(BEFORE_PAUSE + PAUSE_BUYERS);
    for i in 0..BEFORE_PAUSE {
        buyers.push(Doubted {
            id: id(i),
            first: lab.send(&lab.stack.url, &path(i)).await?,
            retries: Vec::new(),
        });
    }
    let (paused, mut probe) = lab.pause_redis(REDIS_PAUSE).await?;
    let into_pause: Vec<_> = (BEFORE_PAUSE..BEFORE_PAUSE + PAUSE_BUYERS)
        .map(|i| (i, lab.send(&lab.stack.url, &path(i))))
        .collect();
    for (i, reply) in into_pause {
        buyers.push(Doubted {
            id: id(i),
            first: reply.await?,
            retries: Vec::new(),
        });
    }
    probe.answering().await?;
    retry_until_final(lab, &mut buyers, &path, (RETRIES, RETRY_BACKOFF)).await?;
    Ok(judge::redis_pause(&RedisPause {
        pause: REDIS_PAUSE,
        paused,
        buyers,
        ledger: lab.ledger(v).await?,
    }))
}

/// Each buyer without a final answer asks again with its request id (the
/// `k`-th buyer's path is `path(k)`) through nginx, a round at a time, at
/// most `rounds` rounds, `backoff` apart (a client's: nothing announces
/// when an id in progress is decided).
pub(super) async fn retry_until_final(
    lab: &Lab,
    buyers: &mut [Doubted],
    path: &impl Fn(usize) -> String,
    (rounds, backoff): (usize, Duration),
) -> anyhow::Result<()> {
    for round in 0..rounds {
        let pending: Vec<usize> = (0..buyers.len())
            .filter(|&k| buyers[k].resolved().is_none())
            .collect();
        if pending.is_empty() {
            break;
        }
        if round > 0 {
            tokio::time::sleep(backoff).await;
        }
        let sent: Vec<_> = pending
            .into_iter()
            .map(|k| (k, lab.send(&lab.stack.url, &path(k))))
            .collect();
        for (k, reply) in sent {
            buyers[k].retries.push(reply.await?);
        }
    }
    Ok(())
}
