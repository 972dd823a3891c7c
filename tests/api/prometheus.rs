//! A real Prometheus (Debian's `prometheus`) scraping a real `stocklock up`
//! stack with the configuration `up` prints: both instances are targets,
//! every answer they gave is counted once, each under its own instance, and
//! every query of the shipped Grafana dashboard evaluates. Says SKIPPED
//! (fails under `CI=true`) without the prometheus binary.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::Value;
use stocklock::os::{find_program, free_port, signal};
use tokio::process::{Child, Command};

use crate::helpers::{self, Stack, burst};

/// How long any one wait on Prometheus may take.
const PATIENCE: Duration = Duration::from_secs(30);

/// A prometheus server started by the test on a free loopback port,
/// stopped by pid (SIGKILL on drop if the test did not stop it).
struct Prometheus {
    child: Child,
    pid: u32,
    url: String,
    http: reqwest::Client,
    log: PathBuf,
    config: PathBuf,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts `binary` with `config` (a whole prometheus.yml) and waits
    /// until it is ready and is the one answering on its port. A free port
    /// can be taken before Prometheus binds it: then another is tried.
    async fn start(binary: &Path, config: &str) -> Prometheus {
        let mut failures = Vec::new();
        for _ in 0..3 {
            match Self::try_start(binary, config).await {
                Ok(prometheus) => return prometheus,
                Err(why) => failures.push(why),
            }
        }
        panic!("prometheus did not start:\n{}", failures.join("\n---\n"));
    }

    async fn try_start(binary: &Path, config: &str) -> Result<Prometheus, String> {
        let dir = tempfile::Builder::new()
            .prefix("stocklock-prometheus-")
            .tempdir()
            .unwrap();
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).unwrap();
        let log = dir.path().join("prometheus.log");
        let port = free_port().unwrap();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap())
            .kill_on_drop(true)
            .spawn()
            .map_err(|err| format!("cannot run {}: {err}", binary.display()))?;
        let pid = child.id().expect("a pid");
        let mut prometheus = Prometheus {
            child,
            pid,
            url: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()
                .unwrap(),
            log,
            config: config_path,
            _dir: dir,
        };
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Ok(Some(status)) = prometheus.child.try_wait() {
                return Err(format!(
                    "prometheus exited ({status}):\n{}",
                    prometheus.log()
                ));
            }
            let ready = prometheus
                .http
                .get(format!("{}/-/ready", prometheus.url))
                .send()
                .await;
            if ready.is_ok_and(|r| r.status() == 200) {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!(
                    "prometheus not ready within {PATIENCE:?}:\n{}",
                    prometheus.log()
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Ready, and ours: the server on the port runs our configuration.
        let flags = prometheus.api("status/flags", &[]).await;
        let ours = prometheus.config.to_str().unwrap();
        if flags["config.file"] != ours {
            return Err(format!(
                "another prometheus answers on {}: {flags}",
                prometheus.url
            ));
        }
        Ok(prometheus)
    }

    /// Its log, both streams, for failure messages.
    fn log(&self) -> String {
        let stderr = self.log.with_file_name("stderr.log");
        format!(
            "{}{}",
            std::fs::read_to_string(&self.log).unwrap_or_default(),
            std::fs::read_to_string(stderr).unwrap_or_default()
        )
    }

    /// `GET /api/v1/{path}?params`: its `data`, the status checked.
    async fn api(&self, path: &str, params: &[(&str, &str)]) -> Value {
        let url = reqwest::Url::parse_with_params(&format!("{}/api/v1/{path}", self.url), params)
            .unwrap();
        let body: Value = self
            .http
            .get(url)
            .send()
            .await
            .unwrap_or_else(|err| panic!("{path}: {err}\n{}", self.log()))
            .json()
            .await
            .unwrap_or_else(|err| panic!("{path}: not JSON: {err}"));
        assert_eq!(body["status"], "success", "{path} {params:?}: {body}");
        body["data"].clone()
    }

    /// An instant query's vector, as (value of `label`, value).
    async fn by(&self, label: &str, query: &str) -> BTreeMap<String, f64> {
        let data = self.api("query", &[("query", query)]).await;
        data["result"]
            .as_array()
            .unwrap_or_else(|| panic!("{query}: no vector: {data}"))
            .iter()
            .map(|sample| {
                let key = sample["metric"][label].as_str().unwrap_or("").to_owned();
                let value = sample["value"][1]
                    .as_str()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| panic!("{query}: bad sample {sample}"));
                (key, value)
            })
            .collect()
    }

    /// SIGTERM by pid, SIGKILL after 10 s; asserts it is gone.
    async fn stop(mut self) {
        signal(self.pid, Signal::SIGTERM);
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            signal(self.pid, Signal::SIGKILL);
            let _ = self.child.wait().await;
        }
        assert!(
            !helpers::alive(self.pid),
            "prometheus {} still runs",
            self.pid
        );
    }
}

/// The targets' health by scrape address (`host:port`).
async fn target_health(prometheus: &Prometheus) -> BTreeMap<String, String> {
    let data = prometheus.api("targets", &[("state", "active")]).await;
    data["activeTargets"]
        .as_array()
        .expect("activeTargets")
        .iter()
        .map(|target| {
            (
                target["discoveredLabels"]["__address__"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                target["health"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn prometheus_scrapes_each_instance_and_counts_every_answer_once() {
    let Some(binary) = find_program("prometheus") else {
        helpers::missing_tool(
            "prometheus_scrapes_each_instance_and_counts_every_answer_once: \
             prometheus is not installed (apt-get install prometheus)",
        );
        return;
    };
    let stack = Stack::start(2, None).await;
    let targets = stack.prometheus_targets.clone();
    assert_eq!(targets.len(), 2, "up printed targets {targets:?}");
    // What up printed, as a whole config, with a short scrape interval.
    let printed = stack
        .prometheus_config
        .clone()
        .expect("up printed a prometheus.yml line");
    let config = format!("global: {{scrape_interval: 250ms, scrape_timeout: 250ms}}\n{printed}\n");
    let prometheus = Prometheus::start(&binary, &config).await;

    // Both instances are scraped, and up.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let health = target_health(&prometheus).await;
        let mut scraped: Vec<&String> = health.keys().collect();
        scraped.sort();
        let mut expected: Vec<&String> = targets.iter().collect();
        expected.sort();
        // Right after start the target list may still be empty; it never
        // holds anything but up's targets.
        assert!(
            scraped.iter().all(|t| expected.contains(t)),
            "Prometheus scrapes {scraped:?}, up printed {expected:?}"
        );
        if scraped == expected && health.values().all(|h| h == "up") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "targets not up within {PATIENCE:?}: {health:?}\n{}",
            prometheus.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let per_instance = "sum by (instance) (stocklock_requests_total)";
    // Before any sale every instance's answers are there, at zero: a
    // series that first appeared with its value would lose it to rate().
    // A target is reported up before the samples of its scrape are
    // committed: wait until both instances' series can be queried.
    let names: Vec<&str> = stack.instances.iter().map(|i| i.name.as_str()).collect();
    let before = loop {
        let before = prometheus.by("instance", per_instance).await;
        if before.len() >= names.len() || tokio::time::Instant::now() >= deadline {
            break before;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        before,
        names.iter().map(|n| (n.to_string(), 0.0)).collect(),
        "the answers per instance before any sale"
    );

    // Sales through nginx, and lock waits on the watchdog's SKU.
    stack.reset("lua", 1000).await;
    stack.reset("watchdog", 1000).await;
    let lua = burst(
        stack.http(),
        &format!("{}/deductStock/lua?sku=lua", stack.url),
        60,
        6,
    )
    .await;
    let watchdog = burst(
        stack.http(),
        &format!("{}/deductStock/watchdog?sku=watchdog&work_ms=2", stack.url),
        20,
        4,
    )
    .await;
    assert_eq!(lua.count(200), 60);
    assert_eq!(watchdog.count(200), 20);
    let mut answered: BTreeMap<String, f64> = BTreeMap::new();
    for tally in [&lua, &watchdog] {
        for (instance, n) in &tally.by_instance {
            *answered.entry(instance.clone()).or_default() += *n as f64;
        }
    }
    assert_eq!(
        answered.len(),
        2,
        "one instance answered nothing: {answered:?}"
    );

    // Prometheus counts each instance's answers under its own name, each
    // exactly once, and never more.
    let expected: BTreeMap<String, f64> = answered
        .iter()
        .map(|(name, n)| (name.clone(), before.get(name).copied().unwrap_or(0.0) + n))
        .collect();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let now = prometheus.by("instance", per_instance).await;
        for (name, value) in &now {
            let most = expected.get(name).copied().unwrap_or(0.0);
            assert!(
                *value <= most,
                "instance {name:?}: {value} answers counted, {most} given ({now:?})"
            );
        }
        if now == expected {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "Prometheus counts {now:?}, the instances gave {expected:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let total = prometheus.by("", "sum(stocklock_requests_total)").await;
    let given: f64 = before.values().sum::<f64>() + 80.0;
    assert_eq!(total.get(""), Some(&given));

    // The lock figures made it too: every watchdog wait ended with the lock,
    // and nobody waits now.
    let waits = prometheus
        .by(
            "outcome",
            r#"sum by (outcome) (stocklock_lock_wait_seconds_count{variant="watchdog"})"#,
        )
        .await;
    assert_eq!(
        waits,
        BTreeMap::from([("acquired".to_owned(), 20.0), ("gave_up".to_owned(), 0.0)])
    );
    let waiting = prometheus
        .by(
            "sku",
            r#"sum by (sku) (stocklock_lock_waiters{variant="watchdog"})"#,
        )
        .await;
    assert_eq!(waiting, BTreeMap::from([("watchdog".to_owned(), 0.0)]));

    // Every query of the Grafana dashboard evaluates on what was scraped.
    for query in crate::docker::dashboard_queries() {
        let concrete = crate::docker::concrete_query(&query);
        prometheus.api("query", &[("query", &concrete)]).await;
    }

    prometheus.stop().await;
    stack.stop().await;
}
