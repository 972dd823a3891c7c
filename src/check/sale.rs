//! The model's start and its choices: the world before the first step,
//! the lab's reset, and which actions may come next (and what each does,
//! through [`super::steps`], [`super::faults`] and [`super::pipeline`]).

use super::model::{Action, At, Buyer, Node, Outage, Pc, Request, Sale, World};
use super::order::Pipeline;

impl Sale {
    pub(super) fn process_of(&self, buyer: u8) -> usize {
        // The database's lock is one for every process.
        if self.bounds.one_process || self.protocol.database_lock() {
            0
        } else {
            usize::from(buyer)
        }
    }

    /// Whether request ids are claimed and checked (every buyer retrying
    /// one) by the Redis claim. The database's protocols take no claim:
    /// their id's record and its unique key do the work.
    pub(super) fn claims_ids(&self) -> bool {
        self.bounds.one_request && !self.mutation.no_request_claim && !self.protocol.database
    }

    /// Whether each buyer has a request id of its own, recorded by the
    /// database's commit that decides it (and so asked again when an
    /// attempt dies with the database, or its answer does).
    pub(super) fn ids_in_commits(&self) -> bool {
        self.bounds.db_crashes > 0 || self.bounds.lost_answers > 0
    }

    /// Redlock's majority: more than half of all its nodes, up or not.
    pub(super) fn majority(&self) -> u8 {
        self.bounds.nodes / 2 + 1
    }

    /// A buyer's clock: the last one runs `skew` ahead.
    pub(super) fn clock(&self, world: &World, buyer: u8) -> u8 {
        if buyer + 1 == self.bounds.buyers {
            world.now + self.bounds.skew
        } else {
            world.now
        }
    }

    pub fn initial(&self) -> World {
        let b = self.bounds;
        let idle = Buyer {
            pc: Pc::start(self),
            read: 0,
            work_until: 0,
            token: 0,
            renewed: 0,
            started: 0,
            read_epoch: 0,
            seen_value: 0,
            lost: false,
            crashed: false,
            frozen_until: None,
            holds_mutex: false,
            asked: 0,
            votes: 0,
            queued: false,
            tries: 0,
        };
        let mut w = World {
            now: 0,
            stock: b.stock,
            sold: vec![0; usize::from(b.stock)],
            lock: None,
            fence: 0,
            seen: 0,
            mutexes: vec![None; usize::from(b.buyers)],
            buyers: vec![idle; usize::from(b.buyers)],
            epoch: 0,
            holder_crash: None,
            freed: false,
            sold_while_down: false,
            lates: 0,
            slow: 0,
            crashes: 0,
            pauses: 0,
            vanishes: 0,
            freed_anothers: false,
            nodes: (0..b.nodes)
                .map(|k| Node {
                    up: k < b.nodes - b.nodes_down,
                    lock: None,
                })
                .collect(),
            restarts: 0,
            replica: None,
            replication_held: false,
            failovers: 0,
            request: Request::None,
            redis: Outage::Up,
            outages: 0,
            cutoffs: 0,
            db_crashes: 0,
            crash_struck: false,
            sold_since_crash: false,
            sold_after_faults: false,
            answers_lost: 0,
            answered: 0,
            script_sales: vec![0; usize::from(b.buyers)],
            returned: 0,
            pipeline: Pipeline::default(),
            redis_stock: b.stock,
            told_sold_out: false,
        };
        // The replica starts in step with its master: a failover before
        // any write replicated restores the state it started in.
        self.replicate(&mut w);
        w
    }

    /// The lab's reset of the SKU after Redis came back empty: full stock,
    /// no lock, no fence, no record; the sales of the lost history are no
    /// longer the ledger's (they stay the pipeline's).
    pub(super) fn reset(&self, w: &mut World) {
        w.stock = self.bounds.stock;
        w.epoch += 1;
        w.sold.fill(0);
        w.lock = None;
        w.fence = 0;
        w.seen = 0;
        w.request = Request::None;
        w.answered = 0;
        w.script_sales.fill(0);
        w.returned = 0;
    }

    pub fn actions(&self, w: &World, actions: &mut Vec<Action>) {
        for (n, buyer) in w.buyers.iter().enumerate() {
            let n = n as u8;
            // Its step, if its guard lets it ([`Sale::next`] tells).
            if buyer.live() && !buyer.pc.is_done() {
                actions.push(Action::Step(n));
            }
        }
        self.fault_actions(w, actions);
        if self.time_may_pass(w) {
            actions.push(Action::Tick);
            // A tick on which one holder's renewal comes late.
            if self.protocol.watchdog() && w.lates < self.bounds.late_renewals {
                for (n, buyer) in w.buyers.iter().enumerate() {
                    if buyer.live() && self.holds_lock(w, n as u8) {
                        actions.push(Action::LateTick(n as u8));
                    }
                }
            }
        }
    }

    pub fn next(&self, w: &World, action: Action) -> Option<World> {
        let mut w = w.clone();
        match action {
            Action::Step(n) => self.step(&mut w, n)?,
            Action::Tick => {
                if self.only_slow_votes(&w) {
                    w.slow += 1;
                }
                self.tick(&mut w, None)
            }
            Action::LateTick(n) => {
                w.lates += 1;
                self.tick(&mut w, Some(n));
            }
            Action::Order(step) => self.order_step(&mut w, step),
            fault => self.strike(&mut w, fault),
        }
        self.replicate(&mut w);
        Some(w)
    }
}

impl Sale {
    /// Buyer `n` takes its next step, as its protocol's program says
    /// (`None`: its guard is false, it cannot take it now).
    fn step(&self, w: &mut World, n: u8) -> Option<()> {
        let i = usize::from(n);
        let pc = w.buyers[i].pc;
        if w.redis == Outage::Down {
            // The command it would send now fails: it is answered 503.
            pc.step(self, &mut w.clone(), n)?;
            self.fail(w, n);
            return Some(());
        }
        let next = pc.step(self, w, n)?;
        // An attempt that ends without an answer frees its id for a retry.
        if next.at() == At::Done && matches!(w.request, Request::Pending(m, _) if m == n) {
            w.request = Request::None;
        }
        w.buyers[i].pc = next;
        Some(())
    }
}
