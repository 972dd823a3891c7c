//! The soak's judge fed a history on a real stack: an oversell its claims
//! forbid is a violation, one a struck fault allows is counted, and the
//! history checker finds it in what the buyers were told.

use std::time::{Duration, Instant};

use stocklock::history::Recorder;
use stocklock::soak::buyers::{Ending, Got, Round};
use stocklock::soak::faults::Kind;
use stocklock::soak::{judge, second};
use stocklock::variants::Variant;
use stocklock::wire::SoakFault;

use super::one_attempt;
use crate::helpers::{Stack, within};

/// Two buyers of a one-unit SKU through `none` at once, each reading the
/// stock before the other writes: both are told they bought. Recorded as
/// the soak's buyers record a round.
async fn oversold_round(stack: &Stack, variant: Variant) -> Round {
    let sku = format!("judged-{}", variant.name());
    let recorder = Recorder::prefixed(&format!("{}/", variant.name()));
    let recording = stack.client.recording(recorder.clone());
    recording.reset(&sku, 1, 0).await.unwrap();
    let started = Instant::now();
    let ask = |n: u32| {
        let path = format!("/deductStock/none?sku={sku}&request_id={sku}-{n}&work_ms=300");
        let (client, id) = (recording.clone(), format!("{sku}-{n}"));
        async move { one_attempt(&client, &path, id, started).await }
    };
    let (a, b) = tokio::join!(ask(1), ask(2));
    assert!(matches!(a.settled(), Got::Sold(_)) && matches!(b.settled(), Got::Sold(_)));
    assert_eq!(stack.state(&sku).await.oversold, 1);
    Round {
        variant,
        sku,
        from_ms: 0,
        to_ms: started.elapsed().as_millis() as u64,
        ending: Ending::SoldOut,
        requests: vec![a, b],
        recorder,
        clock_ns: 0,
    }
}

#[tokio::test]
async fn the_judge_finds_an_oversell_its_claims_forbid_and_counts_one_they_allow() {
    let stack = Stack::start(2, None).await;
    within(Duration::from_secs(120), async {
        // `fenced` claims safe in a race and under a frozen holder: a
        // violation, named.
        let round = oversold_round(&stack, Variant::Fenced).await;
        let (broken, counted) = judge::round(&stack.client, &round, &[], true, 1, None).await;
        assert!(
            broken
                .iter()
                .any(|b| b.contains("oversold 1") && b.contains("every claim")),
            "{broken:?}"
        );
        assert_eq!(counted.oversold, 0);
        // The history checker, from what the two buyers were told (and
        // the books read after): unsafe too, so the judges agree.
        assert!(counted.unsafe_seen.is_some(), "{counted:?}");
        let checked = second::judge(&round.recorder, 2, &counted).await;
        assert_eq!(checked.verdict, "unsafe", "{checked:?}");
        assert_eq!(checked.disagreement, None, "{checked:?}");
        let text = round.recorder.text();
        assert!(
            text.contains(r#""outcome":"read""#),
            "no books read: {text}"
        );
        // Had the soak's judge seen nothing, the evidence contradicts it.
        let blind = judge::Counted::default();
        let checked = second::judge(&round.recorder, 2, &blind).await;
        let said = checked.disagreement.unwrap_or_default();
        assert!(said.contains("contradicts the soak's judge"), "{said}");

        // `token` claims safe in a race: the same oversell, a violation...
        let round = oversold_round(&stack, Variant::Token).await;
        let (broken, _) = judge::round(&stack.client, &round, &[], true, 1, None).await;
        assert!(!broken.is_empty(), "token's race oversold unnoticed");
        // ...unless a frozen holder struck while it sold: token claims it
        // oversells then, so it is counted, not a violation.
        let pause = SoakFault {
            kind: Kind::StopInstance.name().to_owned(),
            target: "instance a".to_owned(),
            at_s: 0.0,
            healed_s: 0.0,
            error: String::new(),
        };
        let (broken, counted) = judge::round(
            &stack.client,
            &round,
            std::slice::from_ref(&pause),
            true,
            1,
            None,
        )
        .await;
        assert_eq!(broken, Vec::<String>::new());
        assert_eq!(counted.oversold, 1);
        // A fault that did not strike (the stack refused it) allows nothing.
        let refused = SoakFault {
            error: "refused".to_owned(),
            ..pause
        };
        let (broken, _) = judge::round(&stack.client, &round, &[refused], true, 1, None).await;
        assert!(!broken.is_empty());

        // `none` claims it oversells in a race: counted.
        let round = oversold_round(&stack, Variant::None).await;
        let (broken, counted) = judge::round(&stack.client, &round, &[], true, 1, None).await;
        assert_eq!(broken, Vec::<String>::new());
        assert_eq!(counted.oversold, 1);

        // A sale the buyer was told of that the ledger never recorded.
        let mut round = oversold_round(&stack, Variant::None).await;
        let mut forged = round.requests[0].clone();
        forged.id = format!("{}-forged", round.sku);
        round.requests.push(forged);
        let (broken, _) = judge::round(&stack.client, &round, &[], true, 1, None).await;
        assert!(
            broken
                .iter()
                .any(|b| b.contains("answered but the ledger counts")),
            "{broken:?}"
        );
    })
    .await;
    stack.stop().await;
}
