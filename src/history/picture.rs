//! The picture of a failed SKU, as Porcupine draws one: each operation of
//! the smallest set a bar from its call to its return (an open bar when no
//! answer came), one lane per client, and the moment by which they have no
//! order marked in red. One self-contained HTML file for all failed SKUs.

use std::fmt::Write as _;

use super::judge::{Decision, Verdict, describe};
use super::op::{Outcome, SkuHistory};

const WIDTH: f64 = 900.0;
const LANE: f64 = 34.0;
const LEFT: f64 = 150.0;

/// The page: one section per SKU that is not linearizable.
pub fn page(skus: &[(SkuHistory, Decision)]) -> String {
    let mut html = String::from(
        "<!doctype html><meta charset=utf-8><title>stocklock history check</title>\n\
         <style>body{font:14px system-ui,sans-serif;margin:2em;max-width:1100px}\
         svg{background:#fafafa;border:1px solid #ddd}.why{white-space:pre-wrap}\
         text{font:12px monospace}</style>\n<h1>Operations that cannot be ordered</h1>\n\
         <p>Each bar is one operation, from when it was sent to when its answer came \
         (an open end: no answer). Every other operation of the SKU was weakened (it may \
         have happened at any time after its call, or not at all) and these still have \
         no order the spec of a stock allows; the red line is the moment by which \
         they have none.</p>\n",
    );
    for (history, decision) in skus {
        if decision.verdict == Verdict::Linearizable {
            continue;
        }
        section(&mut html, history, decision);
    }
    html
}

fn section(html: &mut String, history: &SkuHistory, decision: &Decision) {
    let _ = write!(
        html,
        "<h2>{} — {} ({} operations, initial {})</h2>\n<p class=why>{}</p>\n",
        escape(&history.sku),
        decision.verdict.as_str(),
        decision.ops,
        history.initial,
        escape(&decision.why)
    );
    if decision.culprits.is_empty() {
        return;
    }
    let ops: Vec<usize> = decision.culprits.clone();
    let start = ops.iter().map(|&i| history.ops[i].call).min().unwrap_or(0);
    let end = ops
        .iter()
        .map(|&i| history.ops[i].ret.unwrap_or(history.ops[i].call))
        .chain(decision.impossible_at)
        .max()
        .unwrap_or(start)
        .max(start + 1);
    // A little room after the last moment, for the open bars.
    let span = (end - start) as f64 * 1.15;
    let x = |t: u64| LEFT + (t - start) as f64 / span * (WIDTH - LEFT - 10.0);
    let mut clients: Vec<u64> = ops.iter().map(|&i| history.ops[i].client).collect();
    clients.sort_unstable();
    clients.dedup();
    let height = LANE * clients.len() as f64 + 40.0;
    let _ = writeln!(
        html,
        "<svg width={WIDTH} height={height} viewBox=\"0 0 {WIDTH} {height}\">"
    );
    for (lane, client) in clients.iter().enumerate() {
        let y = 10.0 + lane as f64 * LANE;
        let _ = writeln!(
            html,
            "<text x=4 y={}>client {client}</text>",
            y + LANE / 2.0
        );
    }
    for &i in &ops {
        let op = &history.ops[i];
        let lane = clients.binary_search(&op.client).unwrap_or(0);
        let y = 10.0 + lane as f64 * LANE + 4.0;
        let x0 = x(op.call);
        let (x1, open) = match op.ret {
            Some(ret) => (x(ret).max(x0 + 3.0), ""),
            None => (WIDTH - 10.0, " stroke-dasharray=\"4 3\" fill-opacity=0.25"),
        };
        let fill = match op.outcome {
            Outcome::Sold => "#4a90d9",
            Outcome::SoldOut => "#e6a23c",
            Outcome::Unknown => "#999",
            Outcome::Read => "#67c23a",
            Outcome::Returned => "#9b59b6",
            Outcome::Busy => "#ccc",
        };
        let label = describe(history, i).en;
        let _ = writeln!(
            html,
            "<g><title>{}</title><rect x={x0:.1} y={y:.1} width={:.1} height={:.1} \
             fill=\"{fill}\" stroke=#333{open}/><text x={:.1} y={:.1}>{}</text></g>",
            escape(&label),
            x1 - x0,
            LANE - 10.0,
            x0 + 3.0,
            y + LANE / 2.0,
            escape(&short(op.outcome, op.unit, op.remaining)),
        );
    }
    if let Some(at) = decision.impossible_at {
        let xa = x(at);
        let _ = writeln!(
            html,
            "<line x1={xa:.1} x2={xa:.1} y1=0 y2={height} stroke=red stroke-width=2/>\
             <text x={:.1} y={} fill=red>no order by here</text>",
            xa + 4.0,
            height - 6.0
        );
    }
    html.push_str("</svg>\n<ul>\n");
    for &i in &ops {
        let _ = writeln!(html, "<li>{}</li>", escape(&describe(history, i).en));
    }
    html.push_str("</ul>\n");
}

fn short(outcome: Outcome, unit: Option<u32>, remaining: Option<u32>) -> String {
    match (outcome, unit, remaining) {
        (Outcome::Sold, Some(u), _) => format!("sold {u}"),
        (Outcome::Returned, Some(u), _) => format!("returned {u}"),
        (Outcome::Read, _, Some(r)) => format!("read {r}"),
        (other, _, _) => other.as_str().to_owned(),
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
