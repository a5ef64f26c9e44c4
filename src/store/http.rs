//! What the cloud store kinds share on the wire: the HTTP client, backoff between tries, and error bodies cut short.

use std::time::Duration;

use thiserror::Error;

use super::StoreError;

/// How long one HTTP request of a cloud store may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// How much of an error body a message keeps.
pub const BODY_SHOWN: usize = 400;

/// The HTTP client the Azure and GCS stores send their direct requests with.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .build()
        .unwrap_or_default()
}

/// Sleep before try `attempt` (1, 2, ...): `base_ms` doubled per try up to 64x, plus jitter.
pub async fn backoff(attempt: u32, base_ms: u64) {
    let base = base_ms << attempt.min(6);
    let jitter = rand::random::<u64>() % base.max(1);
    tokio::time::sleep(Duration::from_millis(base + jitter)).await;
}

/// An HTTP answer a store did not expect: its status and the start of its body.
#[derive(Debug, Error)]
#[error("HTTP {status}: {body}")]
pub struct UnexpectedStatus {
    /// The status code.
    pub status: u16,
    /// The first [`BODY_SHOWN`] characters of the body.
    pub body: String,
}

impl UnexpectedStatus {
    /// Read `response` into the error it is.
    pub async fn of(response: reqwest::Response) -> Self {
        let status = response.status().as_u16();
        let body = response.text().await.unwrap_or_default();
        UnexpectedStatus {
            status,
            body: body.chars().take(BODY_SHOWN).collect(),
        }
    }
}

/// The store error for an unexpected answer to `op` on `key`.
pub async fn unexpected(
    store: String,
    op: &'static str,
    key: &str,
    response: reqwest::Response,
) -> StoreError {
    StoreError::new(store, op, key, UnexpectedStatus::of(response).await)
}
