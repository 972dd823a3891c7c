//! Each run of the checker done once per process. A run (one protocol,
//! its bounds, its mutation, one property) is asked for again and again:
//! by the cells whose variants share a protocol (`lua`'s model checks six
//! variants), by the lab beside its live cells, by step mode, and by the
//! tests, several of which judge every cell. The answer does not change:
//! the first asker computes it, the others (at once or later) wait for it
//! and share it.

use std::sync::{Arc, Mutex, OnceLock};

use stateright::{Checker, Model};

use super::model::{Action, Sale, World};

/// What one run found: the states it visited, and the shortest path to
/// its property's discovery (a counterexample, or a witness), if any.
pub(crate) type Run = (usize, Option<Vec<(World, Option<Action>)>>);

/// The runs asked for so far, each computed once (a search of a list: a
/// process asks for a few hundred at most).
type Runs = Mutex<Vec<(Sale, Arc<OnceLock<Run>>)>>;

static RUNS: Runs = Mutex::new(Vec::new());

/// `sale`'s run: computed by the first to ask, shared with the rest.
pub(crate) fn run(sale: Sale) -> Run {
    let slot = {
        // (A panic elsewhere while the list was held leaves it whole.)
        let mut runs = RUNS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match runs.iter().find(|(asked, _)| *asked == sale) {
            Some((_, slot)) => Arc::clone(slot),
            None => {
                let slot = Arc::new(OnceLock::new());
                runs.push((sale, Arc::clone(&slot)));
                slot
            }
        }
    };
    slot.get_or_init(|| {
        let checker = sale.checker().threads(1).spawn_bfs().join();
        let path = checker.discovery(sale.property.name());
        (checker.unique_state_count(), path.map(|p| p.into_vec()))
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::{bounds, protocol::Protocol};
    use crate::variants::{Scenario, Variant};

    /// A run asked for twice is computed once: the second answer is the
    /// first's, and it takes no search (the list holds it).
    #[test]
    fn a_run_asked_for_twice_is_searched_once() {
        let protocol = Protocol::of(Variant::Setnx);
        let sale = Sale {
            protocol,
            bounds: bounds(Scenario::Race, protocol),
            mutation: Default::default(),
            property: crate::check::Property::Safety,
        };
        let first = run(sale);
        let held = || {
            let runs = RUNS.lock().unwrap();
            runs.iter().filter(|(asked, _)| *asked == sale).count()
        };
        assert_eq!(held(), 1);
        let again = run(sale);
        assert_eq!(held(), 1);
        assert_eq!(first.0, again.0);
        assert_eq!(first.1.map(|p| p.len()), again.1.map(|p| p.len()));
        assert!(first.0 > 0);
    }
}
