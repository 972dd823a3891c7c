//! Each cell's verdict computed once a process: the lab, `replay --all`,
//! the explorer and the dashboard all ask for the matrix's verdicts, some
//! of them more than once, and Redlock's models alone take seconds. A
//! verdict depends on nothing but the code, so the first answer is kept.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

use super::Verdict;
use crate::variants::{Scenario, Variant};

type Slot = Arc<OnceLock<Option<Verdict>>>;

static VERDICTS: LazyLock<Mutex<HashMap<(Variant, Scenario), Slot>>> =
    LazyLock::new(Default::default);

/// The verdict of `variant` in `scenario`, computed by `compute` the first
/// time it is asked for; a caller asking while another computes it waits
/// for that answer instead of computing it again.
pub(super) fn remembered(
    variant: Variant,
    scenario: Scenario,
    compute: impl FnOnce() -> Option<Verdict>,
) -> Option<Verdict> {
    let slot = VERDICTS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .entry((variant, scenario))
        .or_default()
        .clone();
    slot.get_or_init(compute).clone()
}

/// Computes the verdicts of `cells`, in their order, on a thread of its
/// own: a command that will need them after some slower work (playing a
/// cell live) finds them ready, the CPU they cost spent while it waited.
pub fn warm(cells: Vec<(Variant, Scenario)>) {
    let spawned = std::thread::Builder::new()
        .name("check-warm".to_owned())
        .spawn(move || {
            for (variant, scenario) in cells {
                super::check(variant, scenario);
            }
        });
    // Without the thread, each verdict is computed when first asked for.
    drop(spawned);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_is_computed_once_and_given_to_every_caller() {
        let computed = std::sync::atomic::AtomicUsize::new(0);
        let (variant, scenario) = (Variant::Lua, Scenario::Race);
        let first = super::super::check(variant, scenario);
        let again = remembered(variant, scenario, || {
            computed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            None
        });
        assert_eq!(computed.load(std::sync::atomic::Ordering::SeqCst), 0);
        assert_eq!(again, first);
        assert!(first.is_some());
    }
}
