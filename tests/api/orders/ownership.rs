//! Orders belong to their buyer: paying or finding an order takes the
//! order token its sale's answer carried. Another buyer's order id (ids
//! are sequential) with the wrong token, or none, is the same 404 as an
//! order that does not exist, and changes nothing.

use std::time::Duration;

use serde_json::Value;

use super::pipeline::{database, stack_with};
use crate::helpers::{Stack, within};

/// A sale of `sku` with `request_id`; its answer's body.
async fn buy(stack: &Stack, sku: &str, request_id: &str) -> Value {
    let url = format!(
        "{}/deductStock/{sku}?sku={sku}&request_id={request_id}",
        stack.url
    );
    let response = stack.http().get(&url).send().await.unwrap();
    assert_eq!(response.status(), 200, "{request_id}");
    response.json().await.unwrap()
}

/// The id of the order `request_id` became, once a worker wrote it (read
/// from the database, as an attacker counting sequential ids would guess it).
async fn order_id(db: &stocklock::orders::Client, request_id: &str) -> i64 {
    loop {
        let row = db
            .query_opt(
                "SELECT id FROM orders WHERE request_id = $1",
                &[&request_id],
            )
            .await
            .unwrap();
        if let Some(row) = row {
            return row.get(0);
        }
        // The worker's pace: a moment after the sale.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `POST /api/orders/{id}/pay` with `token` (none when `None`): status and body.
async fn pay(stack: &Stack, id: i64, token: Option<&str>) -> (u16, Value) {
    let mut request = stack
        .http()
        .post(format!("{}/api/orders/{id}/pay", stack.url));
    if let Some(token) = token {
        request = request.header("x-order-token", token);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// `GET /api/orders/find` for `request_id` with `token`: the status.
async fn find(stack: &Stack, sku: &str, request_id: &str, token: Option<&str>) -> u16 {
    let url = format!(
        "{}/api/orders/find?sku={sku}&request_id={request_id}",
        stack.url
    );
    let mut request = stack.http().get(url);
    if let Some(token) = token {
        request = request.header("x-order-token", token);
    }
    request.send().await.unwrap().status().as_u16()
}

async fn status(db: &stocklock::orders::Client, id: i64) -> String {
    db.query_one("SELECT status FROM orders WHERE id = $1", &[&id])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn another_buyers_order_cannot_be_paid_or_found_without_its_token() {
    within(Duration::from_secs(120), async {
        let Some(stack) = stack_with(&["--pay-within", "10m"]).await else {
            return;
        };
        for sku in ["lua-stream", "lua-then-queue"] {
            stack.reset(sku, 5).await;
            let alice = buy(&stack, sku, &format!("{sku}-alice")).await;
            let mallory = buy(&stack, sku, &format!("{sku}-mallory")).await;
            let db = database(&stack).await;
            let alices = order_id(&db, &format!("{sku}-alice")).await;
            let missing = (pay(&stack, i64::MAX, None).await, alices);
            // Mallory pays Alice's order: with her own token, or none.
            let mallorys_token = mallory["order_token"].as_str().map(str::to_owned);
            let with_hers = pay(&stack, alices, mallorys_token.as_deref()).await;
            assert_eq!(
                with_hers.0, 404,
                "{sku}: paid with another order's token: {with_hers:?}"
            );
            assert_eq!(
                with_hers.1, missing.0.1,
                "{sku}: not the same 404 as a missing order"
            );
            assert_eq!(
                pay(&stack, alices, None).await.0,
                404,
                "{sku}: paid with no token"
            );
            assert_eq!(status(&db, alices).await, "pending_payment", "{sku}");
            let alice_id = format!("{sku}-alice");
            assert_eq!(find(&stack, sku, &alice_id, None).await, 404, "{sku}");
            assert_eq!(
                find(&stack, sku, &alice_id, mallorys_token.as_deref()).await,
                404,
                "{sku}"
            );
            // Alice, with the token her sale's answer carried.
            let token = alice["order_token"]
                .as_str()
                .expect("a sale carries its order token");
            assert!(token.len() >= 32, "{token}: under 128 bits");
            assert_eq!(
                find(&stack, sku, &alice_id, Some(token)).await,
                200,
                "{sku}"
            );
            let paid = pay(&stack, alices, Some(token)).await;
            assert_eq!(paid.0, 200, "{sku}: {paid:?}");
            assert_eq!(status(&db, alices).await, "paid", "{sku}");
        }
        stack.stop().await;
    })
    .await;
}
