use super::*;

#[test]
fn a_refused_connection_sent_nothing_and_a_timeout_proves_nothing() {
    let io = |kind| StoreError(std::io::Error::new(kind, "test").into());
    assert!(nothing_sent(&io(std::io::ErrorKind::ConnectionRefused)));
    assert!(!nothing_sent(&io(std::io::ErrorKind::TimedOut)));
}

/// A script Redis does not know ran nothing (a Redis restarted since
/// the script was given it, and not given it again).
#[test]
fn a_script_redis_does_not_know_sent_nothing() {
    let noscript = redis::RedisError::from((
        redis::ErrorKind::Server(redis::ServerErrorKind::NoScript),
        "NOSCRIPT",
    ));
    assert!(nothing_sent(&StoreError(noscript)));
}
