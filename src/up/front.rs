//! Where users reach the stack: nginx's address, the URL shown for it, and
//! the lines that say the stack is up (with a whole Prometheus
//! configuration for the instances).

use std::net::{IpAddr, SocketAddr};

use anyhow::Context;

use super::UpConfig;
use super::nginx::Nginx;

/// Where users reach the stack: nginx's address, and the URL shown for it.
pub(super) struct Front {
    pub(super) listen: SocketAddr,
    /// The host in the URLs printed (loopback when nginx binds every address).
    pub(super) shown_host: String,
    pub(super) port: u16,
    /// `http://host:port`: the dashboard's, and where its runs send their load.
    pub(super) public_url: String,
}

impl Front {
    pub(super) fn parse(config: &UpConfig) -> anyhow::Result<Front> {
        let host: IpAddr = config
            .host
            .parse()
            .with_context(|| format!("--host {:?} is not an IP address", config.host))?;
        let shown_host = if host.is_unspecified() {
            "127.0.0.1".to_owned()
        } else {
            host.to_string()
        };
        Ok(Front {
            listen: SocketAddr::new(host, config.port),
            public_url: format!("http://{shown_host}:{}", config.port),
            shown_host,
            port: config.port,
        })
    }

    /// The lines that say the stack is up (the lab and the tests wait for
    /// the last: the admin token), with the instances' own addresses as
    /// Prometheus's targets (they keep their address across restarts, unless
    /// another process took it meanwhile).
    pub(super) fn announce(
        &self,
        nginx: &Nginx,
        instances: &[SocketAddr],
        modes: Modes,
        admin_token: &str,
    ) {
        let Modes { chaos, classroom } = modes;
        let public_url = &self.public_url;
        say!(
            "nginx: pid {} http://{}",
            nginx.pid().unwrap_or(0),
            self.listen
        );
        say!("stocklock is up: {public_url}/");
        if chaos {
            say!(
                "chaos mode is ON (--no-chaos turns it off): /api/admin/chaos can crash, freeze and break the instances and Redis"
            );
        } else {
            say!("chaos mode is off");
        }
        let targets: Vec<String> = instances.iter().map(SocketAddr::to_string).collect();
        say!(
            "prometheus targets: {} (each instance's own /metrics; nginx's /metrics only points here)",
            targets.join(",")
        );
        say!("prometheus.yml: {}", scrape_config(&targets));
        if classroom {
            say!(
                "classroom is open: students join at {public_url}/join; your board: {public_url}/classroom#token={admin_token}"
            );
        }
        say!("dashboard: {public_url}/#token={admin_token}");
        say!("admin token: {admin_token}");
        say!(
            "try: curl -s 'http://{}:{}/deductStock/lua?sku=lua'   (Ctrl-C stops everything)",
            self.shown_host,
            self.port
        );
    }
}

/// A whole Prometheus configuration, on one line, that scrapes `targets`
/// (`host:port` of each instance). `honor_labels` keeps the instances' own
/// `instance` label (a, b, ...) instead of renaming it `exported_instance`.
pub fn scrape_config(targets: &[String]) -> String {
    let quoted: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
    format!(
        "scrape_configs: [{{job_name: stocklock, honor_labels: true, static_configs: [{{targets: [{}]}}]}}]",
        quoted.join(", ")
    )
}

/// What the stack was started with that its announcement says.
#[derive(Clone, Copy, Debug)]
pub(super) struct Modes {
    pub(super) chaos: bool,
    pub(super) classroom: bool,
}
