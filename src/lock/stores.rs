//! The lock stores beside the main Redis: Redlock's independent Redis
//! servers, an etcd cluster and a ZooKeeper ensemble. Each is optional: a
//! variant whose store an instance was not given answers 503
//! `not_configured` and says how to get one. The stock of the Redis
//! variants always stays on the main Redis; only their lock lives here.
//! PostgreSQL, when the instance has one, is here too: the `pg-*`
//! variants keep their stock there, and `pg-advisory` its lock.

use super::etcd::EtcdClient;
use super::{RedlockNodes, ZooKeeperSessions};

/// Where an instance finds its lock stores (`serve`'s flags).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct LockStoresConfig {
    /// The independent Redis servers of the `redlock` variant,
    /// comma-separated (five is the usual number; the stock stays on the
    /// main Redis). Without them `redlock` answers 503.
    #[arg(long, value_delimiter = ',', env = "STOCKLOCK_REDLOCK_NODES")]
    pub redlock_nodes: Vec<String>,
    /// The client URLs of an etcd cluster's members (`http://host:port`,
    /// comma-separated), for the `etcd` variant. Without them `etcd`
    /// answers 503.
    #[arg(long, value_delimiter = ',', env = "STOCKLOCK_ETCD_ENDPOINTS")]
    pub etcd_endpoints: Vec<String>,
    /// A ZooKeeper connect string (`host:port,host:port`), for the
    /// `zookeeper` variant. Without it `zookeeper` answers 503. (`up
    /// --zookeeper N` is a count of servers to start; `up` passes their
    /// connect string here.)
    #[arg(long, env = "STOCKLOCK_ZOOKEEPER")]
    pub zookeeper: Option<String>,
}

impl LockStoresConfig {
    /// The flags that give an instance these stores (what `up` passes on).
    pub fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if !self.redlock_nodes.is_empty() {
            args.push(format!("--redlock-nodes={}", self.redlock_nodes.join(",")));
        }
        if !self.etcd_endpoints.is_empty() {
            args.push(format!(
                "--etcd-endpoints={}",
                self.etcd_endpoints.join(",")
            ));
        }
        if let Some(zookeeper) = &self.zookeeper {
            args.push(format!("--zookeeper={zookeeper}"));
        }
        args
    }
}

/// Handles on the lock stores an instance was given. Cheap to clone; no
/// connection is made before a request needs one.
#[derive(Clone, Default)]
pub struct LockStores {
    pub redlock: Option<RedlockNodes>,
    pub etcd: Option<EtcdClient>,
    pub zookeeper: Option<ZooKeeperSessions>,
    /// A pool of connections to the instance's PostgreSQL (`--postgres-url`).
    pub postgres: Option<deadpool_postgres::Pool>,
}

impl LockStores {
    /// Checks `config`'s addresses and makes the handles.
    pub fn open(config: &LockStoresConfig) -> anyhow::Result<Self> {
        use anyhow::Context as _;
        let redlock = RedlockNodes::open(&config.redlock_nodes)
            .with_context(|| format!("bad --redlock-nodes {:?}", config.redlock_nodes))?;
        let etcd = if config.etcd_endpoints.is_empty() {
            None
        } else {
            for endpoint in &config.etcd_endpoints {
                let url = reqwest::Url::parse(endpoint)
                    .with_context(|| format!("bad --etcd-endpoints entry {endpoint:?}"))?;
                anyhow::ensure!(
                    matches!(url.scheme(), "http" | "https") && url.host().is_some(),
                    "bad --etcd-endpoints entry {endpoint:?}: expected http://host:port"
                );
            }
            Some(EtcdClient::new(config.etcd_endpoints.clone())?)
        };
        let zookeeper = match config.zookeeper.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(connect) => {
                let valid = connect.split(',').all(|server| {
                    server
                        .rsplit_once(':')
                        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
                });
                anyhow::ensure!(
                    valid,
                    "bad --zookeeper {connect:?}: expected host:port[,host:port...]"
                );
                Some(ZooKeeperSessions::new(connect))
            }
        };
        Ok(Self {
            redlock: (!redlock.is_empty()).then_some(redlock),
            etcd,
            zookeeper,
            postgres: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(etcd: &[&str], zookeeper: Option<&str>) -> LockStoresConfig {
        LockStoresConfig {
            redlock_nodes: Vec::new(),
            etcd_endpoints: etcd.iter().map(|e| (*e).to_owned()).collect(),
            zookeeper: zookeeper.map(str::to_owned),
        }
    }

    #[test]
    fn none_given_none_open() {
        let stores = LockStores::open(&LockStoresConfig::default()).unwrap();
        assert!(stores.redlock.is_none() && stores.etcd.is_none() && stores.zookeeper.is_none());
    }

    #[test]
    fn addresses_are_checked() {
        assert!(LockStores::open(&config(&["127.0.0.1:2379"], None)).is_err());
        assert!(LockStores::open(&config(&["ftp://127.0.0.1:2379"], None)).is_err());
        assert!(LockStores::open(&config(&[], Some("127.0.0.1"))).is_err());
        assert!(LockStores::open(&config(&[], Some("127.0.0.1:99999"))).is_err());
        let ok = LockStores::open(&config(
            &["http://127.0.0.1:2379", "http://127.0.0.1:2380"],
            Some("127.0.0.1:2181,127.0.0.1:2182"),
        ))
        .unwrap();
        assert_eq!(ok.etcd.unwrap().endpoints().len(), 2);
        assert_eq!(
            ok.zookeeper.unwrap().connect_string(),
            "127.0.0.1:2181,127.0.0.1:2182"
        );
    }

    #[test]
    fn flags_round_trip() {
        let given = config(&["http://127.0.0.1:1"], Some("127.0.0.1:2"));
        assert_eq!(
            given.to_args(),
            [
                "--etcd-endpoints=http://127.0.0.1:1",
                "--zookeeper=127.0.0.1:2"
            ]
        );
    }
}
