//! An HTTP answer a store did not expect, with the start of its body.

use thiserror::Error;

/// How much of an error body a message keeps.
pub const BODY_SHOWN: usize = 400;

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
