//! The stock PostgreSQL protects (`stocklock::pgstock`), on a real server:
//! every protocol sells each unit once under a race, and at the moment
//! each one can break (a second buyer reading while the first is between
//! its read and its write) the protected ones hold and the unprotected
//! section loses an update, which the books show; request ids answer once;
//! a commit whose answer a relay drops is `unknown`, and the id's retry
//! learns the sale.
//!
//! Without PostgreSQL the tests say SKIPPED (and fail under CI=true).
//!
//! This file: the clients, the buyer and the protocols the tests share;
//! `race.rs`: the race; `gap.rs`: a second buyer in the first one's gap;
//! `ids.rs`: request ids; `lost_commit.rs`: a commit whose answer is lost;
//! `batch.rs`: `pg-batch`'s transaction against `pg-update` one buyer at a time.

use std::time::Duration;

use stocklock::lock::Hook;
use stocklock::orders::{self, Client};
use stocklock::pgstock::{self, Books, Buyer, PgAnswer, sale};
use stocklock::up::postgres::PostgresServer;

mod batch;
mod gap;
mod ids;
mod lost_commit;
mod race;
mod settings;
mod silent;

const BOUND: Duration = Duration::from_secs(120);

async fn client(server: &PostgresServer) -> Client {
    orders::connect(&server.url()).await.unwrap()
}

/// A client of a fresh server, its schema migrated.
async fn migrated(server: &PostgresServer) -> Client {
    let mut client = client(server).await;
    orders::migrate(&mut client).await.unwrap();
    client
}

fn buyer<'a>(sku: &'a str, request_id: Option<&'a str>) -> Buyer<'a> {
    Buyer {
        sku,
        request_id,
        instance: "t",
        work: Duration::ZERO,
        wait: Duration::from_secs(10),
        lease: stocklock::variants::DEFAULT_LEASE,
    }
}

async fn books(client: &Client, sku: &str) -> Books {
    pgstock::books(client, sku).await.unwrap().expect("stocked")
}

/// The protocols, by name.
#[derive(Clone, Copy, Debug)]
enum Protocol {
    Update,
    ForUpdate,
    Advisory,
    Optimistic,
    Unprotected,
}

async fn sell(p: Protocol, c: &mut Client, b: &Buyer<'_>, hook: &Hook) -> PgAnswer {
    match p {
        Protocol::Update => sale::update(&*c, b, hook).await,
        Protocol::ForUpdate => sale::for_update(c, b, hook).await,
        Protocol::Advisory => sale::advisory(c, b, hook).await,
        Protocol::Optimistic => sale::optimistic(&*c, b, hook, 100).await,
        Protocol::Unprotected => sale::unprotected(c, b, hook).await,
    }
    .unwrap_or_else(|err| panic!("{p:?}: {err}"))
}
