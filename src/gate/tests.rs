//! The gates' pure parts: arrivals' names and notes.

use super::*;

#[test]
fn an_arrival_names_its_buyer_and_gate_and_only_tools_names_have_an_index() {
    let arrival = Arrival::parse("B vote:2").unwrap();
    assert_eq!(
        (arrival.buyer.as_str(), arrival.gate.as_str()),
        ("B", "vote:2")
    );
    assert_eq!(arrival.buyer_index(), Some(1));
    assert_eq!(buyer_name(2), "C");
    for stranger in ["0 after_read", "AB after_read", "a after_read", "_ x"] {
        assert_eq!(
            Arrival::parse(stranger).unwrap().buyer_index(),
            None,
            "{stranger}"
        );
    }
    assert!(Arrival::parse("nogate").is_none());
}

#[test]
fn only_a_wait_for_a_lock_and_a_votes_answer_are_notes() {
    for note in ["waits", "voted:0", "voted:4"] {
        assert!(is_note(note), "{note}");
    }
    for gate in [
        "vote:0",
        "voted",
        "votedx:1",
        "after_read",
        "renewal",
        ANSWERED,
    ] {
        assert!(!is_note(gate), "{gate}");
    }
}
