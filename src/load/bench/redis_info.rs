//! What the bench asks the stack's Redis: its round trip (the lock
//! hand-off ceiling), its pid (for its CPU share) and what it spent per
//! sale script (`INFO commandstats`).

use std::time::Instant;

use anyhow::Context;

use super::report::median;
use crate::store::{Conn, Store};

/// One connection to the stack's Redis.
pub(super) struct BenchRedis {
    conn: Conn,
}

/// EVALSHA's line of `INFO commandstats`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Evalsha {
    pub(super) calls: u64,
    pub(super) usec_per_call: f64,
}

impl BenchRedis {
    pub(super) async fn connect(redis_url: &str) -> anyhow::Result<Self> {
        let store = Store::open(redis_url)?;
        let conn = store.conn().await.with_context(|| {
            format!("cannot reach Redis at {}", crate::orders::shown(redis_url))
        })?;
        Ok(Self { conn })
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

    /// `CONFIG RESETSTAT`: the command statistics start again from zero.
    pub(super) async fn reset_stats(&mut self) -> anyhow::Result<()> {
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async(&mut self.conn)
            .await
            .context(
                "CONFIG RESETSTAT (refused by `up --no-chaos`'s Redis: bench a stack in chaos mode, up's default)",
            )?;
        Ok(())
    }

    /// EVALSHA's calls and microseconds per call since the last reset
    /// (`None`: no EVALSHA ran).
    pub(super) async fn evalsha(&mut self) -> anyhow::Result<Option<Evalsha>> {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut self.conn)
            .await
            .context("INFO commandstats")?;
        Ok(parse_evalsha(&info))
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

/// `cmdstat_evalsha:calls=N,usec=U,usec_per_call=X,...` from the text of
/// `INFO commandstats`.
pub(super) fn parse_evalsha(info: &str) -> Option<Evalsha> {
    let fields = info
        .lines()
        .find_map(|line| line.trim().strip_prefix("cmdstat_evalsha:"))?;
    let field = |name: &str| {
        fields
            .split(',')
            .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
    };
    Some(Evalsha {
        calls: field("calls")?.parse().ok()?,
        usec_per_call: field("usec_per_call")?.parse().ok()?,
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
            Some(Evalsha {
                calls: 25696,
                usec_per_call: 13.71
            })
        );
        assert_eq!(
            parse_evalsha("# Commandstats\r\ncmdstat_get:calls=1,usec=1,usec_per_call=1.00\r\n"),
            None
        );
    }
}
