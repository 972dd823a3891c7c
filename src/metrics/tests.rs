//! The metrics page as Prometheus scrapes it: exactly the series the names
//! list, and every rate at zero from an instance's start.

use std::collections::HashSet;
use std::time::Duration;

use super::*;

/// The series names of a text page (comments skipped, labels cut off).
fn names_on(page: &str) -> HashSet<String> {
    page.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| line.split(['{', ' ']).next().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn the_page_holds_exactly_the_series_the_names_list() {
    let recorder = recorder("t");
    let handle = recorder.handle();
    let waiting_now = metrics::with_local_recorder(&recorder, || {
        describe();
        answered("lua", "sold");
        busy("token", "lock_held");
        lock_waited("watchdog", WaitOutcome::GaveUp, Duration::from_millis(3));
        lock_waited("watchdog", WaitOutcome::Acquired, Duration::from_millis(1));
        lock_hold("watchdog", Duration::from_millis(2));
        renewals("watchdog", 2);
        lost("watchdog");
        post_sale_failure("lua-stream", "register");
        batch_sent(3);
        let first = waiting("watchdog", "sku-1");
        let second = waiting("watchdog", "sku-1");
        drop(first);
        second
    });
    let page = handle.render();
    let expected: HashSet<String> = series_names().into_iter().collect();
    assert_eq!(names_on(&page), expected, "{page}");
    assert!(
        page.contains(r#"stocklock_lock_wait_seconds_count{instance="t",variant="watchdog",outcome="gave_up"} 1"#),
        "{page}"
    );
    assert!(
        page.contains(r#"stocklock_lock_wait_seconds_count{instance="t",variant="watchdog",outcome="acquired"} 1"#),
        "{page}"
    );
    // Two came, one left: one waits.
    assert!(
        page.contains(r#"stocklock_lock_waiters{instance="t",variant="watchdog",sku="sku-1"} 1"#),
        "{page}"
    );
    drop(waiting_now);
    assert!(
        handle
            .render()
            .contains(r#"stocklock_lock_waiters{instance="t",variant="watchdog",sku="sku-1"} 0"#)
    );
    assert!(page.contains("# HELP stocklock_lock_waiters"), "{page}");
}

#[test]
fn an_instance_starts_with_its_rates_at_zero() {
    let recorder = recorder("t");
    let handle = recorder.handle();
    metrics::with_local_recorder(&recorder, || {
        start_at_zero(&["lua", "token"], &["token"]);
        start_at_zero(&["lua", "token"], &["token"]);
        answered("lua", "sold");
    });
    let page = handle.render();
    let samples: Vec<(&str, &str)> = page
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .filter_map(|line| line.rsplit_once(' '))
        .collect();
    let value = |series: &str| {
        samples
            .iter()
            .find(|(s, _)| *s == series)
            .map(|(_, v)| *v)
            .unwrap_or_else(|| panic!("no {series} in\n{page}"))
    };
    // Repeating it reset nothing.
    assert_eq!(
        value(r#"stocklock_requests_total{instance="t",variant="lua",outcome="sold"}"#),
        "1"
    );
    for variant in ["lua", "token"] {
        for outcome in ANSWER_OUTCOMES
            .iter()
            .filter(|o| **o != "sold" || variant != "lua")
        {
            assert_eq!(
                value(&format!(
                    r#"stocklock_requests_total{{instance="t",variant="{variant}",outcome="{outcome}"}}"#
                )),
                "0"
            );
        }
    }
    for reason in CONTENTION_REASONS {
        assert_eq!(
            value(&format!(
                r#"stocklock_busy_total{{instance="t",variant="token",reason="{reason}"}}"#
            )),
            "0"
        );
    }
    for outcome in ["acquired", "gave_up"] {
        assert_eq!(
            value(&format!(
                r#"stocklock_lock_wait_seconds_count{{instance="t",variant="token",outcome="{outcome}"}}"#
            )),
            "0"
        );
    }
    assert_eq!(
        value(r#"stocklock_lock_hold_seconds_count{instance="t",variant="token"}"#),
        "0"
    );
    // Only the lock variants have lock series.
    assert!(!page.contains(r#"stocklock_lock_wait_seconds_count{instance="t",variant="lua""#));
    assert!(!page.contains(r#"stocklock_busy_total{instance="t",variant="lua""#));
}
