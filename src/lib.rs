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
//! - [`knobs`]: parsing of user input (SKU, `work_ms`, `lease_ms`, `wait_ms`) into domain types.
//! - [`store`]: the Redis handle (one server or a Redis Cluster) and the key layout of one SKU (all keys share a hash tag).
//! - [`ledger`]: the truth. A sale is recorded by the same script that writes the stock, in every variant.
//! - [`section`]: the critical section every variant protects, written once, and its outcomes.
//! - [`sale`]: one sale from a parsed request to its answer (the domain's way in for the HTTP layer).
//! - [`lock`]: the distributed lock library (lease lock, reentrant lock, watchdog, wake-ups, Redlock).
//! - [`variants`]: one file per protection strategy, dispatched by an exhaustive `match`.
//! - [`metrics`]: Prometheus metrics of an instance.
//! - [`dashboard`]: the live page, its board (read from Redis), server-sent events, runs from the page.
//! - [`http`]: the axum router; thin handlers that parse, call the domain and map outcomes.
//! - [`server`]: `stocklock serve`: building and running one instance.
//! - [`client`]: the one typed client of a running stack's API (through nginx or to one instance), for `load`, `lab`, the dashboard's runs and the tests.
//! - [`load`]: `stocklock load`: the runs (its [`load::engine`] sends the requests), the [`load::verdict`] and the [`load::report`]; `bench`.
//! - [`lab`]: `stocklock lab`: every failure scenario against every variant ([`lab::scenario`]), judged from evidence ([`lab::judge`]), and the matrix.
//! - [`up`]: `stocklock up`: redis-server (or a 3-master cluster), Redlock's nodes, N instances and nginx as children.
//! - [`chaos`]: chaos mode: crash after SETNX, stop-the-world pauses, vanishing locks, the overlap witness.
//! - [`args`]: command-line values the commands' config types parse alike (durations, variant names, the generated token).
//! - [`cli`]: the command line; `load`, `bench` and `up` parse into their own config types.
//! - [`telemetry`]: tracing set-up.

pub mod args;
pub mod chaos;
pub mod cli;
pub mod client;
pub mod dashboard;
pub mod http;
pub mod knobs;
pub mod lab;
pub mod ledger;
pub mod load;
pub mod lock;
pub mod metrics;
pub mod sale;
pub mod section;
pub mod server;
pub mod store;
pub mod telemetry;
pub mod up;
pub mod variants;
pub mod wire;
