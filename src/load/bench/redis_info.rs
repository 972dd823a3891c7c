//! What the bench asks the stack's Redis: its round trip (the lock
//! hand-off ceiling), its pid (for its CPU share) and what it spent per
//! sale script (`INFO commandstats`: its counters read before and after a
//! side, so no `CONFIG RESETSTAT` is needed and a Redis without CONFIG,
//! such as `up --no-chaos`'s, is measured too).

use std::time::Instant;

use anyhow::Context;

use super::report::median;
use crate::store::{Conn, Store};

/// One connection to the stack's Redis.
pub(super) struct BenchRedis {
    conn: Conn,
    /// EVALSHA's counters when [`mark`](Self::mark) last read them.
    mark: Counters,
}

/// EVALSHA's counters in `INFO commandstats` (zero before its first call).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Counters {
    pub(super) calls: u64,
    pub(super) usec: u64,
}

/// EVALSHA between a mark and now.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Evalsha {
    pub(super) calls: u64,
    /// Redis's microseconds in them, all told.
    pub(super) usec: u64,
    pub(super) usec_per_call: f64,
}

impl BenchRedis {
    pub(super) async fn connect(redis_url: &str) -> anyhow::Result<Self> {
        let store = Store::open(redis_url)?;
        let conn = store.conn().await.with_context(|| {
            format!("cannot reach Redis at {}", crate::orders::shown(redis_url))
        })?;
        Ok(Self {
            conn,
            mark: Counters::default(),
        })
    }

    /// Median of `samples` sequential PINGs, in seconds.
    pub(super) async fn round_trip(&mut self, samples: usize) -> anyhow::Result<f64> {
        let mut times = Vec::with_capacity(samples);
        for _ in 0..samples {
            let started = Instant::now();
            let _: String = redis::cmd("PING").query_async(&mut self.conn).await?;
            times.push(started.elapsed().as_secs_f64());
        }
        Ok(median(times))
    }

    /// How many critical sections a SKU's timeline holds.
    pub(super) async fn sections(&mut self, sku: &str) -> anyhow::Result<i64> {
        let keys = crate::store::Keys::new(&crate::knobs::Sku::parse(sku)?);
        let held: Option<i64> = redis::cmd("HGET")
            .arg(&keys.ledger)
            .arg("timeline_sections")
            .query_async(&mut self.conn)
            .await?;
        Ok(held.unwrap_or(0))
    }

    /// Reads EVALSHA's counters now: [`evalsha`](Self::evalsha) counts from here.
    pub(super) async fn mark(&mut self) -> anyhow::Result<()> {
        self.mark = self.counters().await?;
        Ok(())
    }

    /// EVALSHA's calls and microseconds per call since the last mark
    /// (`None`: no EVALSHA ran, or the counters went back: Redis restarted).
    pub(super) async fn evalsha(&mut self) -> anyhow::Result<Option<Evalsha>> {
        Ok(since(self.mark, self.counters().await?))
    }

    async fn counters(&mut self) -> anyhow::Result<Counters> {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut self.conn)
            .await
            .context("INFO commandstats")?;
        Ok(parse_evalsha(&info).unwrap_or_default())
    }

    /// The pid Redis reports (`INFO server`'s `process_id`).
    pub(super) async fn pid(&mut self) -> anyhow::Result<Option<u32>> {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut self.conn)
            .await
            .context("INFO server")?;
        Ok(info
            .lines()
            .find_map(|line| line.strip_prefix("process_id:"))
            .and_then(|pid| pid.trim().parse().ok()))
    }
}

/// EVALSHA's calls and time per call from `before` to `after`.
pub(super) fn since(before: Counters, after: Counters) -> Option<Evalsha> {
    let calls = after.calls.checked_sub(before.calls).filter(|&n| n > 0)?;
    let usec = after.usec.checked_sub(before.usec)?;
    Some(Evalsha {
        calls,
        usec,
        usec_per_call: usec as f64 / calls as f64,
    })
}

/// `cmdstat_evalsha:calls=N,usec=U,usec_per_call=X,...` from the text of
/// `INFO commandstats`.
pub(super) fn parse_evalsha(info: &str) -> Option<Counters> {
    let fields = info
        .lines()
        .find_map(|line| line.trim().strip_prefix("cmdstat_evalsha:"))?;
    let field = |name: &str| {
        fields
            .split(',')
            .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
    };
    Some(Counters {
        calls: field("calls")?.parse().ok()?,
        usec: field("usec")?.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evalsha_is_read_from_commandstats_and_only_from_its_own_line() {
        let info = "# Commandstats\r\n\
            cmdstat_get:calls=25696,usec=7614,usec_per_call=0.30,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_evalsha_ro:calls=3,usec=30,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_evalsha:calls=25696,usec=352385,usec_per_call=13.71,rejected_calls=0,failed_calls=0\r\n";
        assert_eq!(
            parse_evalsha(info),
            Some(Counters {
                calls: 25696,
                usec: 352385
            })
        );
        assert_eq!(
            parse_evalsha("# Commandstats\r\ncmdstat_get:calls=1,usec=1,usec_per_call=1.00\r\n"),
            None
        );
    }

    #[test]
    fn a_side_is_the_difference_of_the_counters() {
        let before = Counters {
            calls: 1000,
            usec: 12_000,
        };
        let after = Counters {
            calls: 1400,
            usec: 16_000,
        };
        assert_eq!(
            since(before, after),
            Some(Evalsha {
                calls: 400,
                usec: 4000,
                usec_per_call: 10.0
            })
        );
        // No call in between, or counters that went back (a restart): nothing.
        assert_eq!(since(after, after), None);
        assert_eq!(since(after, before), None);
        assert_eq!(since(Counters::default(), before).unwrap().calls, 1000);
    }
}
