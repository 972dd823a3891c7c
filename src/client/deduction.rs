//! One `/deductStock` answer as the client saw it: its status (0 for none),
//! its body typed, and how long it took.

use std::time::Duration;

use serde_json::Value;

use crate::wire::{DeductResponse, ErrorBody};

/// One `/deductStock` answer as the client saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deduction {
    /// The HTTP status; 0 when no answer came (the connection was refused
    /// or dropped: the process died; or the request timed out).
    pub status: u16,
    pub body: DeductBody,
    /// From sending the request to its answer.
    pub took: Duration,
}

impl Deduction {
    /// Why it was not a sale: a busy answer's `reason` (`lock_held`,
    /// `stale_token`, ...) or an error's code (`store_unavailable`, ...).
    pub fn reason(&self) -> Option<&str> {
        match &self.body {
            DeductBody::Outcome(answer) => answer.reason.as_deref(),
            DeductBody::Error(error) => Some(&error.error),
            DeductBody::Unreadable => None,
        }
    }

    /// An order variant's sale: the token that pays and finds its order.
    pub fn order_token(&self) -> Option<&str> {
        match &self.body {
            DeductBody::Outcome(answer) => answer.order_token.as_deref(),
            _ => None,
        }
    }

    /// A sale (200).
    pub fn sold(&self) -> bool {
        self.status == 200
    }

    /// The unit a sale sold.
    pub fn unit(&self) -> Option<i64> {
        match &self.body {
            DeductBody::Outcome(answer) => answer.unit,
            _ => None,
        }
    }

    /// A `503 unknown`: the call was sent and no answer came in time; a
    /// retry with its request id learns what happened.
    pub fn unknown(&self) -> bool {
        matches!(&self.body, DeductBody::Outcome(answer) if answer.outcome == crate::wire::OutcomeKind::Unknown)
    }

    /// A retry answered from its request id's record.
    pub fn replayed(&self) -> bool {
        matches!(&self.body, DeductBody::Outcome(answer) if answer.replayed)
    }
}

/// The body of a `/deductStock` answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeductBody {
    /// Sold, sold out, busy or unknown.
    Outcome(DeductResponse),
    /// Bad input, a store that cannot be reached, ...
    Error(ErrorBody),
    /// No answer, or not one of the two shapes.
    Unreadable,
}

impl From<Value> for DeductBody {
    fn from(json: Value) -> Self {
        if let Ok(answer) = serde_json::from_value::<DeductResponse>(json.clone()) {
            DeductBody::Outcome(answer)
        } else if let Ok(error) = serde_json::from_value::<ErrorBody>(json) {
            DeductBody::Error(error)
        } else {
            DeductBody::Unreadable
        }
    }
}
