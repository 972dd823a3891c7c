//! Integration tests: one binary, real redis-server and nginx started on
//! free loopback ports by the tests themselves, stopped by pid.

mod bad_input;
mod bench;
mod bench_bare;
mod browser;
mod chaos;
mod cluster;
mod compare;
mod dashboard;
mod deps;
mod docker;
mod docs;
mod etcd;
mod examples;
mod failover;
mod helpers;
mod house;
mod instance;
mod lab;
mod lab_orders;
mod ledger;
mod lessons;
mod load;
mod lock;
mod lock_safety;
mod marks;
mod orders;
mod post_sale;
mod prometheus;
mod rate_limit;
mod redlock;
mod stack;
mod timeline;
mod up_minimal;
mod up_processes;
mod zookeeper;
