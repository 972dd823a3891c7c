//! Row `classroom-30-vs-1`: a class stepping at once. Each run seats
//! [`SEATS`] students through `/join` (each its own cookie, as thirty
//! browsers would hold), and each plays step mode's `none · race` to its
//! end on `/api/step` at once, a step every [`PACE`] at most (a quick
//! student's clicks; a seat may send 10 requests a second), each after
//! the one before was answered; then one seat plays it alone. The row is the
//! 95th percentile of a step's answer in each, in ms; the goal is the
//! class's at most [`GOAL_P95_MS`]. It needs chaos mode (step mode's gates)
//! and a stack whose classroom the bench may open with the admin token.

use super::*;

/// Students in the class.
pub(super) const SEATS: usize = 30;
/// A seat sends its next step this long after its last, or once that
/// was answered if it took longer.
const PACE: Duration = Duration::from_millis(250);
/// The class's step at the 95th percentile, at most this.
const GOAL_P95_MS: f64 = 1000.0;

impl Bench {
    pub(super) async fn classroom(&mut self) -> anyhow::Result<()> {
        let name = "classroom-30-vs-1";
        let opened: anyhow::Result<serde_json::Value> = self
            .client
            .admin("/api/admin/classroom", &serde_json::json!({"open": true}))
            .await;
        if let Err(err) = opened {
            self.skip(
                name,
                &format!("the classroom could not be opened ({err:#}): it needs chaos mode and the admin token"),
            );
            return Ok(());
        }
        let web = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(120))
            .build()?;
        let mut runs = Vec::new();
        for _ in 0..self.config.runs {
            let mut seats = Vec::new();
            for i in 0..SEATS {
                seats.push(seat(&web, &self.client.url(&format!("/join?name=bench {i}"))).await?);
            }
            let class = futures_util::future::try_join_all(
                seats.iter().map(|cookie| play(&web, &self.client, cookie)),
            )
            .await?;
            let alone = play(&web, &self.client, &seats[0]).await?;
            runs.push([p95(class.concat()), p95(alone)]);
        }
        // The goal is the class's own p95, not a ratio: said in the note.
        let row = Row::new(name, ["30 seats", "1 seat"], runs, None).in_unit("ms");
        let met = if row.ours <= GOAL_P95_MS {
            "met"
        } else {
            "NOT met"
        };
        let note = format!(
            "a step's p95 with {SEATS} seats stepping at once: {:.0} ms (goal <= {GOAL_P95_MS:.0} ms: {met})",
            row.ours
        );
        self.add(row.with_note(note));
        Ok(())
    }
}

/// A seat: the cookie `/join` sets.
async fn seat(web: &reqwest::Client, join: &str) -> anyhow::Result<String> {
    let answer = web.get(join).send().await?;
    let cookie = answer
        .headers()
        .get(reqwest::header::SET_COOKIE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .with_context(|| format!("{join} answered {} with no seat", answer.status()))?;
    Ok(cookie.to_owned())
}

/// Plays `none · race` as seat `cookie`, releasing the first buyer
/// offered each time: each step's answer time, in ms.
async fn play(
    web: &reqwest::Client,
    client: &StackClient,
    cookie: &str,
) -> anyhow::Result<Vec<f64>> {
    let send = |path: String, body: serde_json::Value| {
        web.post(client.url(&path))
            .header(reqwest::header::COOKIE, cookie)
            .json(&body)
            .send()
    };
    let start = serde_json::json!({"variant": "none", "scenario": "race"});
    let mut view: serde_json::Value = send("/api/step".to_owned(), start)
        .await?
        .error_for_status()?
        .json()
        .await?;
    let id = view["id"].as_str().context("a run with no id")?.to_owned();
    let mut took = Vec::new();
    while view["over"] != true {
        let first = view["releases"][0].clone();
        anyhow::ensure!(!first.is_null(), "run {id}: nobody to let go: {view}");
        if let Some(last) = took.last() {
            let since = Duration::from_secs_f64(*last / 1000.0);
            tokio::time::sleep(PACE.saturating_sub(since)).await;
        }
        let sent = std::time::Instant::now();
        view = send(
            format!("/api/step/{id}"),
            serde_json::json!({"take": first}),
        )
        .await?
        .error_for_status()?
        .json()
        .await?;
        took.push(sent.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(took)
}

/// The 95th percentile of `values`.
fn p95(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values
        .get(((values.len().max(1) - 1) as f64 * 0.95) as usize)
        .copied()
        .unwrap_or(f64::NAN)
}
