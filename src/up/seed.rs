//! The stock `up` (and `serve --seed-stock`) gives the lab's SKUs.

use anyhow::Context;

use crate::knobs::{DEFAULT_SKU, Sku};
use crate::ledger;
use crate::store::{Keys, Store};
use crate::variants::Variant;

/// Gives the SKUs the lab uses (`00001` and one per variant) their stock,
/// leaving any that already have some alone (an existing Redis keeps its
/// state). `lua-sharded`'s SKU is split into [`crate::knobs::DEFAULT_BUCKETS`].
/// With a PostgreSQL (`postgres_url`), the `pg-*` variants' SKUs are
/// stocked there too, its schema migrated first.
pub async fn seed_stock(
    store: &Store,
    postgres_url: Option<&str>,
    stock: i64,
) -> anyhow::Result<()> {
    if let Some(url) = postgres_url {
        let mut client = crate::orders::connect(url).await?;
        crate::orders::migrate(&mut client).await?;
        for variant in Variant::ALL.into_iter().filter(|v| v.stock_in_postgres()) {
            crate::pgstock::seed(&client, variant.name(), stock).await?;
        }
    }
    let mut conn = store.conn().await.context("cannot reach Redis")?;
    ledger::reset_sku(
        &mut conn,
        &Keys::new(&Sku::parse(DEFAULT_SKU)?),
        stock,
        0,
        true,
    )
    .await?;
    for variant in Variant::ALL {
        let sku = Sku::parse(variant.name())?;
        ledger::reset_sku(&mut conn, &Keys::new(&sku), stock, variant.buckets(), true).await?;
    }
    Ok(())
}

/// [`seed_stock`] in a task of its own, tried every second until it
/// succeeds (`serve --seed-stock`: Redis may not answer yet).
pub fn seed_stock_in_background(store: Store, postgres_url: Option<String>, stock: i64) {
    tokio::spawn(async move {
        loop {
            match seed_stock(&store, postgres_url.as_deref(), stock).await {
                Ok(()) => break,
                Err(err) => tracing::warn!("seeding stock: {err:#}; retrying"),
            }
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
    });
}
