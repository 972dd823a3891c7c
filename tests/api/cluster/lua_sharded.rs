//! `lua-sharded` on the cluster: a hot SKU's stock sold exactly from
//! buckets on several masters, and a request id answered once even when
//! its sale must walk the buckets.

use super::*;

#[tokio::test]
async fn lua_sharded_sells_exactly_a_hot_skus_stock_from_buckets_on_several_masters() {
    const STOCK: i64 = 1000;
    const BUCKETS: u32 = 8;
    const REQUESTS: u64 = 1500;
    bounded(async {
        let stack = cluster_stack().await;
        let reset = stack.client.reset("hot", STOCK, BUCKETS).await.unwrap();
        assert_eq!(
            (reset.buckets, reset.initial, reset.remaining, reset.sold),
            (BUCKETS, STOCK, STOCK, 0)
        );

        let info = Variant::LuaSharded.info();
        let config = LoadConfig {
            requests: Some(REQUESTS),
            ..load_config(&stack, &info, Some("hot"), 1)
        };
        let report = run(&config, &info).await;
        assert_eq!(
            (report.sold, report.sold_out, report.busy),
            (STOCK as u64, REQUESTS - STOCK as u64, 0),
            "the client's 200s are the stock, no more, no less"
        );

        let state = stack.client.state("hot").await.unwrap();
        assert_eq!(
            (state.buckets, state.initial, state.sold, state.remaining),
            (BUCKETS, STOCK, STOCK, 0),
            "{state:?}"
        );
        assert_eq!((state.oversold, state.duplicates), (0, 0), "{state:?}");
        assert_eq!(
            state.per_instance.values().sum::<i64>(),
            REQUESTS as i64,
            "every answer recorded once: {:?}",
            state.per_instance
        );
        assert_eq!(state.per_instance.len(), 2, "{:?}", state.per_instance);

        // Each bucket, on its own master, sold exactly its share.
        let mut masters = Masters::read(&stack).await;
        let mut per_master: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for b in 0..BUCKETS {
            let (stock, ledger) = (format!("stock:{{hot#{b}}}"), format!("ledger:{{hot#{b}}}"));
            let master = masters.of(&stock).await;
            assert_eq!(masters.of(&ledger).await, master);
            let share = STOCK / i64::from(BUCKETS);
            assert_eq!(masters.hget(&ledger, "initial").await, share, "bucket {b}");
            assert_eq!(masters.hget(&ledger, "sold").await, share, "bucket {b}");
            assert_eq!(masters.get(&stock).await, Some(0), "bucket {b}");
            per_master.entry(master).or_default().push(b);
        }
        eprintln!("lua-sharded: buckets per master {per_master:?}");
        assert!(
            per_master.len() >= 2,
            "all eight buckets on one master: {per_master:?}"
        );

        stop(stack).await;
    })
    .await;
}

/// The bucket `lua-sharded` tries first for a request_id: FNV-1a of the id
/// modulo the buckets (as the variant computes it).
/// What a run of one request id leaves: (sold, replays, remaining,
/// oversold, duplicates).
fn counts(state: &stocklock::wire::StateSnapshot) -> (i64, i64, i64, i64, i64) {
    (
        state.sold,
        state.replays,
        state.remaining,
        state.oversold,
        state.duplicates,
    )
}

fn first_bucket(request_id: &str, buckets: u32) -> u32 {
    let hash = request_id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (hash % u64::from(buckets)) as u32
}

/// `copies` identical requests with one request_id, released at once.
async fn same_request(
    stack: &Stack,
    sku: &str,
    request_id: &str,
    copies: usize,
) -> Vec<(u16, Value)> {
    let url = stack.client.url(&format!(
        "/deductStock/lua-sharded?sku={sku}&request_id={request_id}"
    ));
    let barrier = Arc::new(Barrier::new(copies));
    let sends: Vec<_> = (0..copies)
        .map(|_| {
            let (http, url, barrier) = (stack.http().clone(), url.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                let response = http.get(&url).send().await.expect("request failed");
                let status = response.status().as_u16();
                (status, response.json::<Value>().await.expect("a JSON body"))
            })
        })
        .collect();
    let mut answers = Vec::new();
    for send in sends {
        answers.push(send.await.unwrap());
    }
    answers
}

/// Checks that `answers` are one first answer and its replays, all with
/// `status`; returns the unit sold (`None` for sold out).
fn one_answer_repeated(answers: &[(u16, Value)], status: u16) -> Option<i64> {
    for (got, body) in answers {
        assert_eq!(*got, status, "{body}");
    }
    let firsts = answers
        .iter()
        .filter(|(_, body)| body.get("replayed").and_then(Value::as_bool) != Some(true))
        .count();
    assert_eq!(firsts, 1, "one first answer, the rest replays: {answers:?}");
    let units: BTreeSet<Option<i64>> = answers.iter().map(|(_, b)| b["unit"].as_i64()).collect();
    assert_eq!(units.len(), 1, "every copy names the same unit: {units:?}");
    units.into_iter().next().flatten()
}

#[tokio::test]
async fn lua_sharded_answers_a_request_id_once_even_when_it_must_walk_the_buckets() {
    const COPIES: usize = 16;
    const BUCKETS: u32 = 8;
    bounded(async {
        let stack = cluster_stack().await;

        // Stock in every bucket.
        stack.client.reset("hot2", 1000, BUCKETS).await.unwrap();
        let answers = same_request(&stack, "hot2", "x", COPIES).await;
        assert!(one_answer_repeated(&answers, 200).is_some());
        let state = stack.client.state("hot2").await.unwrap();
        assert_eq!(
            counts(&state),
            (1, COPIES as i64 - 1, 999, 0, 0),
            "{state:?}"
        );

        // 2 units over 8 buckets: buckets 0 and 1 hold one each, 2..7
        // none. Ids that start at an empty bucket walk up to six empty ones.
        stack.client.reset("hot3", 2, BUCKETS).await.unwrap();
        let ids: Vec<String> = (0..)
            .map(|n| format!("walk-{n}"))
            .filter(|id| first_bucket(id, BUCKETS) == 2)
            .take(3)
            .collect();
        let mut units = Vec::new();
        for (i, id) in ids[..2].iter().enumerate() {
            let answers = same_request(&stack, "hot3", id, COPIES).await;
            let unit = one_answer_repeated(&answers, 200).expect("a sale names its unit");
            units.push(unit);
            let state = stack.client.state("hot3").await.unwrap();
            let sold = i as i64 + 1;
            assert_eq!(
                counts(&state),
                (sold, sold * (COPIES as i64 - 1), 2 - sold, 0, 0),
                "after {id}: {state:?}"
            );
        }
        // Bucket b's only unit is unit b + 1 of the SKU: starting at
        // bucket 2, the first id walked 2..7 and sold bucket 0's, the
        // second walked on to bucket 1.
        assert_eq!(units, [1, 2]);
        // Sold out everywhere: the answer is a 409, given once and repeated.
        let answers = same_request(&stack, "hot3", &ids[2], COPIES).await;
        assert_eq!(one_answer_repeated(&answers, 409), None);
        let state = stack.client.state("hot3").await.unwrap();
        assert_eq!(
            counts(&state),
            (2, 3 * (COPIES as i64 - 1), 0, 0, 0),
            "{state:?}"
        );
        assert_eq!(
            state.per_instance.values().sum::<i64>(),
            3 * COPIES as i64,
            "every answer recorded once: {:?}",
            state.per_instance
        );

        stop(stack).await;
    })
    .await;
}
