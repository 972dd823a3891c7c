//! `stocklock reconcile`: the Redis ledger against PostgreSQL's orders, per
//! SKU, straight from the two stores (no instance in between). Exit 0 only
//! when every SKU matches, nothing is still on its way and no order names
//! an epoch the ledger lost (`LEDGER_LOST`).
//!
//! With `--stock`, the stock both stores keep (`redis-then-pg`): Redis's
//! stock and net sales against the database's, per SKU
//! ([`crate::pgstock::both`]); exit 0 only when they agree.

use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;

use crate::args::parse_duration;
use crate::knobs::Sku;
use crate::orders::reconcile::{Reconciliation, order_skus, reconcile};
use crate::orders::{self, Client};
use crate::store::{Conn, Store};

#[derive(Args, Debug, Clone)]
pub struct ReconcileArgs {
    /// The stack's Redis (`stocklock up` prints it).
    #[arg(
        long,
        default_value = "redis://127.0.0.1:6379",
        env = "STOCKLOCK_REDIS_URL",
        hide_env_values = true
    )]
    pub redis_url: String,
    /// The orders' PostgreSQL (`stocklock up` prints it).
    #[arg(long, env = "STOCKLOCK_POSTGRES_URL", hide_env_values = true)]
    pub postgres_url: String,
    /// Only these SKUs (repeat or comma-separate; default: every SKU whose
    /// sales became orders).
    #[arg(long, value_delimiter = ',')]
    pub sku: Vec<String>,
    /// How long to wait for messages still on their way to become orders
    /// before judging (0: judge at once).
    #[arg(long, default_value = "10s", value_parser = parse_wait)]
    pub wait: Duration,
    /// Print the reconciliations as JSON: [{sku, epoch, sold, ..., lost, phantom, ...,
    /// orphaned, ledger_lost}] (with --stock: [{sku, redis_remaining, redis_sold,
    /// redis_returned, pg_remaining, pg_sold, pg_oversold, agree}]).
    #[arg(long)]
    pub json: bool,
    /// Reconcile the stock both stores keep (redis-then-pg: Redis takes a unit
    /// first, the database decides the sale) instead of the orders: Redis's stock
    /// and net sales against the database's (default: every SKU sold from in both).
    #[arg(long)]
    pub stock: bool,
}

fn parse_wait(text: &str) -> Result<Duration, String> {
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    parse_duration(text)
}

/// Runs `stocklock reconcile`; `Ok(false)` when the books do not match.
pub async fn run(args: ReconcileArgs) -> anyhow::Result<bool> {
    let store = Store::open(&args.redis_url)
        .with_context(|| format!("bad Redis URL {}", orders::shown(&args.redis_url)))?;
    let mut conn = store.conn().await.context("cannot reach Redis")?;
    let db = orders::connect(&args.postgres_url).await?;
    if args.stock {
        return stock(&mut conn, &db, &args).await;
    }
    let skus = if args.sku.is_empty() {
        order_skus(&mut conn, &db).await?
    } else {
        args.sku
            .iter()
            .map(|s| Sku::parse(s).map(|s| s.as_str().to_owned()))
            .collect::<Result<Vec<_>, _>>()?
    };
    let deadline = Instant::now() + args.wait;
    let mut found = Vec::with_capacity(skus.len());
    for sku in &skus {
        found.push(settled(&mut conn, &db, sku, deadline).await?);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&found)?);
    } else if found.is_empty() {
        println!("no SKU has sold into orders yet (lua-stream, lua-then-queue)");
    } else {
        for r in &found {
            println!(
                "{:<20} {:>6} sold {:>6} returned {:>6} orders   {}",
                r.sku,
                r.sold,
                r.returned,
                r.pending_payment + r.paid + r.expired,
                r.verdict()
            );
        }
    }
    Ok(found.iter().all(Reconciliation::clean))
}

/// `stocklock reconcile --stock`: `Ok(false)` when any SKU's two books
/// disagree.
async fn stock(conn: &mut Conn, db: &Client, args: &ReconcileArgs) -> anyhow::Result<bool> {
    use crate::pgstock::both;
    let skus = if args.sku.is_empty() {
        both::both_skus(conn, db).await?
    } else {
        args.sku
            .iter()
            .map(|s| Sku::parse(s))
            .collect::<Result<Vec<_>, _>>()?
    };
    let mut found = Vec::with_capacity(skus.len());
    for sku in &skus {
        match both::both(conn, db, sku).await? {
            Some(books) => found.push(books),
            None => anyhow::bail!("{sku}: the database never stocked this SKU"),
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&found)?);
    } else if found.is_empty() {
        println!("no SKU has sold from both stores yet (redis-then-pg)");
    } else {
        println!(
            "{:<20} {:>22} {:>22}",
            "sku", "redis left/sold/back", "postgres left/sold"
        );
        for b in &found {
            let redis = format!(
                "{}/{}/{}",
                b.redis_remaining, b.redis_sold, b.redis_returned
            );
            let pg = format!("{}/{}", b.pg_remaining, b.pg_sold);
            println!("{:<20} {redis:>22} {pg:>22}   {}", b.sku, b.verdict());
        }
    }
    Ok(found.iter().all(|b| b.agree))
}

/// The reconciliation of `sku` once nothing is on its way, or at `deadline`.
async fn settled(
    conn: &mut Conn,
    db: &Client,
    sku: &str,
    deadline: Instant,
) -> anyhow::Result<Reconciliation> {
    loop {
        let r = reconcile(conn, db, sku).await?;
        if r.in_flight == 0 || Instant::now() >= deadline {
            return Ok(r);
        }
        // The workers' pace, not an event we could wait on: look again soon.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
