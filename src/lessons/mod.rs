//! The guided lesson path (`GET /lessons`): article 001's story in
//! thirteen steps (the last two past its end), each one experiment of the lab run
//! on the live stack.
//!
//! A step's button asks any instance (`POST /api/admin/lessons/{id}`) to
//! run `stocklock lab --target <this stack> --variant V S` as a process of
//! its own, detached from the instance: some experiments crash an instance
//! of the stack, maybe the very one that started them. The lab process
//! writes the step's result to Redis itself (`lab --lesson ID`), where every
//! instance reads it (`GET /api/lessons`); the page then draws the SKU's
//! timeline from `/api/timeline`. One experiment at a time, stack-wide.
//!
//! A classroom seat runs the steps that touch nothing but their SKU on SKUs
//! of its own (`lab --sku-prefix`), its results kept apart from the
//! teacher's; one experiment per seat, a few seats' at once ([`crate::classroom::jobs`]).

mod seats;
mod steps;

use std::collections::BTreeMap;
use std::process::Stdio;

use redis::AsyncCommands;
use serde::{Deserialize, Serialize};

pub use self::steps::{STEPS, Step, find};
use crate::lab::Cell;
use crate::store::{Store, StoreError};

/// Hash of step id → [`Status`] as JSON.
pub const STATUS_KEY: &str = "stocklock:lessons";
/// Held while an experiment runs (expires after [`RUN_LIMIT_S`], should
/// the lab process die without a word).
const RUNNING_KEY: &str = "stocklock:lessons:running";
const RUN_LIMIT_S: u64 = 120;

/// One step's last run, as the page shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// `running`, `done` or `failed`.
    pub state: String,
    /// The lab's cell: what the articles expect, what was observed, the evidence.
    #[serde(default)]
    pub cell: Option<Cell>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `GET /api/lessons`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lessons {
    pub steps: BTreeMap<String, Status>,
}

/// Whose experiments: the stack's (the teacher's), or a classroom seat's.
#[derive(Clone, Copy, Debug)]
pub enum Who<'a> {
    Teacher,
    Seat(&'a str),
}

impl Who<'_> {
    /// The hash of its steps' results.
    fn status_key(self) -> String {
        match self {
            Who::Teacher => STATUS_KEY.to_owned(),
            Who::Seat(id) => format!("{STATUS_KEY}:seat:{id}"),
        }
    }
}

/// Every step's last run, of `who`'s experiments.
pub async fn read(store: &Store, who: Who<'_>) -> Result<Lessons, StoreError> {
    let mut conn = store.conn().await?;
    let raw: BTreeMap<String, String> = conn.hgetall(who.status_key()).await?;
    Ok(Lessons {
        steps: raw
            .into_iter()
            .filter_map(|(id, json)| Some((id, serde_json::from_str(&json).ok()?)))
            .collect(),
    })
}

/// Why an experiment cannot start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("another lesson experiment is running; wait for it to finish")]
    Busy,
    #[error("{}", crate::classroom::jobs::Refused::Seat.why())]
    SeatBusy,
    #[error("{}", crate::classroom::jobs::Refused::Class.why())]
    ClassBusy,
    #[error(
        "this experiment strikes the whole stack (an instance, a store): the teacher runs it; try it by hand in step mode"
    )]
    NotASeats,
    #[error("{0}")]
    Unavailable(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<crate::lock::Error> for StartError {
    fn from(err: crate::lock::Error) -> Self {
        StartError::Store(err.into())
    }
}

/// Where the stack is, for the lab process.
pub struct Stack<'a> {
    /// nginx.
    pub url: &'a str,
    pub admin_token: &'a str,
    pub redis_url: &'a str,
}

/// Starts `step`'s experiment on `stack` for `who`; its status says
/// `running` until the lab process writes the result.
pub async fn start(
    store: &Store,
    step: &Step,
    stack: &Stack<'_>,
    who: Who<'_>,
) -> Result<Status, StartError> {
    let mut conn = store.conn().await?;
    match who {
        Who::Teacher => {
            let claimed: Option<String> = redis::cmd("SET")
                .arg(RUNNING_KEY)
                .arg(step.id)
                .arg("NX")
                .arg("EX")
                .arg(RUN_LIMIT_S)
                .query_async(&mut conn)
                .await
                .map_err(StoreError::from)?;
            if claimed.is_none() {
                return Err(StartError::Busy);
            }
        }
        Who::Seat(id) => seats::claim(&mut conn, step, id).await?,
    }
    let running = Status {
        state: "running".to_owned(),
        ..Status::default()
    };
    write(&mut conn, who, step.id, &running).await?;
    let binary = std::env::current_exe()
        .map_err(|err| StartError::Unavailable(format!("cannot find this program: {err}")))?;
    // Not a child that dies with this instance: the lab may crash it.
    let mut lab = std::process::Command::new(binary);
    lab.args(["lab", "--variant", step.variant, step.scenario])
        .args(["--target", stack.url, "--redis-url", stack.redis_url])
        .args(["--lesson", step.id]);
    if let Who::Seat(id) = who {
        lab.args([
            "--seat",
            id,
            "--sku-prefix",
            &crate::classroom::jobs::sku_prefix(id),
        ]);
    }
    let spawned = lab
        .env("STOCKLOCK_ADMIN_TOKEN", stack.admin_token)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    match spawned {
        // Reaped in the background: the instance must not keep a zombie.
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
            Ok(running)
        }
        Err(err) => {
            let failed = Status {
                state: "failed".to_owned(),
                cell: None,
                error: Some(format!("cannot start the lab: {err}")),
            };
            write(&mut conn, who, step.id, &failed).await?;
            release(&mut conn, who).await?;
            Err(StartError::Unavailable(format!(
                "cannot start the lab: {err}"
            )))
        }
    }
}

async fn write(
    conn: &mut crate::store::Conn,
    who: Who<'_>,
    id: &str,
    status: &Status,
) -> Result<(), StoreError> {
    let json = serde_json::to_string(status).unwrap_or_default();
    let _: i64 = conn.hset(who.status_key(), id, json).await?;
    if let Who::Seat(_) = who {
        let _: bool = conn
            .expire(
                who.status_key(),
                crate::classroom::SEAT_IDLE.as_secs() as i64,
            )
            .await?;
    }
    Ok(())
}

/// The next experiment of `who` may start.
async fn release(conn: &mut crate::store::Conn, who: Who<'_>) -> Result<(), StoreError> {
    match who {
        Who::Teacher => {
            let _: i64 = conn.del(RUNNING_KEY).await?;
        }
        Who::Seat(id) => crate::classroom::jobs::release(conn, id).await?,
    }
    Ok(())
}

/// The lab process's last word on a lesson (`lab --lesson ID`): the cell
/// it played, or why it failed; the next experiment may start.
pub async fn finish(
    redis_url: &str,
    id: &str,
    seat: Option<&str>,
    outcome: anyhow::Result<Vec<Cell>>,
) -> anyhow::Result<()> {
    let who = seat.map_or(Who::Teacher, Who::Seat);
    let status = match outcome {
        Ok(cells) => match cells.into_iter().next() {
            Some(cell) => Status {
                state: "done".to_owned(),
                cell: Some(cell),
                error: None,
            },
            None => Status {
                state: "failed".to_owned(),
                cell: None,
                error: Some(
                    "the lab played no cell (is the stack a chaos-mode stack of two instances?)"
                        .to_owned(),
                ),
            },
        },
        Err(err) => Status {
            state: "failed".to_owned(),
            cell: None,
            error: Some(format!("{err:#}")),
        },
    };
    let store = Store::open(redis_url)?;
    let mut conn = store.conn().await?;
    write(&mut conn, who, id, &status).await?;
    release(&mut conn, who).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::Scenario;
    use crate::variants::Variant;

    /// The Chinese of every step is Chinese: its Latin words are code (in
    /// backticks, shown as code), identifiers and names.
    #[test]
    fn every_step_speaks_chinese() {
        let names = Variant::and_scenario_names();
        for step in &STEPS {
            for (en, zh) in [
                (step.title, step.title_zh),
                (step.text, step.text_zh),
                (step.look, step.look_zh),
                (step.goal, step.goal_zh),
            ] {
                let said = crate::wire::Said {
                    en: en.into(),
                    zh: zh.into(),
                };
                assert_eq!(
                    said.stray_english(&names),
                    Vec::<String>::new(),
                    "{}: {zh}",
                    step.id
                );
            }
        }
    }

    #[test]
    fn every_step_plays_a_cell_the_lab_has() {
        for step in &STEPS {
            let variant: Variant = step.variant.parse().unwrap();
            let scenario: Scenario = step.scenario.parse().unwrap();
            assert!(
                scenario.claim(variant).applies(),
                "{}: {} claims nothing of {}",
                step.id,
                step.variant,
                step.scenario
            );
            assert!(
                !scenario.own_stack(variant),
                "{}: plays on the live stack",
                step.id
            );
        }
    }

    /// A step's code is this project's: it opens with the path of a file
    /// (`// src/...` or `-- src/...`), and every line under a path is a
    /// line of that file, as written (a line ending in `{ /* ... */ }`
    /// stands for one that opens a block there). A renamed file or a
    /// rewritten line shows here, not in front of a class.
    #[test]
    fn every_step_quotes_real_lines_of_the_files_it_names() {
        fn path_of(line: &str) -> Option<&str> {
            let rest = line
                .strip_prefix("// ")
                .or_else(|| line.strip_prefix("-- "))?;
            let path = rest.split_whitespace().next()?.trim_end_matches(':');
            (path.starts_with("src/") || path.starts_with("crates/")).then_some(path)
        }
        for step in &STEPS {
            let mut file: Option<(&str, Vec<String>)> = None;
            for line in step.code.lines() {
                let line = line.trim();
                if let Some(path) = path_of(line) {
                    let text = std::fs::read_to_string(
                        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path),
                    )
                    .unwrap_or_else(|err| panic!("{}: cannot read {path}: {err}", step.id));
                    file = Some((path, text.lines().map(|l| l.trim().to_owned()).collect()));
                    continue;
                }
                let Some((path, lines)) = &file else {
                    panic!("{}: its code must open with the path of a file", step.id);
                };
                let found = match line.strip_suffix("{ /* ... */ }") {
                    Some(head) => lines.iter().any(|l| l.starts_with(head.trim_end())),
                    None => lines.iter().any(|l| l == line),
                };
                assert!(found, "{}: {path} has no line {line:?}", step.id);
            }
        }
    }
}
