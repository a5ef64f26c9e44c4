//! The error every store kind raises for a call that failed other than by a conditional-write conflict.

use thiserror::Error;

/// The cause of a failed store call: the SDK's, HTTP client's or file system's own error.
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A record store call failed for a reason other than a conditional-write conflict.
#[derive(Debug, Error)]
#[error("record store {store}: {op} {key} failed: {message}")]
pub struct StoreError {
    /// The store, e.g. `s3://bucket`.
    pub store: String,
    /// The operation: get, list, create, update, delete, head.
    pub op: &'static str,
    /// The key concerned (the prefix, for a listing).
    pub key: String,
    /// What the store said, as the user reads it.
    pub message: String,
    /// The underlying error.
    #[source]
    pub source: Cause,
}

impl StoreError {
    /// A failed `op` on `key` of `store`, caused by `source` (whose text is the message).
    pub fn new(
        store: impl Into<String>,
        op: &'static str,
        key: impl Into<String>,
        source: impl Into<Cause>,
    ) -> Self {
        let source = source.into();
        StoreError {
            store: store.into(),
            op,
            key: key.into(),
            message: source.to_string(),
            source,
        }
    }

    /// The same error with a fuller message than the cause's own text (e.g. the SDK's error context).
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }
}
