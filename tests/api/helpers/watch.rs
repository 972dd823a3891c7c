//! Watching Redis from a test: keyspace events, critical sections as they
//! are entered, request id records. How a test strikes at the right moment
//! without guessing a delay.

use super::*;

/// Keyspace events on `key` (hash commands: HINCRBY, ...), as a stream:
/// how a test learns, without polling, that a lock was just taken.
pub(crate) async fn keyspace_events(
    redis_url: &str,
    key: &str,
) -> impl futures_util::Stream<Item = redis::Msg> + use<> {
    let client = redis::Client::open(redis_url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg("Kh")
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut events = client.get_async_pubsub().await.unwrap();
    events
        .subscribe(format!("__keyspace@0__:{key}"))
        .await
        .unwrap();
    events.into_on_message()
}

/// Announcements that a critical section of one of `skus` has read the
/// stock (chaos mode: the section is in its gap), as a stream of SKU names:
/// how a test strikes inside the gap without guessing a delay.
pub(crate) async fn sections_entered(
    redis_url: &str,
    skus: &[&str],
) -> impl futures_util::Stream<Item = String> + use<> {
    use futures_util::StreamExt;
    let client = redis::Client::open(redis_url).unwrap();
    let mut events = client.get_async_pubsub().await.unwrap();
    for sku in skus {
        let keys = stocklock::store::Keys::new(&stocklock::knobs::Sku::parse(sku).unwrap());
        events
            .subscribe(stocklock::chaos::section_channel(&keys))
            .await
            .unwrap();
    }
    events.into_on_message().map(|msg| {
        // stocklock:section:stock:{SKU}
        let channel = msg.get_channel_name().to_owned();
        channel
            .rsplit_once('{')
            .map(|(_, rest)| rest.trim_end_matches('}').to_owned())
            .unwrap_or(channel)
    })
}

/// Sends `path` through `client` and returns once that request's critical
/// section of `sku` has read the stock (chaos mode), with the request
/// still running: the holder a test then freezes, pauses or kills.
pub(crate) async fn holder_in_section(
    redis_url: &str,
    sku: &str,
    client: stocklock::client::StackClient,
    path: String,
) -> tokio::task::JoinHandle<(u16, Value)> {
    use futures_util::StreamExt;
    let mut entered = sections_entered(redis_url, &[sku]).await;
    let holder = tokio::spawn(async move { client.get(&path).await });
    tokio::time::timeout(std::time::Duration::from_secs(10), entered.next())
        .await
        .unwrap_or_else(|_| panic!("{sku}: the holder never entered its section"));
    holder
}

/// A SKU's request id records (`requests:{sku}`): id → record.
pub(crate) async fn request_records(redis_url: &str, sku: &str) -> BTreeMap<String, String> {
    let client = redis::Client::open(redis_url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("HGETALL")
        .arg(format!("requests:{{{sku}}}"))
        .query_async(&mut conn)
        .await
        .unwrap()
}
