//! A request the stack refused, typed so that a caller can tell a store
//! away (503) from a bad request, and the books read again while it is.

use std::time::Duration;

use super::StackClient;
use crate::wire::StateSnapshot;

/// A request the stack answered with an error status: what was asked,
/// the status and the body.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {status}: {body}")]
pub struct Refused {
    pub what: String,
    pub status: reqwest::StatusCode,
    pub body: String,
}

impl Refused {
    /// Whether `err` is a 503: a store the stack could not reach.
    pub fn is_unavailable(err: &anyhow::Error) -> bool {
        err.downcast_ref::<Refused>()
            .is_some_and(|r| r.status == reqwest::StatusCode::SERVICE_UNAVAILABLE)
    }
}

impl StackClient {
    /// [`StackClient::states`], asked again while the stack answers 503
    /// (`while_unavailable`): the books read after a run must not lose
    /// the run to a store that stalled past its one-second timeout (a
    /// Redis starved of CPU on a loaded machine). A read is safe to repeat.
    pub async fn states_retried(&self, skus: &[String]) -> anyhow::Result<Vec<StateSnapshot>> {
        while_unavailable("the books could not be read", || self.states(skus)).await
    }

    /// [`StackClient::reset`], asked again while the stack answers 503
    /// (`while_unavailable`): a reset sets the SKU's books whole, in one
    /// script, so one repeated leaves them as one that ran once.
    pub async fn reset_retried(
        &self,
        sku: &str,
        stock: i64,
        buckets: u32,
    ) -> anyhow::Result<StateSnapshot> {
        while_unavailable("a reset was not answered", || {
            self.reset(sku, stock, buckets)
        })
        .await
    }
}

/// Runs `ask`, and again (twice at most, 200 ms apart) while the stack
/// answers 503; a store still away after the third answer is the error.
async fn while_unavailable<T, F, Fut>(what: &str, ask: F) -> anyhow::Result<T>
where
    F: Fn() -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let mut retries = 2;
    loop {
        match ask().await {
            Err(err) if retries > 0 && Refused::is_unavailable(&err) => {
                retries -= 1;
                tracing::warn!(%err, "{what}; asking again");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            answer => return answer,
        }
    }
}
