//! The failure modes of the articles, made deterministic by the fault
//! knobs: a lease shorter than the work, a crash between SETNX and EXPIRE, a
//! stop-the-world pause longer than the lease, a retried request.
//!
//! `lease.rs`: the lease's three breaks; `retries.rs`: a retried request
//! sells once; `mode.rs`: what chaos mode allows; `up_redis.rs`: chaos on
//! the Redis that `up` owns.

mod lease;
mod mode;
mod retries;
mod up_redis;
