//! The order scenarios: what each does to its cell's stack, and the
//! evidence it hands `judge::books`.

use std::time::{Duration, Instant};

use anyhow::Context;

use super::{OrdersCell, PAY_WITHIN, POLL, RESTART_TIMEOUT, SETTLE_TIMEOUT, STOCK};
use crate::judge::{Books, LostLedger, Reply, check, said_of};
use crate::orders::expiry::Expired;
use crate::said;
use crate::wire::{ChaosAction, Said};

/// What an expiry pass did, for people.
fn pass(done: &Expired) -> Said {
    let (expired, returned, again, stale) = (done.expired, done.returned, done.again, done.stale);
    said!(
        "expired {expired}, returned {returned} (again {again}, stale {stale})",
        "过期 {expired},退回 {returned}(重复 {again},过时 {stale})"
    )
}

/// The answers of `replies`, in order, for the evidence.
fn answers(replies: &[Reply]) -> Said {
    let answers: Vec<Said> = replies.iter().map(Reply::answer_said).collect();
    Said::join(&answers, &said!(", ", ","))
}

/// The answers of `replies` that are not sales.
fn not_sold(replies: &[Reply]) -> Vec<Said> {
    replies
        .iter()
        .filter(|r| !r.sold())
        .map(Reply::answer_said)
        .collect()
}

/// Answers as a list: `["no answer", "503 database_unavailable"]`.
fn listed(answers: &[Said]) -> Said {
    let en: Vec<&str> = answers.iter().map(|a| a.en.as_str()).collect();
    let zh: Vec<&str> = answers.iter().map(|a| a.zh.as_str()).collect();
    Said {
        en: format!("{en:?}"),
        zh: format!("{zh:?}"),
    }
}

/// Why the buyers of a cell do not count: some were not sold to.
fn unsold(refused: &[Said]) -> Said {
    said_of!("sales not made: {}", "没有成交的销售:{}"; listed(refused))
}

/// Why the first two orders of a cell do not count: they were not written.
fn not_written(why: Said) -> Said {
    said_of!(
        "the first two orders were not written: {}",
        "前两个订单没有写入:{}";
        why
    )
}

pub(super) async fn crash_before_enqueue(c: &mut OrdersCell, v: &str) -> anyhow::Result<Books> {
    c.client().reset(v, STOCK, 0).await?;
    let (victim, other) = (c.instance(0), c.instance(1));
    let mut normal = Vec::new();
    for i in 0..2 {
        normal.push(c.sell(&c.stack.url, v, &format!("before-{i}")).await);
    }
    c.client().chaos(&ChaosAction::CrashBeforeEnqueue).await?;
    // Sales are one at a time: the armed one sells the third unit.
    let struck = STOCK - 2;
    let armed = c.sell(&victim.url, v, "armed").await;
    let back = c.restarted(&victim).await;
    for i in 0..2 {
        normal.push(c.sell(&other.url, v, &format!("after-{i}")).await);
    }
    let sold = c.client().at(&other.url).state(v).await?.sold;
    let (books, settled) = c.settle(v).await?;
    let refused = not_sold(&normal);
    let landed = check(armed.status == 0, || {
        said_of!(
            "the armed sale answered {}: no crash",
            "预设的那笔销售应答 {}:没有崩溃";
            armed.answer_said()
        )
    })
    .and_then(|()| {
        check(back.is_some(), || {
            let name = &victim.name;
            said!("instance {name} did not come back", "实例 {name} 没有回来")
        })
    })
    .and_then(|()| {
        check(sold == 5 && refused.is_empty(), || {
            said_of!(
                "the ledger counts {sold} sales of 5 (other answers: {})",
                "账本记录了 5 笔中的 {sold} 笔销售(其他应答:{})";
                listed(&refused)
            )
        })
    });
    let (name, pid, back) = (&victim.name, victim.pid, back.unwrap_or(0));
    Ok(Books {
        fault: said!(
            "instance {name} (pid {pid}) crashed after the script of the armed sale (unit {struck}), back as pid {back}",
            "实例 {name}(PID {pid})在预设那笔销售(第 {struck} 件)的脚本之后崩溃,以 PID {back} 回来"
        ),
        landed,
        struck: Some(struck),
        books,
        settled,
        refused: Vec::new(),
        returned_again: 0,
        earned: Ok(()),
    })
}

pub(super) async fn worker_crash_before_ack(c: &mut OrdersCell, v: &str) -> anyhow::Result<Books> {
    c.client().reset(v, STOCK, 0).await?;
    c.client().chaos(&ChaosAction::WorkerCrashBeforeAck).await?;
    let ids: Vec<String> = (0..4).map(|i| format!("sale-{i}")).collect();
    let mut replies =
        futures_util::future::join_all(ids.iter().map(|id| c.sell(&c.stack.url, v, id))).await;
    let died = c.stack.next_instance(RESTART_TIMEOUT).await;
    // A sale whose instance died under it is asked again, as a buyer
    // would: its request id makes the retry return the first outcome.
    let mut retried = 0;
    for (id, reply) in ids.iter().zip(replies.iter_mut()) {
        if !reply.sold() {
            retried += 1;
            *reply = c.sell(&c.stack.url, v, id).await;
        }
    }
    let (books, settled) = c.settle(v).await?;
    let refused = not_sold(&replies);
    let landed = check(died.is_some(), || {
        said!(
            "no instance died: the armed worker crash never struck",
            "没有实例死掉:预设的工作进程崩溃始终没有发生"
        )
    })
    .and_then(|()| check(refused.is_empty(), || unsold(&refused)));
    let fault = match &died {
        Some(i) => {
            let (name, pid) = (&i.name, i.pid);
            said!(
                "a worker aborted after its commit, before its XACK: instance {name} restarted as pid {pid}; {retried} sales asked again",
                "一个工作进程在提交之后、XACK 之前中止:实例 {name} 以 PID {pid} 重启;{retried} 笔销售重新请求"
            )
        }
        None => said!(
            "the armed worker crash did not strike",
            "预设的工作进程崩溃没有发生"
        ),
    };
    Ok(Books {
        fault,
        landed,
        struck: None,
        books,
        settled,
        refused: Vec::new(),
        returned_again: 0,
        earned: Ok(()),
    })
}

pub(super) async fn postgres_restart(c: &mut OrdersCell, v: &str) -> anyhow::Result<Books> {
    c.client().reset(v, STOCK, 0).await?;
    for i in 0..2 {
        c.sell(&c.stack.url, v, &format!("before-{i}")).await;
    }
    let (_, before) = c.settle(v).await?;
    let postgres = c.postgres.as_mut().context("the cell's PostgreSQL")?;
    let url = postgres.url();
    postgres.stop().await;
    let down = crate::orders::connect(&url).await.is_err();
    let mut during = Vec::new();
    for i in 0..3 {
        during.push(c.sell(&c.stack.url, v, &format!("down-{i}")).await);
    }
    let (view, _) = c.client().get(&format!("/api/orders?sku={v}")).await;
    let still_down = crate::orders::connect(&url).await.is_err();
    let postgres = c.postgres.as_mut().context("the cell's PostgreSQL")?;
    postgres.restart().await?;
    let port = postgres.port();
    let back = Instant::now();
    let (books, settled) = c.settle(v).await?;
    let took = back.elapsed();
    let landed = before.map_err(not_written).and_then(|()| {
        check(down && still_down, || {
            said!(
                "PostgreSQL answered while it should have been down",
                "PostgreSQL 本应停机,却在应答"
            )
        })
    });
    let secs = took.as_secs_f64();
    Ok(Books {
        fault: said_of!(
            "PostgreSQL stopped (fast shutdown) before 3 sales (answers {}), the orders' view answered {view} meanwhile; started again on port {port}, settled {secs:.2} s later",
            "PostgreSQL 在 3 笔销售之前停止(快速关闭)(应答 {}),其间订单视图应答 {view};在端口 {port} 上重新启动,{secs:.2} s 后稳定下来";
            answers(&during)
        ),
        landed,
        struck: None,
        books,
        settled,
        refused: not_sold(&during),
        returned_again: 0,
        earned: Ok(()),
    })
}

pub(super) async fn reservation_expiry(c: &OrdersCell, v: &str) -> anyhow::Result<Books> {
    const SALES: usize = 6;
    const PAID: usize = 3;
    c.client().reset(v, STOCK, 0).await?;
    let ids: Vec<String> = (0..SALES).map(|i| format!("reserve-{i}")).collect();
    // Each sale's answer, and the token its buyer pays and finds it with.
    let mut sold = Vec::new();
    let mut tokens = Vec::new();
    for id in &ids {
        let path = format!("/deductStock/{v}?sku={v}&request_id={id}");
        let answer = c.client().at(&c.stack.url).deduct(&path).await;
        tokens.push(answer.order_token().unwrap_or_default().to_owned());
        sold.push(Reply::from(answer));
    }
    // Each order once a worker wrote it; when its deadline passes.
    let mut orders = Vec::new();
    let found_by = Instant::now() + SETTLE_TIMEOUT;
    for (id, token) in ids.iter().zip(&tokens) {
        let order = loop {
            if let Some(order) = c.client().find_order(v, id, token).await? {
                break order;
            }
            anyhow::ensure!(Instant::now() < found_by, "no order for {id}");
            tokio::time::sleep(POLL).await;
        };
        let due = Instant::now() + Duration::from_millis(order.pay_within_ms.unwrap_or(0) as u64);
        orders.push((order, due));
    }
    let mut paid = Vec::new();
    for ((order, _), token) in orders[..PAID].iter().zip(&tokens) {
        paid.push(c.client().pay(order.id, token).await);
    }
    // Waiting for a deadline is waiting for a time: nothing to listen to.
    if let Some(due) = orders[PAID..].iter().map(|(_, due)| *due).max() {
        tokio::time::sleep_until((due + Duration::from_millis(50)).into()).await;
    }
    let first = c.client().expire_orders().await?;
    // The instances' own passes may hold some of the rows: wait for theirs.
    let expired_by = Instant::now() + SETTLE_TIMEOUT;
    while c.client().orders(v).await?.reconciliation.expired < (SALES - PAID) as i64
        && Instant::now() < expired_by
    {
        tokio::time::sleep(POLL).await;
    }
    let second = c.client().expire_orders().await?;
    let mut still_paid = 0;
    for (id, token) in ids[..PAID].iter().zip(&tokens) {
        let now = c.client().find_order(v, id, token).await?;
        if now.is_some_and(|o| o.status == "paid") {
            still_paid += 1;
        }
    }
    let (books, settled) = c.settle(v).await?;
    let unpaid = (SALES - PAID) as i64;
    let landed = check(not_sold(&sold).is_empty(), || unsold(&not_sold(&sold))).and_then(|()| {
        check(paid.iter().all(|&s| s == 200), || {
            said!(
                "payments answered {paid:?}: paid after the deadline?",
                "支付应答 {paid:?}:是在期限之后支付的吗?"
            )
        })
    });
    let earned = check(books.expired == unpaid && books.returned == unpaid, || {
        let (expired, returned) = (books.expired, books.returned);
        said!(
            "{expired} expired and {returned} returned of {unpaid} unpaid",
            "{unpaid} 个未支付订单中,过期 {expired} 个,退回 {returned} 个"
        )
    })
    .and_then(|()| {
        check(still_paid == PAID && books.paid == PAID as i64, || {
            said!(
                "{still_paid} of {PAID} paid orders still paid",
                "{PAID} 个已支付订单中仍为已支付的有 {still_paid} 个"
            )
        })
    })
    .and_then(|()| {
        let expected = STOCK - SALES as i64 + unpaid;
        check(books.stock == expected, || {
            let stock = books.stock;
            said!(
                "stock {stock}, not {expected}",
                "库存 {stock},而不是 {expected}"
            )
        })
    });
    Ok(Books {
        fault: said_of!(
            "{SALES} reservations (pay within {PAY_WITHIN}), {PAID} paid; after the deadline the first expiry pass {}, the second {}",
            "{SALES} 个预留(须在 {PAY_WITHIN} 内支付),已支付 {PAID} 个;期限过后第一轮过期处理:{},第二轮:{}";
            pass(&first),
            pass(&second)
        ),
        landed,
        struck: None,
        books,
        settled,
        refused: Vec::new(),
        returned_again: second.returned,
        earned,
    })
}

pub(super) async fn redis_data_loss(c: &mut OrdersCell, v: &str) -> anyhow::Result<LostLedger> {
    c.client().reset(v, STOCK, 0).await?;
    let mut before = Vec::new();
    for i in 0..2 {
        before.push(c.sell(&c.stack.url, v, &format!("before-{i}")).await);
    }
    let (_, written) = c.settle(v).await?;
    // PostgreSQL down: the next sales' orders wait in the stream, in
    // flight for certain when Redis loses them.
    let postgres = c.postgres.as_mut().context("the cell's PostgreSQL")?;
    let url = postgres.url();
    postgres.stop().await;
    let mut in_flight = Vec::new();
    for i in 0..3 {
        in_flight.push(c.sell(&c.stack.url, v, &format!("in-flight-{i}")).await);
    }
    let old_redis = c.stack.redis_pid;
    c.client().chaos(&ChaosAction::RestartRedis).await?;
    let restarted = c
        .stack
        .next_line("redis: pid ", RESTART_TIMEOUT)
        .await
        .is_some()
        && c.stack.redis_pid != old_redis;
    let postgres = c.postgres.as_mut().context("the cell's PostgreSQL")?;
    postgres.restart().await?;
    // The instances reconnect to the empty Redis by themselves.
    let reset_by = Instant::now() + RESTART_TIMEOUT;
    while let Err(err) = c.client().reset(v, STOCK, 0).await {
        if Instant::now() > reset_by {
            return Err(err.context("no reset after Redis came back"));
        }
        tokio::time::sleep(POLL).await;
    }
    let mut after = Vec::new();
    for i in 0..3 {
        after.push(c.sell(&c.stack.url, v, &format!("after-{i}")).await);
    }
    let (books, settled) = c.settle(v).await?;
    let db = crate::orders::connect(&url).await?;
    let orders: i64 = db
        .query_one("SELECT count(*) FROM orders WHERE sku = $1", &[&v])
        .await?
        .try_get(0)?;
    let refused = not_sold(&[before, in_flight.clone(), after.clone()].concat());
    let landed = written
        .map_err(not_written)
        .and_then(|()| {
            check(restarted, || {
                said!(
                    "Redis did not restart: the chaos action never struck",
                    "Redis 没有重启:混沌操作始终没有生效"
                )
            })
        })
        .and_then(|()| check(refused.is_empty(), || unsold(&refused)));
    let (pid, old) = (c.stack.redis_pid.unwrap_or(0), old_redis.unwrap_or(0));
    Ok(LostLedger {
        books: Books {
            fault: said_of!(
                "2 orders written; PostgreSQL stopped; 3 sales ({}) in flight when Redis restarted empty (pid {pid} after {old}); a reset and 3 sales ({})",
                "写入了 2 个订单;PostgreSQL 停止;Redis 清空重启(PID 由 {old} 变为 {pid})时,3 笔销售({})在途中;一次重置和 3 笔销售({})";
                answers(&in_flight),
                answers(&after)
            ),
            landed,
            struck: None,
            books,
            settled,
            refused: Vec::new(),
            returned_again: 0,
            earned: Ok(()),
        },
        written_before: 2,
        in_flight: in_flight.len() as i64,
        sold_after: after.iter().filter(|r| r.sold()).count() as i64,
        orders,
    })
}
