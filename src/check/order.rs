//! The order pipeline's state as the model holds it: each sale's order
//! message and row, the worker, PostgreSQL, and the faults that may strike
//! them (what each step does is [`super::pipeline`]'s).

/// What may happen to the order pipeline in a scenario.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct OrderFaults {
    /// Deaths of the worker after its commit, before its XACK.
    pub worker_crashes: u8,
    /// Stops of PostgreSQL (each followed, at some later step, by a start).
    pub postgres_stops: u8,
    /// Each reservation is paid or expires; an expired one gives its unit back.
    pub reservations: bool,
    /// Restarts of Redis with nothing kept (its stream neither), each
    /// followed by a reset of the SKU.
    pub data_losses: u8,
}

/// Where a sale's order message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Message {
    /// Not added yet: the buyer's XADD comes after the script.
    Unsent,
    /// In the stream, delivered to no worker yet.
    New,
    /// Delivered to a worker and not acked.
    Pending,
    Acked,
    /// Gone with a Redis that restarted empty.
    Lost,
}

/// A reservation's status in its order row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    Reserved,
    Paid,
    /// Cancelled by the expiry pass; its unit not yet recorded as given back.
    Expired,
    /// Its unit given back, and that recorded (`given_back_at`).
    Recorded,
}

/// One sale on its way to an order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Order {
    pub buyer: u8,
    pub unit: u8,
    pub message: Message,
    /// Order rows written for this sale.
    pub rows: u8,
    pub status: Status,
    /// Times its unit went back to the stock.
    pub returns: u8,
}

/// The sales' orders, the worker, PostgreSQL, and the faults struck so far.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Pipeline {
    pub orders: Vec<Order>,
    /// The sale whose message the worker holds, and whether its row is committed.
    pub worker: Option<(u8, bool)>,
    pub worker_crashes: u8,
    pub postgres_down: bool,
    pub postgres_stops: u8,
    pub data_losses: u8,
}

/// One step of the order pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum OrderStep {
    /// The worker's next command: XREADGROUP (or the claim of a message
    /// left pending), the INSERT with its COMMIT, or the XACK.
    Worker,
    /// The worker dies after its commit, before its XACK.
    WorkerCrash,
    PostgresStop,
    PostgresStart,
    /// The buyer of sale `s` pays its reservation.
    Pay(u8),
    /// The expiry pass cancels sale `s`'s reservation, overdue.
    Expire(u8),
    /// The expiry pass gives sale `s`'s unit back (`give_back.lua`).
    GiveBack(u8),
    /// The expiry pass records sale `s`'s unit given back.
    Record(u8),
    /// Redis restarts with nothing kept, and the SKU is reset.
    DataLoss,
}
