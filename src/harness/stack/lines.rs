//! Reading `up`'s lines: what each says about the stack.

use super::{Instance, Node, Stack};

impl Stack {
    /// Takes in what a line of `up` says about the stack.
    pub(super) fn observe(&mut self, line: &str) {
        let pid_of = |rest: &str| rest.split(' ').next().and_then(|p| p.parse().ok());
        if let Some(instance) = parse_instance(line) {
            match self.instances.iter_mut().find(|i| i.name == instance.name) {
                Some(known) => *known = instance,
                None => self.instances.push(instance),
            }
        } else if let Some(rest) = line.strip_prefix("redis: pid ") {
            self.redis_pid = pid_of(rest);
            self.redis_url = rest.split(' ').nth(1).map(str::to_owned);
        } else if let Some(rest) = line.strip_prefix("redis replica: pid ") {
            // `redis replica: pid 129 redis://127.0.0.1:PORT`
            self.replica = parse_node(rest);
        } else if let Some(rest) = line.strip_prefix("replication relay: pid ") {
            // `replication relay: pid 130 127.0.0.1:PORT`
            self.relay = parse_node(rest);
        } else if let Some(rest) = line.strip_prefix("sentinel ") {
            // `sentinel 2: pid 131 127.0.0.1:PORT`
            place_node(&mut self.sentinels, rest);
        } else if let Some(rest) = line.strip_prefix("redis cluster: pids ") {
            if let Some((pids, urls)) = rest.split_once(' ') {
                self.cluster = pids
                    .split(',')
                    .zip(urls.split(','))
                    .map(|(pid, url)| Node {
                        pid: pid.parse().unwrap_or(0),
                        url: url.to_owned(),
                    })
                    .collect();
            }
        } else if let Some(rest) = line.strip_prefix("redis relay ") {
            // `redis relay 1: pid 133 127.0.0.1:PORT` (instance a's)
            place_node(&mut self.relays, rest);
        } else if let Some(rest) = line.strip_prefix("redlock node ") {
            // `redlock node 3: pid 123 redis://...`
            place_node(&mut self.redlock_nodes, rest);
        } else if let Some(rest) = line.strip_prefix("etcd member ") {
            // `etcd member 2: pid 124 http://...`
            place_node(&mut self.etcd_members, rest);
        } else if let Some(rest) = line.strip_prefix("zookeeper ") {
            // `zookeeper 2: pid 123 127.0.0.1:PORT`
            let server = rest.split_once(": pid ").and_then(|(_, rest)| {
                let (pid, address) = rest.split_once(' ')?;
                Some(Node {
                    pid: pid.parse().ok()?,
                    url: address.to_owned(),
                })
            });
            self.zookeeper.extend(server);
        } else if let Some(rest) = line.strip_prefix("postgres: pid ") {
            // `postgres: pid 132 postgresql://stocklock:PASSWORD@127.0.0.1:PORT/stocklock`
            self.postgres = parse_node(rest);
        } else if let Some(rest) = line.strip_prefix("nginx: pid ") {
            self.nginx_pid = pid_of(rest).unwrap_or(0);
        } else if let Some(rest) = line.strip_prefix("stocklock is up: ") {
            self.url = rest.trim_end_matches('/').to_owned();
        } else if let Some(rest) = line.strip_prefix("prometheus targets: ") {
            // `prometheus targets: HOST:PORT,HOST:PORT (why)`
            let list = rest.split(' ').next().unwrap_or_default();
            self.prometheus_targets = list.split(',').map(str::to_owned).collect();
        } else if let Some(config) = line.strip_prefix("prometheus.yml: ") {
            self.prometheus_config = Some(config.to_owned());
        } else if let Some(token) = line.strip_prefix("admin token: ") {
            self.token = token.to_owned();
        }
    }
}

/// Puts the node of `N: pid P URL` (what follows `redlock node ` or
/// `etcd member `) at its place N (from 1) in `nodes`.
fn place_node(nodes: &mut Vec<Node>, line: &str) {
    let node = line.split_once(": pid ").and_then(|(index, rest)| {
        let (pid, url) = rest.split_once(' ')?;
        Some((
            index.parse::<usize>().ok()?,
            Node {
                pid: pid.parse().ok()?,
                url: url.to_owned(),
            },
        ))
    });
    if let Some((index, node)) = node
        && index > 0
    {
        if nodes.len() < index {
            nodes.resize(
                index,
                Node {
                    pid: 0,
                    url: String::new(),
                },
            );
        }
        nodes[index - 1] = node;
    }
}

/// The node of `P URL` (what follows `...: pid `).
fn parse_node(rest: &str) -> Option<Node> {
    let (pid, url) = rest.split_once(' ')?;
    Some(Node {
        pid: pid.parse().ok()?,
        url: url.to_owned(),
    })
}

pub(super) fn parse_instance(line: &str) -> Option<Instance> {
    let rest = line.strip_prefix("instance ")?;
    let (name, rest) = rest.split_once(": pid ")?;
    let (pid, url) = rest.split_once(' ')?;
    Some(Instance {
        name: name.to_owned(),
        pid: pid.parse().ok()?,
        url: url.to_owned(),
    })
}
