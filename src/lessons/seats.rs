//! A classroom seat's experiments: the steps that touch nothing but their
//! SKU, played on SKUs of the seat's own, as one of the seat's jobs
//! ([`crate::classroom::jobs`]: one per seat, a few seats' at once).

use std::time::Duration;

use super::{RUN_LIMIT_S, StartError, Step};
use crate::classroom::jobs::{self, Refused};
use crate::store::Conn;

/// Claims `step`'s experiment for `seat`, or says why not.
pub(super) async fn claim(conn: &mut Conn, step: &Step, seat: &str) -> Result<(), StartError> {
    if !step.seats_may_run() {
        return Err(StartError::NotASeats);
    }
    match jobs::claim(conn, seat, Duration::from_secs(RUN_LIMIT_S)).await? {
        Ok(()) => Ok(()),
        Err(Refused::Seat) => Err(StartError::SeatBusy),
        Err(Refused::Class) => Err(StartError::ClassBusy),
    }
}
