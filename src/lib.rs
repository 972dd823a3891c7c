//! # stocklock
//!
//! A teaching lab and a reference implementation for flash-sale stock
//! protection. Several HTTP instances behind nginx share one Redis; each
//! instance sells the same stock through `/deductStock/{variant}`, where the
//! variant decides what protects the deliberately non-atomic critical section.
//!
//! # Layout, in dependency order
//!
//! Dependencies point one way: each module imports only modules listed
//! before it, so no two import each other, and the submodules of one module
//! import each other without a circle. `tests/api/house/` reads this list
//! and checks every `crate::`, `super::` and `self::` path under `src/`
//! against it.
//!
//! ## Below everything
//!
//! 1. [`os`]: process and signal helpers (signals, Ctrl-C/SIGTERM, finding programs, free ports).
//! 2. [`telemetry`]: tracing set-up.
//!
//! ## The domain (it never imports transport or tools)
//!
//! 3. [`knobs`]: parsing of user input (SKU, `work_ms`, `lease_ms`, `wait_ms`, a reset's stock and buckets) into domain types, beside the limits that bound it.
//! 4. [`wire`]: the JSON shapes on the wire, shared by server, dashboard and load generator.
//! 5. [`metrics`]: Prometheus metrics of an instance (each instance is its own scrape target), and the names a dashboard may query.
//! 6. [`store`]: the Redis handle (one server or a Redis Cluster) and the key layout of one SKU (all keys share a hash tag).
//! 7. [`timeline`]: every critical section and chaos event of a SKU on one clock, kept in a capped list, and the overlaps (two holders at once).
//! 8. [`chaos`]: chaos mode: crash after SETNX, stop-the-world pauses, vanishing locks, Redis paused or restarted, the overlap witness; a debug build's live mutants.
//! 9. [`outcome`]: what an attempt ends as (sold, sold out, busy and why, unknown), below both the section and the ledger.
//! 10. [`ledger`]: the truth. A sale is recorded by the same script that writes the stock, in every variant.
//! 11. [`lock`]: the distributed lock library, the workspace's own crate `stocklock-lock` (lease lock, reentrant lock, watchdog, wake-ups, Redlock and its nodes; the etcd lock through its JSON gateway; a ZooKeeper lock), re-exported, and the lock stores an instance was given.
//! 12. [`gate`]: schedules of the real code: a scheduled request stops at named points (gates) of the section and its lock until its run's scheduler, through Redis, lets it go.
//! 13. [`orders`]: orders in PostgreSQL: the connection and the schema's migrations (embedded SQL files), run by each instance at start.
//! 14. [`pgstock`]: the stock the database itself protects: one row per SKU, its sales and request ids in tables beside it, and the protocols that sell from it (a conditional UPDATE, a row lock, a version, an advisory lock).
//! 15. [`marks`]: sold-out marks: an instance answers "sold out" itself once Redis said so, until a reset is announced or a short TTL passes.
//! 16. [`section`]: the critical section every variant protects, written once (offering the [`outcome`] types to the variants).
//! 17. [`variants`]: one file per protection strategy, dispatched by an exhaustive `match`; the lab's scenarios and each variant's claim in them.
//! 18. [`sale`]: one sale from a parsed request to its answer (the domain's way in for the HTTP layer).
//! 19. [`classroom`]: classroom mode: seats a teacher's class joins by a link, each a signed cookie with runs of its own, rate-limited, and the teacher's board of them.
//!
//! ## The tools
//!
//! 20. [`history`]: `stocklock history check`, the independent judge: a run's history (what its clients were told, recorded by them) decided against one sequential spec of a stock, knowing nothing of variants, claims or models; and the recorder the clients write through.
//! 21. [`args`]: command-line values the commands' config types parse alike (durations, variant names, the generated token).
//! 22. [`reconcile`]: `stocklock reconcile`: the Redis ledger against PostgreSQL's orders, per SKU, straight from the two stores.
//! 23. [`client`]: the one typed client of a running stack's API (through nginx or to one instance), for `load`, `lab`, the dashboard's runs and the tests.
//! 24. [`load`]: `stocklock load`: the runs (its [`load::engine`] sends the requests), the [`load::verdict`] and the [`load::report`]; `bench`.
//! 25. [`up`]: `stocklock up`: redis-server (or a 3-master cluster), Redlock's nodes, an etcd cluster, ZooKeeper servers, PostgreSQL, N instances and nginx as children.
//! 26. [`check`]: `stocklock check`: each variant's protocol model-checked (the `stateright` crate) in the lab's scenarios, with the shortest counterexample of each failure.
//! 27. [`judge`]: pure functions from a run's evidence to what a cell observed (crowd, duel, recovery, outage, doubt, orders, the database), and the history checker's second opinion beside them; shared by `lab`, `replay` and the dashboard.
//! 28. [`harness`]: what every command that plays on a stack shares: the stack it starts or is pointed at (`--target`), its children, a Redis paused on purpose, a failover.
//! 29. [`lab`]: `stocklock lab`: every failure scenario against every variant ([`lab::scenario`]), judged from evidence, and the matrix. Below the dashboard, which starts runs and scenarios.
//! 30. [`replay`]: `stocklock replay`: a checker's counterexample played on the real code, at its gates, fault by fault.
//! 31. [`explore`]: `stocklock explore`: schedules of the real code chosen at its gates (random, PCT) until one breaks a property; the sessions step mode drives.
//! 32. [`soak`]: `stocklock soak`: the nemesis: every fault kind in turn for as long as asked, each round judged by the ledger and the history checker.
//! 33. [`step`]: step mode: a learner (or "show me the shortest way") choosing each step of one explored session.
//! 34. [`lessons`]: the lesson path (article 001's story), each step one lab cell run on the live stack.
//! 35. [`compare`]: `stocklock compare`: article 000's lock-store table (Redis, Redlock, etcd, ZooKeeper), measured in one run.
//!
//! ## HTTP
//!
//! 36. [`web`]: what the two HTTP surfaces share, below both: `AppError` (every failure as JSON) and the admin token check.
//! 37. [`dashboard`]: its own router: the live page, its board (read from Redis), server-sent events, runs and scenarios from the page, the checker's verdict on one cell.
//! 38. [`http`]: the instance's router (`app`, merging the dashboard's) and state; thin handlers per concern (deduct, admin, info) that parse, call the domain and map outcomes.
//! 39. [`server`]: `stocklock serve`: building and running one instance.
//!
//! ## The command line
//!
//! 40. [`cli`]: the command line; `load`, `bench` and `up` parse into their own config types.

pub mod args;
pub mod chaos;
pub mod check;
pub mod classroom;
pub mod cli;
pub mod client;
pub mod compare;
pub mod dashboard;
pub mod explore;
pub mod gate;
pub mod harness;
pub mod history;
pub mod http;
pub mod judge;
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
pub mod pgstock;
pub mod reconcile;
pub mod replay;
pub mod sale;
pub mod section;
pub mod server;
pub mod soak;
pub mod step;
pub mod store;
pub mod telemetry;
pub mod timeline;
pub mod up;
pub mod variants;
pub mod web;
pub mod wire;
