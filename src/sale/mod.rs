//! One sale, from a parsed request to its answer: the domain's way in.
//!
//! [`Seller::sell`] claims the request id (before any lock: a retry is
//! answered from its record whoever holds the lock, and told `in_progress`
//! while another attempt holds the claim), builds the request's context,
//! runs the variant's protection in a task of its own (a client that hangs
//! up must not cancel a section halfway, holding a lock), counts the
//! answers no script counted, writes the overlap witness's record, and
//! returns the [`Sale`].
//! The HTTP layer only parses the request and maps the sale to a status.
//!
//! A buyer of a SKU this instance knows is sold out is answered from its
//! sold-out mark ([`crate::marks`]) before any of that, without Redis; such
//! answers (and the `unknown` ones given while Redis was away) are counted
//! into the ledger's share of this instance every second, and at once when
//! someone reads a state ([`Seller::flush_everywhere`]).
//!
//! Once a sale was written, nothing after it can take it back: a failed
//! release, publish or witness write is logged (a lease runs out, a
//! waiter re-checks), never turned into an error the buyer would read as
//! "nothing happened".

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tracing::Instrument;

use crate::chaos::Chaos;
use crate::chaos::mutant::{self, Mutant};
use crate::gate::{Gate, Gates};
use crate::knobs::{DeductRequest, Sku};
use crate::ledger::{self, CLAIM_GRACE, Claimed};
use crate::lock::{Hook, LockStores, Wakeups};
use crate::marks::SoldOutMarks;
use crate::section::{Answer, Ctx, Outcome};
use crate::store::Store;
use crate::timeline;
use crate::variants::{Counted, Protections, Variant};

mod answer;
mod known;
mod local;

pub use answer::{NO_POSTGRES, Sale, SaleError};
use known::KnownSku;
use local::Local;
pub use local::{CHANNELS, FLUSH_CHANNEL, FLUSHED_CHANNEL};

/// Everything one instance sells with. Shared by every request.
pub struct Seller {
    store: Store,
    /// This instance's name, in owner tokens, the ledger and every answer.
    instance: String,
    protections: Protections,
    wakeups: Wakeups,
    stores: LockStores,
    chaos: Chaos,
    /// `/deductStock` requests taken, for the heartbeat.
    requests: Arc<AtomicU64>,
    /// Answers given without a write to Redis (`unknown` ones while Redis
    /// was not answering, sold-out ones from a mark), by SKU, not yet added
    /// to their ledgers ([`Seller::flush_local`]).
    local: Mutex<HashMap<Sku, Local>>,
    marks: SoldOutMarks,
    /// How long request ids are remembered.
    request_ttl: Duration,
    request_ids_per_sku: u64,
    /// The SKUs asked for lately ([`known::SKUS_REMEMBERED`] at most, forgotten
    /// all at once when full): their keys, made once, and whether they were
    /// seen stocked.
    skus: Mutex<HashMap<Sku, Arc<KnownSku>>>,
    flush_rounds: local::FlushRounds,
}

impl Seller {
    pub fn new(
        store: Store,
        instance: String,
        chaos: Chaos,
        wakeups: Wakeups,
        stores: LockStores,
    ) -> Self {
        Self {
            store,
            instance,
            protections: Protections::new(),
            wakeups,
            stores,
            chaos,
            requests: Arc::default(),
            local: Mutex::default(),
            marks: SoldOutMarks::new(crate::marks::DEFAULT_MARK_TTL),
            skus: Mutex::default(),
            flush_rounds: Default::default(),
            request_ttl: ledger::DEFAULT_REQUEST_TTL,
            request_ids_per_sku: ledger::DEFAULT_REQUEST_IDS_PER_SKU,
        }
    }

    /// The PostgreSQL of the `pg-*` variants, if this instance has one.
    pub fn postgres(&self) -> Option<&crate::pgstock::Pool> {
        self.stores.postgres.as_ref()
    }

    /// The same seller, remembering request ids for `ttl`.
    pub fn with_request_ttl(mut self, ttl: Duration, ids_per_sku: u64) -> Self {
        self.request_ttl = ttl;
        self.request_ids_per_sku = ids_per_sku;
        self
    }

    /// The same seller, `lua-batch` sending up to `max` buyers of a SKU per call.
    pub fn with_batch_max(mut self, max: usize) -> Self {
        self.protections = Protections::with_batch_max(max);
        self
    }

    /// The same seller, its sold-out marks living `ttl` (zero: no marks).
    pub fn with_mark_ttl(mut self, ttl: Duration) -> Self {
        self.marks = SoldOutMarks::new(ttl);
        self
    }

    pub fn marks(&self) -> &SoldOutMarks {
        &self.marks
    }

    /// The count of `/deductStock` requests taken, for the heartbeat.
    pub fn requests(&self) -> Arc<AtomicU64> {
        self.requests.clone()
    }

    pub fn chaos(&self) -> &Chaos {
        &self.chaos
    }

    /// The lock stores beside the main Redis this instance was given.
    pub fn stores(&self) -> &LockStores {
        &self.stores
    }

    pub fn wakeups(&self) -> &Wakeups {
        &self.wakeups
    }

    /// Sells once through `variant`.
    pub async fn sell(
        self: &Arc<Self>,
        variant: Variant,
        request: DeductRequest,
    ) -> Result<Sale, SaleError> {
        let about = variant.about();
        if let Some(missing) = variant.missing_store(&self.stores) {
            return Err(SaleError::NotConfigured(missing));
        }
        if about.facts.stock_in_postgres && self.stores.postgres.is_none() {
            return Err(SaleError::NotConfigured(NO_POSTGRES));
        }
        self.requests.fetch_add(1, Ordering::Relaxed);
        // A request id's answer is recorded for its retries: only Redis
        // can give it. Anyone else may be refused from the mark (a stock
        // split over buckets is marked apart from the plain one).
        let sharded = about.facts.buckets > 0;
        // A scheduled request goes through its gates: never from the mark.
        let mark = request.request_id.is_none()
            && request.schedule.is_none()
            && request.knobs.sold_out_mark.unwrap_or(about.facts.scripted);
        if mark && let Some(remaining) = self.marks.check(&request.sku, sharded) {
            self.count_local(&request.sku, |local| {
                local.served += 1;
                local.mark_refusals += 1;
            });
            crate::metrics::answered(variant.name(), "sold_out");
            return Ok(Sale {
                variant,
                sku: request.sku,
                request_id: None,
                outcome: Outcome::SoldOut { remaining },
                replayed: false,
                from_mark: true,
                order_token: None,
            });
        }
        let generation = self.marks.generation();
        let span = tracing::debug_span!("deduct", variant = variant.name());
        let sale = if about.facts.scripted {
            // One script, sent or not: a client that hangs up meanwhile
            // leaves nothing half done (the script records itself).
            self.run(variant, request).instrument(span).await
        } else {
            // Its own task: a client that hangs up must not cancel the
            // section between its write and its answer, or while it holds
            // a lock.
            let seller = self.clone();
            tokio::spawn(async move { seller.run(variant, request).await }.instrument(span))
                .await
                .map_err(|err| SaleError::Panicked(err.to_string()))?
        };
        if mark
            && let Ok(Sale {
                outcome: Outcome::SoldOut { remaining },
                sku,
                replayed: false,
                ..
            }) = &sale
        {
            self.marks.set(sku, sharded, *remaining, generation);
        }
        let kind = match &sale {
            Ok(sale) => sale.outcome.kind(),
            Err(_) => "unavailable",
        };
        crate::metrics::answered(variant.name(), kind);
        if let Ok(Sale {
            outcome: Outcome::Busy(reason),
            ..
        }) = &sale
        {
            crate::metrics::busy(variant.name(), reason.as_str());
        }
        sale
    }

    async fn run(&self, variant: Variant, request: DeductRequest) -> Result<Sale, SaleError> {
        let about = variant.about();
        let known = self.known(&request.sku);
        let keys = &known.keys;
        let mut conn = self.store.conn().await?;
        let sale = |answer: Answer| Sale {
            variant,
            sku: request.sku.clone(),
            request_id: request.request_id.clone(),
            outcome: answer.outcome,
            replayed: answer.replayed,
            from_mark: false,
            order_token: answer.order_token,
        };
        // The scripted variants check the SKU and the request id inside their
        // one script, writing nothing for a SKU never stocked.
        // The database's variants check the SKU and the id in PostgreSQL.
        let own_ids = about.facts.own_ids();
        if !own_ids && !known.stocked(&mut conn).await? {
            return Ok(sale(Answer::recorded(Outcome::NotStocked, false)));
        }
        let claim = match request.request_id.as_deref() {
            // A live mutant (debug builds only) claims nothing.
            Some(_) if mutant::on(Mutant::NoClaim) => None,
            Some(id) if !own_ids => {
                // As long as the attempt may legitimately take: its wait
                // for the lock, its work, and the grace.
                let hold = variant.wait(&request.knobs) + request.knobs.work + CLAIM_GRACE;
                let ids = (self.request_ttl, self.request_ids_per_sku);
                match ledger::claim(&mut conn, keys, &self.instance, id, hold, ids).await? {
                    Claimed::Yes(claim) => Some(claim),
                    Claimed::Decided(answer) => return Ok(sale(answer)),
                }
            }
            _ => None,
        };
        // A request of a schedule stops at its gates (chaos mode only: the
        // HTTP layer refused it otherwise).
        let gates = request
            .schedule
            .as_ref()
            .and_then(|schedule| Some((schedule, Gates::of(&self.chaos, &self.store)?)));
        let schedule = gates.as_ref().map(|(schedule, _)| *schedule);
        let gate = match gates {
            Some((schedule, gates)) => {
                let client = gates.client().await?;
                Some(Gate::new(
                    client,
                    schedule.clone(),
                    &self.instance,
                    &keys.tag,
                ))
            }
            None => None,
        };
        let hook = match &gate {
            Some(gate) => Hook::new(gate.clone()),
            None => Hook::none(),
        };
        let mut ctx = Ctx {
            conn,
            keys,
            knobs: &request.knobs,
            instance: &self.instance,
            wakeups: &self.wakeups,
            stores: &self.stores,
            request_id: request.request_id.as_deref(),
            request_ttl: self.request_ttl,
            request_ids_per_sku: self.request_ids_per_sku,
            claim,
            chaos: &self.chaos,
            hook,
            gate,
            schedule,
        };
        let answer = match self.protections.deduct(variant, &mut ctx).await {
            Ok(answer) => answer,
            Err(err) => {
                // Nothing was written: free the id for a retry at once
                // rather than at its deadline (if Redis lets us).
                if let Some(claim) = &ctx.claim {
                    let _ = ledger::free_claim(&mut ctx.conn, keys, claim).await;
                }
                return Err(err.into());
            }
        };
        if !answer.recorded {
            // Decided outside any script (the lock was not had): count it,
            // and free the id for a retry.
            crate::section::record_unrecorded(&mut ctx, &answer).await;
        }
        let mut answer = answer;
        let unknown = answer.outcome == Outcome::Unknown;
        // The script counts the answers of requests with an id; the others
        // are counted here, one Redis call fewer per sale.
        // The database's variants count nothing in Redis: every answer here.
        let served = match about.facts.counted() {
            Counted::InRedis => false,
            Counted::ScriptWithIds => {
                request.request_id.is_none()
                    && matches!(
                        answer.outcome,
                        Outcome::Sold { .. } | Outcome::SoldOut { .. } | Outcome::Unknown
                    )
            }
            Counted::ByInstance => true,
        };
        let section = answer.witnessed.take().map(|mut section| {
            // The variant has let go of its lock by now (unless it said
            // when: the database's locks go with their commit).
            if !section.atomic && section.release_ns.is_none() {
                section.release_ns = Some(timeline::now_ns());
            }
            section
        });
        // The database's variants record no answer in Redis as they give it.
        let (replay, busy) = match about.facts.counted() == Counted::ByInstance {
            true => (answer.replayed, matches!(answer.outcome, Outcome::Busy(_))),
            false => (false, false),
        };
        if unknown || served || section.is_some() {
            // One lock of the counts for all three.
            self.count_local(&request.sku, |local| {
                local.unknown += u64::from(unknown);
                local.served += u64::from(served);
                local.replays += u64::from(replay);
                local.busy += u64::from(busy);
                if let Some(section) = section {
                    local.keep(*section);
                }
            });
        }
        Ok(sale(answer))
    }
}
