//! Every page's console in a real browser: no request of a page fails
//! (a 404 for the icon on every page, a 404 each second from the soak
//! page's poll while no soak runs, as there were), no script error.

use super::Browser;
use crate::helpers::Stack;

#[tokio::test]
async fn no_page_logs_an_error_in_the_console() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let stack = Stack::start(1, None).await;
    // Each page, with what shows it has done its first requests.
    let pages = [
        (
            "/",
            "document.querySelector('#live').dataset.live === 'true'",
        ),
        (
            "/lessons",
            "document.querySelectorAll('section.step').length > 0",
        ),
        ("/soak", "!document.getElementById('none').hidden"),
        (
            "/step",
            "document.querySelectorAll('#cell option').length > 20",
        ),
        (
            "/classroom",
            "document.getElementById('classroom').dataset.open !== 'unknown'",
        ),
    ];
    let mut errors = Vec::new();
    for (path, ready) in pages {
        // As the teacher opens them: with the admin token.
        let url = format!("{}{path}#token={}", stack.url, stack.token);
        browser.goto(&url).await;
        browser.wait_until(ready).await;
        // The soak page polls every second: three polls, all quiet.
        if path == "/soak" {
            browser.polls("/api/soak", 3).await;
        }
        for entry in browser.console().await {
            if entry["level"] == "SEVERE" {
                errors.push(format!("{path}: {}", entry["message"]));
            }
        }
    }
    assert!(errors.is_empty(), "{errors:#?}");
    browser.quit().await;
    stack.stop().await;
}
