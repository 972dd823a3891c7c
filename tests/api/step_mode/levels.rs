//! Step mode as a game: a cell broken by hand is a level won (kept in the
//! browser, marked in the picker), compared with par (the checker's way as
//! played on this stack, once it was), and has a permalink that replays
//! the same run, move for move, the same way every time.

use serde_json::{Value, json};

use super::Page;
use crate::helpers::Stack;

/// What the verdict says against par.
async fn par_line(page: &Page<'_>) -> String {
    let line = page
        .browser
        .run("const p = document.querySelector('#verdict [data-field=par]'); return p ? p.textContent : ''")
        .await;
    line.as_str().unwrap().to_owned()
}

/// `none · race` was just broken by hand in `taken` steps, on a stack where
/// nobody played the checker's way yet.
pub(super) async fn a_broken_cell_is_a_level_won_against_par_with_a_permalink(
    page: &Page<'_>,
    stack: &Stack,
    taken: i64,
) {
    let browser = page.browser;
    assert_eq!(
        par_line(page).await,
        format!(
            "You broke it in {taken} steps. Par is not known on this stack yet: the checker's way (s), played to its end, sets it."
        )
    );
    // The level is won, in this browser.
    let levels = browser
        .run(
            "const o = document.querySelector('#cell option[value=\"none/race\"]');
             const levels = [...document.querySelectorAll('#cell option')].filter((x) => !x.disabled && x.dataset.level === 'break');
             return [o.dataset.won, o.textContent, document.getElementById('levels').textContent, levels.length,
                     JSON.parse(localStorage.getItem('stocklock.levels'))['none/race']]",
        )
        .await;
    let of = levels[3].as_u64().unwrap();
    assert!(of > 10, "{levels}");
    assert_eq!(
        levels,
        json!(["true", "✓ none · race", format!("Levels broken in this browser: 1 of {of}."), of, {"best": taken}])
    );
    let href = browser
        .run("return document.getElementById('permalink').getAttribute('href')")
        .await;
    let href = href.as_str().unwrap().to_owned();
    assert!(
        href.starts_with("/step?variant=none&scenario=race&moves="),
        "{href}"
    );
    let moves = browser.run("return JSON.stringify(view.steps)").await;

    // The checker's way, played by itself, sets par.
    let par = page.shortest_by_itself().await["steps"].as_i64().unwrap();
    assert_eq!(
        par_line(page).await,
        format!("Par for this cell on this stack: {par} steps.")
    );

    // The permalink, twice: the same moves, the same verdict, on fresh SKUs.
    let mut skus = Vec::new();
    for _ in 0..2 {
        browser.goto(&format!("{}{href}", stack.url)).await;
        browser
            .wait_until(
                "document.getElementById('replay') && !document.getElementById('replay').hidden",
            )
            .await;
        browser.press("r").await;
        browser
            .wait_until(&format!(
                "document.getElementById('step').dataset.replayed === '{taken}' && document.getElementById('step').dataset.over === 'true'"
            ))
            .await;
        let replayed = browser
            .run("return [JSON.stringify(view.steps), view.verdict.violation, view.sku]")
            .await;
        assert_eq!(replayed[0], moves, "the linked moves, replayed");
        assert_eq!(replayed[1], json!(true), "{replayed}");
        skus.push(replayed[2].clone());
        let compared = match taken.cmp(&par) {
            std::cmp::Ordering::Equal => {
                format!("You broke it at par: {taken} steps, as the checker's way.")
            }
            std::cmp::Ordering::Greater => format!(
                "You broke it in {taken} steps: {} over par ({par} steps, the checker's way on this stack).",
                taken - par
            ),
            std::cmp::Ordering::Less => format!(
                "You broke it in {taken} steps: {} under par ({par} steps)!",
                par - taken
            ),
        };
        assert_eq!(par_line(page).await, compared);
    }
    assert_ne!(skus[0], skus[1], "each replay on a SKU of its own");
    // In Chinese: the replay button, the fencing token's label; a gate's
    // name is code, the same in both languages.
    browser.click("#lang").await;
    let zh = browser
        .run("return [document.getElementById('replay').textContent, document.querySelector('#state [data-i18n=fence]').textContent,
                      [...document.querySelectorAll('#steps li code')].map((c) => c.textContent).includes('before_write')]")
        .await;
    assert_eq!(zh, json!(["重放链接里的这一轮 (r)", "栅栏令牌", true]));
    browser.click("#lang").await;
    let state = stack.state(skus[1].as_str().unwrap()).await;
    assert!(state.oversold > 0, "{state:?}");
    let _: Value = browser.run("return true").await;
}
