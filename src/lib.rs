//! # stocklock
//!
//! A teaching lab and a reference implementation for flash-sale stock
//! protection. Several HTTP instances behind nginx share one Redis; each
//! instance sells the same stock through `/deductStock/{variant}`, where the
//! variant decides what protects the deliberately non-atomic critical section.
//!
//! # Layout
//!
//! - [`wire`]: the JSON shapes on the wire, shared by server, dashboard and load generator.
//! - [`knobs`]: parsing of user input (SKU, `work_ms`, `lease_ms`, `wait_ms`, a reset's stock and buckets) into domain types, beside the limits that bound it.
//! - [`store`]: the Redis handle (one server or a Redis Cluster) and the key layout of one SKU (all keys share a hash tag).
//! - [`outcome`]: what an attempt ends as (sold, sold out, busy and why, unknown), below both the section and the ledger.
//! - [`ledger`]: the truth. A sale is recorded by the same script that writes the stock, in every variant.
//! - [`orders`]: orders in PostgreSQL: the connection and the schema's migrations (embedded SQL files), run by each instance at start.
//! - [`timeline`]: every critical section and chaos event of a SKU on one clock, kept in a capped list, and the overlaps (two holders at once).
//! - [`section`]: the critical section every variant protects, written once (offering the [`outcome`] types to the variants).
//! - [`marks`]: sold-out marks: an instance answers "sold out" itself once Redis said so, until a reset is announced or a short TTL passes.
//! - [`sale`]: one sale from a parsed request to its answer (the domain's way in for the HTTP layer).
//! - [`lock`]: the distributed lock library (lease lock, reentrant lock, watchdog, wake-ups, Redlock and its nodes; the etcd lock through its JSON gateway; a ZooKeeper lock).
//! - [`variants`]: one file per protection strategy, dispatched by an exhaustive `match`.
//! - [`metrics`]: Prometheus metrics of an instance (each instance is its own scrape target), and the names a dashboard may query.
//! - [`web`]: what the two HTTP surfaces share, below both: `AppError` (every failure as JSON) and the admin token check.
//! - [`dashboard`]: its own router: the live page, its board (read from Redis), server-sent events, runs and scenarios from the page.
//! - [`http`]: the instance's router (`app`, merging the dashboard's) and state; thin handlers per concern (deduct, admin, info) that parse, call the domain and map outcomes.
//! - [`server`]: `stocklock serve`: building and running one instance.
//! - [`client`]: the one typed client of a running stack's API (through nginx or to one instance), for `load`, `lab`, the dashboard's runs and the tests.
//! - [`load`]: `stocklock load`: the runs (its [`load::engine`] sends the requests), the [`load::verdict`] and the [`load::report`]; `bench`.
//! - [`lab`]: `stocklock lab`: every failure scenario against every variant ([`lab::scenario`]), judged from evidence ([`lab::judge`]), and the matrix.
//! - [`lessons`]: the lesson path (article 001's story), each step one lab cell run on the live stack.
//! - [`compare`]: `stocklock compare`: article 000's lock-store table (Redis, Redlock, etcd, ZooKeeper), measured in one run.
//! - [`up`]: `stocklock up`: redis-server (or a 3-master cluster), Redlock's nodes, an etcd cluster, ZooKeeper servers, PostgreSQL, N instances and nginx as children.
//! - [`chaos`]: chaos mode: crash after SETNX, stop-the-world pauses, vanishing locks, Redis paused or restarted, the overlap witness.
//! - [`args`]: command-line values the commands' config types parse alike (durations, variant names, the generated token).
//! - [`cli`]: the command line; `load`, `bench` and `up` parse into their own config types.
//! - [`telemetry`]: tracing set-up.
//! - [`os`]: process and signal helpers (signals, Ctrl-C/SIGTERM, finding programs, free ports), below everything.
//!
//! Dependencies point one way: in this order, each module imports only modules
//! listed before it, so no two import each other.
//!
//! 1. [`os`] and [`telemetry`];
//! 2. the domain: [`knobs`], [`wire`], [`metrics`], [`store`], [`timeline`], [`chaos`], [`outcome`],
//!    [`ledger`], [`orders`], [`lock`], [`marks`], [`section`], [`variants`], [`sale`]. It never imports
//!    transport or tools;
//! 3. the tools: [`args`], [`client`], [`load`], [`up`], [`lab`] (below the dashboard, which
//!    starts runs and scenarios), [`lessons`], [`compare`];
//! 4. HTTP: [`web`], [`dashboard`], [`http`], [`server`];
//! 5. [`cli`].

pub mod args;
pub mod chaos;
pub mod cli;
pub mod client;
pub mod compare;
pub mod dashboard;
pub mod http;
pub mod knobs;
pub mod lab;
pub mod ledger;
pub mod lessons;
pub mod load;
pub mod lock;
pub mod marks;
pub mod metrics;
pub mod orders;
pub mod os;
pub mod outcome;
pub mod sale;
pub mod section;
pub mod server;
pub mod store;
pub mod telemetry;
pub mod timeline;
pub mod up;
pub mod variants;
pub mod web;
pub mod wire;
