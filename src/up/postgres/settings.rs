//! What `up` sets in the PostgreSQL it starts, each on purpose, and why.
//! The same list is written into the cluster's `postgresql.conf` after
//! initdb (a file, which `ALTER SYSTEM` can outrank live), read back by a
//! test (`SHOW NAME`), and docs/stack.md renders it.

/// One setting: its name, its value, and why.
pub struct Setting {
    pub name: &'static str,
    pub value: &'static str,
    pub why: &'static str,
}

/// Every setting `up` gives its PostgreSQL.
pub const SETTINGS: [Setting; 5] = [
    Setting {
        name: "synchronous_commit",
        value: "on",
        why: "a sale the database answered is on disk first: a crash of PostgreSQL (the lab's \
              postgres-restart) never takes back a unit a buyer was told he bought. Off, a \
              commit answers before its WAL is flushed, and a crash may lose the last sales \
              answered",
    },
    Setting {
        name: "shared_buffers",
        value: "128MB",
        why: "the stock rows, the sales and the request ids of a class's SKUs fit many times \
              over; more would only take memory from the machine the stack shares",
    },
    Setting {
        name: "max_connections",
        value: "500",
        why: "each instance keeps a pool of 16 connections, and up runs up to 26 instances \
              (416), beside the order workers' and the lab's, bench's and reconcile's own",
    },
    Setting {
        name: "wal_level",
        value: "replica",
        why: "the default, kept: nothing replicates this database, but minimal would save \
              nothing on the row updates a sale makes (it only skips the WAL of bulk loads)",
    },
    Setting {
        name: "shared_preload_libraries",
        value: "pg_stat_statements",
        why: "each statement's calls and time, to read what a sale costs the database \
              (SELECT ... FROM pg_stat_statements, in the database stocklock)",
    },
];
