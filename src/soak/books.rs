//! The order SKUs' books, reconciled with PostgreSQL once their messages
//! have become orders; and the keys of a judged SKU let go, so that Redis
//! holds what the SKUs still being sold (or kept as evidence) need, however
//! long the soak runs.

use std::collections::HashMap;
use std::sync::Mutex as StdMutex;
use std::time::{Duration, Instant};

use super::evidence::Evidence;
use crate::knobs::Sku;
use crate::orders::Client;
use crate::store::{Keys, Store};
use crate::variants::{Behaviour, Variant};
use crate::wire::{Reconciliation, SoakFault, SoakOrders};

/// An order variant's round, reconciled at the end.
pub(super) struct OrderSku {
    pub(super) variant: Variant,
    pub(super) sku: String,
    pub(super) from_ms: u64,
    /// What its round kept, for a violation of its books.
    pub(super) evidence: Evidence,
}

/// How long the end waits for the last messages to become orders.
const LAST_ORDERS_WITHIN: Duration = Duration::from_secs(30);

/// An order SKU reconciled: its books' verdict, and its round's evidence.
pub(super) struct Settled {
    pub(super) orders: SoakOrders,
    pub(super) evidence: Evidence,
}

pub struct Books {
    url: Option<String>,
    /// Connected on demand, again after PostgreSQL was killed.
    db: tokio::sync::Mutex<Option<Client>>,
    pub(super) store: Store,
    pub(super) pending: StdMutex<Vec<OrderSku>>,
    persist: bool,
}

impl Books {
    pub fn new(url: Option<String>, store: Store, persist: bool) -> Self {
        Books {
            url,
            db: Default::default(),
            store,
            pending: StdMutex::new(Vec::new()),
            persist,
        }
    }

    /// Reconciles the pending order SKUs whose messages have all become
    /// orders (at the end, `last`: every one, waiting for them a while),
    /// each judged by its variant's claims; a SKU whose books match is
    /// let go. What was settled now.
    pub(super) async fn settle(&self, faults: &[SoakFault], last: bool) -> Vec<Settled> {
        let pending = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()));
        let deadline = Instant::now() + LAST_ORDERS_WITHIN;
        let mut settled = Vec::new();
        let mut waiting = Vec::new();
        for order in pending {
            let books = loop {
                match self.reconcile(&order.sku).await {
                    Ok(r) if settling(&r) && last && Instant::now() < deadline => {
                        // The workers' pace: no event to wait on.
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    other => break other,
                }
            };
            let (verdict, allowed) = match books {
                Ok(r) if settling(&r) && !last => {
                    waiting.push(order);
                    continue;
                }
                Err(_) if !last => {
                    waiting.push(order);
                    continue;
                }
                Ok(r) if r.clean() => ("MATCH".to_owned(), true),
                Ok(r) => {
                    let allowed = self.allows(&order, &r, faults);
                    (r.verdict(), allowed)
                }
                Err(err) => (format!("cannot reconcile: {err:#}"), false),
            };
            if verdict == "MATCH" {
                forget(&self.store, &order.sku, order.variant, true).await;
            }
            settled.push(Settled {
                orders: SoakOrders {
                    variant: order.variant.name().to_owned(),
                    sku: order.sku,
                    verdict,
                    allowed,
                },
                evidence: order.evidence,
            });
        }
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(waiting);
        settled
    }

    /// Whether what the books show is what the variant claims for the
    /// faults that struck the SKU: units lost where it claims to lose
    /// them, a lost ledger only where Redis lost its data.
    fn allows(&self, order: &OrderSku, r: &Reconciliation, faults: &[SoakFault]) -> bool {
        let from_s = order.from_ms as f64 / 1e3;
        let struck = super::faults::struck(faults, &order.sku, from_s, f64::MAX);
        let may = super::faults::allowed(order.variant, &struck, self.persist);
        let data_lost = !self.persist && struck.iter().any(|f| f.kind == "restart-redis");
        r.phantom.is_empty()
            && r.ordered_twice.is_empty()
            && r.in_flight == 0
            && r.stock_drift == 0
            && (r.lost.is_empty() || may.contains(&Behaviour::LosesUnits))
            && (!r.ledger_lost || data_lost)
    }

    /// When each sale of `sku` whose reservation expired gave its unit
    /// back, by the database's clock (µs since the Unix epoch): after its
    /// expiry committed (`expired_at`), and before the pass recorded it
    /// (`given_back_at`; none yet while no pass has). Sale → window.
    pub async fn given_back_between(
        &self,
        sku: &str,
    ) -> anyhow::Result<HashMap<i64, (i64, Option<i64>)>> {
        let mut db = self.connected().await?;
        let client = db
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("no connection"))?;
        let rows = client
            .query(
                "SELECT sale, (extract(epoch FROM expired_at) * 1e6)::int8,
                        (extract(epoch FROM given_back_at) * 1e6)::int8
                 FROM orders WHERE sku = $1 AND expired_at IS NOT NULL",
                &[&sku],
            )
            .await;
        let rows = match rows {
            Ok(rows) => rows,
            Err(err) => {
                *db = None;
                return Err(err.into());
            }
        };
        rows.iter()
            .map(|row| Ok((row.try_get(0)?, (row.try_get(1)?, row.try_get(2)?))))
            .collect()
    }

    /// The database's connection, made (again, once it closed) if need
    /// be; the caller drops it (sets `None`) when a query on it failed.
    async fn connected(&self) -> anyhow::Result<tokio::sync::MutexGuard<'_, Option<Client>>> {
        let Some(url) = &self.url else {
            anyhow::bail!("no PostgreSQL in this stack");
        };
        let mut db = self.db.lock().await;
        if db.as_ref().is_none_or(|c| c.is_closed()) {
            *db = Some(crate::orders::connect(url).await?);
        }
        Ok(db)
    }

    async fn reconcile(&self, sku: &str) -> anyhow::Result<Reconciliation> {
        let mut db = self.connected().await?;
        let mut conn = self.store.conn().await?;
        let client = db
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("no connection"))?;
        let found = crate::orders::reconcile::reconcile(&mut conn, client, sku).await;
        if found.is_err() {
            *db = None;
        }
        found
    }
}

/// Books still on their way: messages not yet orders, or reservations
/// expired whose units the next expiry pass gives back (an expired order's
/// unit still counts as sold in the ledger until then).
fn settling(r: &Reconciliation) -> bool {
    r.in_flight > 0 || !r.unreturned.is_empty()
}

/// The units of `sku` given back to its stock so far (expired
/// reservations), as Redis recorded them with the stock they went back to
/// (`give_back.lua`'s `returns`: sale → unit), read again while Redis
/// cannot answer for up to 2 min. `None` if it never answered.
pub async fn returned_units(store: &Store, sku: &str) -> Option<Vec<(i64, i64)>> {
    let keys = Keys::new(&Sku::parse(sku).ok()?);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let read = async {
            let mut conn = store.conn().await.ok()?;
            redis::cmd("HGETALL")
                .arg(&keys.returns)
                .query_async::<Vec<(i64, i64)>>(&mut conn)
                .await
                .ok()
        };
        match read.await {
            None if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            read => return read,
        }
    }
}

/// Lets a judged SKU's keys go: all of them, or (`keep_books`, an order
/// SKU) all but what reconciling it again needs (its ledger, units,
/// epochs, stream and returns).
pub(super) async fn forget(store: &Store, sku: &str, variant: Variant, keep_books: bool) {
    let Ok(parsed) = Sku::parse(sku) else { return };
    let keys = Keys::new(&parsed);
    let mut all = vec![keys.clone()];
    all.extend((0..variant.buckets()).map(|b| keys.bucket(b)));
    let mut names = Vec::new();
    for k in all {
        names.extend([
            k.served,
            k.lock,
            k.requests,
            k.request_times,
            k.fence,
            k.sections,
        ]);
        if !keep_books {
            names.extend([
                k.stock,
                k.ledger,
                k.units,
                k.orders,
                k.returns,
                k.returned_units,
                k.epochs,
            ]);
        }
    }
    if let Ok(mut conn) = store.conn().await {
        let _: Result<i64, _> = redis::cmd("DEL").arg(&names).query_async(&mut conn).await;
    }
}
