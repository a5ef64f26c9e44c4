//! What the cloud store kinds share on the wire: the HTTP client, what an answer says about
//! trying again, and the error an unexpected answer is.

use std::future::Future;
use std::time::Duration;

use thiserror::Error;

use super::call::StoreCall;
use super::error::{StoreError, StoreName};
use super::record_store::{NoStoreTime, StoreTime};
use super::retry::{self, RetryPolicy, Verdict};
use super::unexpected::UnexpectedStatus;

/// How long one HTTP request of a cloud store may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The HTTP client could not be built (no TLS backend, say): no request can be sent.
#[derive(Debug, Error)]
#[error("the HTTP client could not be built: {0}")]
pub struct ClientError(#[source] pub reqwest::Error);

/// The HTTP client the Azure and GCS stores send their direct requests with, each request bounded by [`REQUEST_TIMEOUT`] and its connection by [`retry::connect_timeout`].
pub fn client() -> Result<reqwest::Client, ClientError> {
    reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .connect_timeout(retry::connect_timeout())
        .build()
        .map_err(ClientError)
}

/// What one direct request's outcome says about trying again: a busy or failing service
/// (408, 429, 5xx) or no answer at all may be tried again (a store never connected to, for less
/// long); any other answer stands.
pub fn verdict(outcome: &Result<reqwest::Response, reqwest::Error>) -> Verdict {
    match outcome {
        Ok(response) => match response.status().as_u16() {
            408 | 429 | 500..=599 => Verdict::Busy,
            _ => Verdict::Final,
        },
        // A request that could not be built is not mended by sending it again.
        Err(e) if e.is_builder() => Verdict::Final,
        Err(e) if super::error::unreached(e) => Verdict::Unreached,
        Err(_) => Verdict::NoAnswer,
    }
}

/// One direct request under `policy`, each try made by `attempt` (which may fail before sending, with a store error that stands): the last try's answer or transport error.
pub async fn retried<F, Fut>(
    policy: &RetryPolicy,
    attempt: F,
) -> Result<Result<reqwest::Response, reqwest::Error>, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Result<reqwest::Response, reqwest::Error>, StoreError>>,
{
    policy
        .run(attempt, |o: &Result<_, StoreError>| {
            o.as_ref().map_or(Verdict::Final, verdict)
        })
        .await
}

/// The store error for an unexpected answer to `op` on `key`.
pub async fn unexpected(
    store: StoreName,
    op: StoreCall,
    key: &str,
    response: reqwest::Response,
) -> StoreError {
    StoreError::new(store, op, key, UnexpectedStatus::of(response).await)
}

/// The store's time from an answer to `op` on `key` that should tell it (a found or missing
/// object): its `Date`; any other answer is the store error it is.
pub async fn time_of(
    store: StoreName,
    op: StoreCall,
    key: &str,
    response: reqwest::Response,
) -> Result<StoreTime, StoreError> {
    if !matches!(response.status().as_u16(), 200..=299 | 404) {
        return Err(unexpected(store, op, key, response).await);
    }
    response
        .headers()
        .get(reqwest::header::DATE)
        .and_then(|d| d.to_str().ok())
        .and_then(StoreTime::from_http_date)
        .ok_or_else(|| StoreError::new(store, op, key, NoStoreTime))
}
