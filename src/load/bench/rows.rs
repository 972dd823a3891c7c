//! The rows of the bench, one method each.

use super::*;

impl Bench {
    /// Row 1: our generator vs oha on `/healthz`.
    pub(super) async fn generator_vs_oha(&mut self) -> anyhow::Result<()> {
        let Some(oha_bin) = find_program("oha") else {
            self.skip(
                "generator-vs-oha",
                "oha is not installed (cargo install oha)",
            );
            return Ok(());
        };
        let url = self.client.url("/healthz");
        let mut runs = Vec::new();
        for _ in 0..self.config.runs {
            let ours = self.rps("/healthz").await?;
            let theirs = oha(&oha_bin, &url, &self.config).await?;
            runs.push([ours, theirs]);
        }
        self.add(Row::new(
            "generator-vs-oha",
            ["stocklock", "oha"],
            runs,
            Some(1.0),
        ));
        Ok(())
    }

    /// Row 2: `lua` vs `/healthz`, with what Redis spent per sale and where the
    /// CPU went during the `lua` sides.
    pub(super) async fn lua_vs_healthz(&mut self) -> anyhow::Result<()> {
        let watched = self.watched().await?;
        let mut usage = Usage::default();
        let (mut per_call, mut calls, mut answers) = (Vec::new(), 0, 0);
        let mut runs = Vec::new();
        for _ in 0..self.config.runs {
            self.redis.mark().await?;
            let sales = self
                .measured(
                    &format!("/deductStock/lua?sku={LUA_SKU}"),
                    &watched,
                    &mut usage,
                )
                .await?;
            if let Some(evalsha) = self.redis.evalsha().await? {
                per_call.push(evalsha.usec_per_call);
                calls += evalsha.calls;
            }
            answers += sales.requests;
            runs.push([sales.rps(), self.rps("/healthz").await?]);
        }
        let mut row = Row::new("lua-vs-healthz", ["lua", "/healthz"], runs, None);
        if !per_call.is_empty() {
            let per_sale = RedisPerSale::new(per_call, calls, answers);
            row = row.with_note(per_sale.line());
            self.report.redis_per_lua_sale = Some(per_sale);
        }
        self.add(row);
        let shares = cpu::shares(&watched, &usage, cpu::cores());
        println!("    {}", shares.line());
        self.report.cpu_during_lua = Some(shares);
        Ok(())
    }

    /// Row 3: `lua` recording its sections vs `lua` on a SKU whose
    /// timeline is off, alternated.
    pub(super) async fn timeline_cost(&mut self) -> anyhow::Result<()> {
        let (recorded, untimed) = (
            format!("/deductStock/lua?sku={LUA_SKU}"),
            format!("/deductStock/lua?sku={UNTIMED_SKU}"),
        );
        let watched = self.watched().await?;
        // What each side cost the stack in CPU per answer, on the
        // processes' own clocks: steadier than a rate on a shared machine.
        let (mut on, mut off) = (Usage::default(), Usage::default());
        let mut runs = Vec::new();
        for run in 0..self.config.runs {
            // The difference is small: every other pair runs the other side
            // first, so that neither side always runs on a warmer stack.
            let pair = if run % 2 == 0 {
                let first = self.measured(&recorded, &watched, &mut on).await?.rps();
                [
                    first,
                    self.measured(&untimed, &watched, &mut off).await?.rps(),
                ]
            } else {
                let first = self.measured(&untimed, &watched, &mut off).await?.rps();
                [
                    self.measured(&recorded, &watched, &mut on).await?.rps(),
                    first,
                ]
            };
            runs.push(pair);
        }
        let stack_usec =
            |usage: &Usage| cpu::shares(&watched, usage, cpu::cores()).stack_usec_per_answer();
        let (cpu_on, cpu_off) = (stack_usec(&on), stack_usec(&off));
        // Both sides did what they say: one recorded, the other not.
        let (kept, none) = (
            self.redis.sections(LUA_SKU).await?,
            self.redis.sections(UNTIMED_SKU).await?,
        );
        if kept == 0 || none != 0 {
            bail!(
                "{LUA_SKU} kept {kept} sections and {UNTIMED_SKU} {none}: the sides are not what they say"
            );
        }
        self.add(
            Row::new(
                "timeline-cost",
                ["lua", "lua, timeline off"],
                runs,
                Some(0.97),
            )
            .with_note(format!(
                "every critical section recorded (the timeline holds {kept} now) vs none (reset with timeline: false); \
                 CPU of the instances and Redis per answer: {cpu_on:.1} us vs {cpu_off:.1} us"
            )),
        );
        Ok(())
    }

    /// Row 4: sold-out answers vs `/healthz`.
    pub(super) async fn sold_out_vs_healthz(&mut self) -> anyhow::Result<()> {
        let path = format!("/deductStock/lua?sku={SOLD_OUT_SKU}");
        let mut runs = Vec::new();
        for _ in 0..self.config.runs {
            let refused = self.ours(&path).await?;
            if refused.sold_out != refused.requests {
                bail!(
                    "{SOLD_OUT_SKU} has no stock, yet {} of {} answers were not 409 sold out ({} sold)",
                    refused.requests - refused.sold_out,
                    refused.requests,
                    refused.sold
                );
            }
            runs.push([refused.rps(), self.rps("/healthz").await?]);
        }
        self.add(
            Row::new(
                "sold-out-vs-healthz",
                ["sold out", "/healthz"],
                runs,
                Some(0.95),
            )
            .with_note("lua on a SKU with no stock: every answer 409 sold_out".to_owned()),
        );
        Ok(())
    }

    /// Row 5: `watchdog` hand-offs vs 1 / (4 × RTT).
    pub(super) async fn watchdog_vs_ceiling(&mut self) -> anyhow::Result<()> {
        let (mut runs, mut rtts) = (Vec::new(), Vec::new());
        for _ in 0..self.config.runs {
            let rtt = self.redis.round_trip(2000).await?;
            rtts.push(rtt * 1e6);
            let locked = self
                .rps(&format!(
                    "/deductStock/watchdog?sku={WATCHDOG_SKU}&wait_ms=60000"
                ))
                .await?;
            runs.push([locked, 1.0 / (4.0 * rtt)]);
        }
        self.add(
            Row::new(
                "watchdog-vs-handoff-ceiling",
                ["watchdog", "1/(4*RTT)"],
                runs,
                Some(0.8),
            )
            .with_note(format!(
                "Redis round trip (PING) median {:.0} us; {} clients wait for the lock",
                report::median(rtts),
                self.config.concurrency
            )),
        );
        Ok(())
    }

    /// Row 6: `redlock` vs `watchdog`, many waiting clients each.
    pub(super) async fn redlock_vs_watchdog(&mut self) -> anyhow::Result<()> {
        // No answer, or 503 not_configured: no Redlock nodes.
        let probe = self
            .client
            .deduct(&format!("/deductStock/redlock?sku={REDLOCK_SKU}"))
            .await;
        if matches!(probe.status, 0 | 503) {
            self.skip(
                "redlock-vs-watchdog",
                "the stack has no Redlock nodes (up --redlock 5)",
            );
            return Ok(());
        }
        let mut runs = Vec::new();
        for _ in 0..self.config.runs {
            let majority = self
                .rps(&format!(
                    "/deductStock/redlock?sku={REDLOCK_SKU}&wait_ms=60000"
                ))
                .await?;
            let one = self
                .rps(&format!(
                    "/deductStock/watchdog?sku={WATCHDOG_SKU}&wait_ms=60000"
                ))
                .await?;
            runs.push([majority, one]);
        }
        self.add(Row::new(
            "redlock-vs-watchdog",
            ["redlock", "watchdog"],
            runs,
            None,
        ));
        Ok(())
    }
}
