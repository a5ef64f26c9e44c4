//! Record stores: where records live, and the conditional writes each kind makes.

pub mod azure;
pub mod gcs;
pub mod local;
pub mod s3;
pub mod traced;

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::StoreError;

/// The store's token for one record's content (S3 ETag and version ID; local content hash).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Version {
    /// The token conditional writes are made against, exactly as the store handed it back.
    pub token: String,
    /// A further identifier the store gave (S3 version ID with bucket versioning on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_id: Option<String>,
}

impl Version {
    /// A version with only a token.
    pub fn new(token: impl Into<String>) -> Self {
        Version {
            token: token.into(),
            version_id: None,
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.token.trim_matches('"'))
    }
}

/// One record's bytes with their version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    /// The record's bytes.
    pub bytes: Vec<u8>,
    /// Its version.
    pub version: Version,
}

/// One key of a listing with its version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    /// The full store key.
    pub key: String,
    /// Its version as listed.
    pub version: Version,
}

/// One page of a listing.
#[derive(Clone, Debug, Default)]
pub struct Page {
    /// Keys in byte order.
    pub items: Vec<Listed>,
    /// Token for the next page, if there is one.
    pub next: Option<String>,
}

/// A conditional write that the store refused because the record was not as expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The version the writer expected (none: it expected no record).
    pub expected: Option<Version>,
    /// The version the store holds (none: no record), when it could be read.
    pub found: Option<Version>,
}

/// The outcome of one conditional write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The write landed; the record now has this version (none after a delete).
    Written(Option<Version>),
    /// The store refused the write; nothing was changed.
    Conflict(Conflict),
}

/// A place that keeps records and decides every write with one atomic conditional request.
#[async_trait]
pub trait RecordStore: Send + Sync + fmt::Debug {
    /// A short description for messages, e.g. `s3://bucket` or `local:/path`.
    fn describe(&self) -> String;

    /// Read one record; `None` when it does not exist.
    async fn get(&self, key: &str) -> Result<Option<Stored>, StoreError>;

    /// One page of the keys under `prefix`, in byte order, starting after `token`'s position.
    async fn list_page(&self, prefix: &str, token: Option<String>) -> Result<Page, StoreError>;

    /// Write `bytes` at `key` only if no record is there (`If-None-Match: *`).
    async fn create(&self, key: &str, bytes: &[u8]) -> Result<WriteOutcome, StoreError>;

    /// Replace the record at `key` only if its version is still `expected` (`If-Match`).
    async fn update(
        &self,
        key: &str,
        bytes: &[u8],
        expected: &Version,
    ) -> Result<WriteOutcome, StoreError>;

    /// Delete the record at `key` only if its version is still `expected` (`If-Match`).
    async fn delete(&self, key: &str, expected: &Version) -> Result<WriteOutcome, StoreError>;
}

/// A shared handle on a record store.
pub type DynStore = Arc<dyn RecordStore>;

/// Every key and version under `prefix`, following pages to the end.
pub async fn list_all(store: &dyn RecordStore, prefix: &str) -> Result<Vec<Listed>, StoreError> {
    let mut out = Vec::new();
    let mut token = None;
    loop {
        let page = store.list_page(prefix, token).await?;
        out.extend(page.items);
        match page.next {
            Some(t) => token = Some(t),
            None => return Ok(out),
        }
    }
}

/// A conditional put that recognises its own earlier try.
///
/// When the store refuses the write but now holds exactly `bytes` (which carry this run's
/// unique writer stamp), an earlier try of this same write landed and only its answer was
/// lost: that is this run's own write, not a conflict.
pub async fn put_conditional(
    store: &dyn RecordStore,
    key: &str,
    bytes: &[u8],
    expected: Option<&Version>,
) -> Result<WriteOutcome, StoreError> {
    use tracing::Instrument;
    let kind = crate::telemetry::store_kind(&store.describe());
    let op = if expected.is_some() {
        "update"
    } else {
        "create"
    };
    let span = tracing::info_span!(
        "store.put_conditional",
        store.kind = kind,
        store.op = op,
        key = %key,
        bytes = bytes.len(),
        outcome = tracing::field::Empty,
        latency_ms = tracing::field::Empty,
        own_retry = tracing::field::Empty,
        version = tracing::field::Empty,
        expected.version = tracing::field::Empty,
        found.version = tracing::field::Empty,
        conflict.address = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    if let Some(v) = expected {
        span.record("expected.version", tracing::field::display(v));
    }
    let started = std::time::Instant::now();
    let result = put_conditional_untraced(store, key, bytes, expected)
        .instrument(span.clone())
        .await;
    let outcome = traced::write_outcome(&span, key, &result);
    span.record("outcome", outcome);
    span.record("latency_ms", crate::telemetry::elapsed_ms(started));
    if outcome == "error" {
        span.record("otel.status_code", "ERROR");
    }
    result
}

async fn put_conditional_untraced(
    store: &dyn RecordStore,
    key: &str,
    bytes: &[u8],
    expected: Option<&Version>,
) -> Result<WriteOutcome, StoreError> {
    let outcome = match expected {
        None => store.create(key, bytes).await?,
        Some(v) => store.update(key, bytes, v).await?,
    };
    match outcome {
        WriteOutcome::Conflict(conflict) => match store.get(key).await? {
            Some(stored) if stored.bytes == bytes && !crate::cut::cut("own-write") => {
                tracing::Span::current().record("own_retry", true);
                Ok(WriteOutcome::Written(Some(stored.version)))
            }
            Some(stored) => Ok(WriteOutcome::Conflict(Conflict {
                expected: conflict.expected,
                found: Some(stored.version),
            })),
            None => Ok(WriteOutcome::Conflict(Conflict {
                expected: conflict.expected,
                found: None,
            })),
        },
        written => Ok(written),
    }
}

/// The safety check a store kind makes before a run's first write, if any.
pub fn guard_for(
    settings: &crate::config::StoreSettings,
    _store: &DynStore,
) -> Option<Arc<dyn crate::session::WriteGuard>> {
    match settings {
        crate::config::StoreSettings::S3(s3) => crate::bucket::guard_for_s3(s3)
            .map(|g| Arc::new(g) as Arc<dyn crate::session::WriteGuard>),
        crate::config::StoreSettings::Local { .. }
        | crate::config::StoreSettings::Azure(_)
        | crate::config::StoreSettings::Gcs(_) => None,
    }
}

/// Open the record store a root's settings name (relative local paths are taken from `root`).
pub async fn open(settings: &crate::config::StoreSettings, root: &std::path::Path) -> DynStore {
    match settings {
        crate::config::StoreSettings::Local { path } => {
            let path = if path.is_absolute() {
                path.clone()
            } else {
                root.join(path)
            };
            Arc::new(traced::Traced::new(Arc::new(local::LocalStore::new(path))))
        }
        crate::config::StoreSettings::S3(s3) => Arc::new(traced::Traced::new(Arc::new(
            s3::S3Store::connect(s3).await,
        ))),
        crate::config::StoreSettings::Azure(az) => Arc::new(traced::Traced::new(Arc::new(
            azure::AzureStore::connect(az),
        ))),
        crate::config::StoreSettings::Gcs(gcs) => {
            Arc::new(traced::Traced::new(Arc::new(gcs::GcsStore::connect(gcs))))
        }
    }
}
