//! Hooks: named points in a lock's protocol (between SETNX and EXPIRE,
//! before each Redlock node, before a watchdog's renewal) where whoever
//! set the hook may hold the step until it lets it go. The locks know
//! nothing of who that is: a schedule of the lab, a test. With no hook set
//! a point costs one branch.
//!
//! ```
//! # use std::sync::Arc;
//! use stocklock_lock::{Hook, Point, Reached};
//!
//! struct Log;
//! impl Reached for Log {
//!     fn reached(&self, point: Point) -> stocklock_lock::Held<'_> {
//!         Box::pin(async move { println!("at {point}") })
//!     }
//! }
//!
//! # async fn f() {
//! let hook = Hook::new(Arc::new(Log));
//! hook.at(Point::new("after_setnx")).await; // prints "at after_setnx"
//! Hook::none().at(Point::new("after_setnx")).await; // nothing
//! # }
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// A point of a protocol: a name, and for Redlock the node it is about.
///
/// ```
/// use stocklock_lock::Point;
///
/// assert_eq!(Point::new("after_setnx").to_string(), "after_setnx");
/// let vote = Point::nth("vote", 2); // the question to Redlock's node 2
/// assert_eq!((vote.name, vote.index), ("vote", Some(2)));
/// assert_eq!(vote.to_string(), "vote:2");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Point {
    /// The point's name (`after_setnx`, `renewal`, ...).
    pub name: &'static str,
    /// Which of several (Redlock's node, counted from 0).
    pub index: Option<usize>,
}

impl Point {
    /// The point called `name`.
    pub const fn new(name: &'static str) -> Point {
        Point { name, index: None }
    }

    /// The point about the `index`-th of several (a Redlock node).
    pub const fn nth(name: &'static str, index: usize) -> Point {
        Point {
            name,
            index: Some(index),
        }
    }
}

impl fmt::Display for Point {
    /// `after_setnx`, or `vote:2` for the point about node 2.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            None => f.write_str(self.name),
            Some(index) => write!(f, "{}:{index}", self.name),
        }
    }
}

/// A step held at a point: resolves when it may go on.
///
/// ```
/// use std::time::Duration;
/// use stocklock_lock::Held;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let go_on: Held<'static> = Box::pin(async {}); // at once
/// let later: Held<'static> = Box::pin(tokio::time::sleep(Duration::from_millis(5)));
/// go_on.await;
/// later.await; // 5 ms after the step reached the point
/// # }
/// ```
pub type Held<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// What a hook does when a step reaches a point.
///
/// ```
/// use std::sync::Arc;
/// use stocklock_lock::{Held, Hook, Point, Reached};
/// use tokio::sync::Semaphore;
///
/// struct Gate(Semaphore); // a schedule's gate: every step waits for a permit
/// impl Reached for Gate {
///     fn reached(&self, _: Point) -> Held<'_> {
///         Box::pin(async move { self.0.acquire().await.expect("never closed").forget() })
///     }
/// }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let gate = Arc::new(Gate(Semaphore::new(0)));
/// gate.0.add_permits(1); // let one step through
/// Hook::new(gate.clone()).at(Point::new("renewal")).await;
/// # }
/// ```
pub trait Reached: Send + Sync {
    /// Called when a step reaches `point`: the step goes on when the returned future resolves.
    fn reached(&self, point: Point) -> Held<'_>;
}

/// A lock's hook: none, or one [`Reached`] shared by every clone.
///
/// ```
/// use std::sync::Arc;
/// use stocklock_lock::{Held, Hook, Point, Reached};
///
/// struct Pass;
/// impl Reached for Pass {
///     fn reached(&self, _: Point) -> Held<'_> {
///         Box::pin(async {})
///     }
/// }
///
/// assert!(Hook::new(Arc::new(Pass)).is_set());
/// assert!(!Hook::default().is_set()); // as `Hook::none()`: every point passes at once
/// ```
#[derive(Clone, Default)]
pub struct Hook(Option<Arc<dyn Reached>>);

impl Hook {
    /// No hook: every point passes at once.
    pub fn none() -> Hook {
        Hook(None)
    }

    /// A hook that calls `reached` at every point.
    pub fn new(reached: Arc<dyn Reached>) -> Hook {
        Hook(Some(reached))
    }

    /// Whether a hook is set (else every point costs one branch).
    pub fn is_set(&self) -> bool {
        self.0.is_some()
    }

    /// The step reaches `point`: held there until the hook lets it go.
    pub async fn at(&self, point: Point) {
        if let Some(reached) = &self.0 {
            reached.reached(point).await;
        }
    }
}

impl fmt::Debug for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.is_set() {
            "Hook(set)"
        } else {
            "Hook(none)"
        })
    }
}
