//! The record store trait and the values it reads and writes: versions, preconditions,
//! listings and their key ranges, and the outcome of a conditional write.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::call::StoreCall;
use super::error::{StoreError, StoreName};
use super::settings::kind::StoreKind;
use super::versions::VersionListing;

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

/// What a conditional put requires of the record it replaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Precondition {
    /// No record may be there (`If-None-Match: *`).
    Absent,
    /// The record must still be at this version (`If-Match`).
    Matches(Version),
}

impl Precondition {
    /// The version expected, if one is.
    pub fn expected(&self) -> Option<&Version> {
        match self {
            Precondition::Absent => None,
            Precondition::Matches(v) => Some(v),
        }
    }

    /// The refusal of a put under this precondition, with what the store holds if known.
    pub fn conflict(&self, found: Option<Version>) -> Conflict {
        Conflict {
            expected: self.expected().cloned(),
            found,
        }
    }
}

/// The put a write under a precondition makes: a create or an update.
impl From<&Precondition> for StoreCall {
    fn from(precondition: &Precondition) -> StoreCall {
        match precondition {
            Precondition::Absent => StoreCall::Create,
            Precondition::Matches(_) => StoreCall::Update,
        }
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

/// One record's bytes as they arrive, in order.
pub type Chunks = futures::stream::BoxStream<'static, Result<Vec<u8>, StoreError>>;

/// One record being read: its version, and its bytes as they arrive.
pub struct Streamed {
    /// Its version.
    pub version: Version,
    /// Its bytes.
    pub chunks: Chunks,
}

impl fmt::Debug for Streamed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Streamed")
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl From<Stored> for Streamed {
    fn from(stored: Stored) -> Self {
        Streamed {
            version: stored.version,
            chunks: Box::pin(futures::stream::once(std::future::ready(Ok(stored.bytes)))),
        }
    }
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

/// A slice of the key space in byte order: keys strictly after `after` and strictly before `before`.
///
/// `None` leaves that end open. Ranges are values: a reader splits a prefix into ranges
/// and lists them at once, and every kind returns only the keys inside, whatever its
/// server does with the bounds it is sent.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct KeyRange {
    /// Keys must sort strictly after this one.
    pub after: Option<String>,
    /// Keys must sort strictly before this one.
    pub before: Option<String>,
}

impl KeyRange {
    /// The range strictly after `after` and strictly before `before`.
    pub fn new(after: Option<String>, before: Option<String>) -> Self {
        KeyRange { after, before }
    }

    /// The range strictly after `after` up to and including `last` (its end is `last` + NUL,
    /// the next string in byte order), so ranges built this way tile the key space.
    pub fn through(after: Option<String>, last: Option<String>) -> Self {
        KeyRange {
            after,
            before: last.map(|mut l| {
                l.push('\0');
                l
            }),
        }
    }

    /// Whether `key` lies inside the range.
    pub fn contains(&self, key: &str) -> bool {
        self.after.as_deref().is_none_or(|a| key > a)
            && self.before.as_deref().is_none_or(|b| key < b)
    }

    /// Whether `key` lies at or past the end, so no later key in byte order is inside.
    pub fn is_past(&self, key: &str) -> bool {
        self.before.as_deref().is_some_and(|b| key >= b)
    }

    /// Whether no key after `key` can lie inside: the end is at most `key`'s successor.
    pub fn ends_after(&self, key: &str) -> bool {
        self.before.as_deref().is_some_and(|b| {
            b <= key || (b.len() == key.len() + 1 && b.starts_with(key) && b.ends_with('\0'))
        })
    }

    /// The end bound as a server may take it: `before` unless it holds a NUL, which some
    /// servers refuse in a query; then none (the listing is cut here instead).
    pub fn wire_before(&self) -> Option<&str> {
        self.before.as_deref().filter(|b| !b.contains('\0'))
    }
}

/// How a kind's listing honours the start of a [`KeyRange`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeStart {
    /// The server starts the listing after the range's start (S3 `StartAfter`, GCS
    /// `startOffset`, Azure `startFrom`, the local folder): ranges listed at once cost one
    /// request each.
    Server,
    /// The listing starts at the prefix and is filtered here: correct, but each range
    /// pages from the prefix's start, so a reader lists in plain pages instead.
    Filtered,
}

/// The store's own clock, as one of its answers told it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreTime {
    /// The time the store gave: an answer's `Date`, or a file's modification time.
    pub at: SystemTime,
    /// How coarse `at` is: the store's time lay in `[at, at + resolution)` (a `Date` is to the second).
    pub resolution: Duration,
}

impl StoreTime {
    /// A time from an HTTP `Date` header (to the second); `None` when the value is not one.
    pub fn from_http_date(value: &str) -> Option<StoreTime> {
        Some(StoreTime {
            at: httpdate::parse_http_date(value).ok()?,
            resolution: Duration::from_secs(1),
        })
    }
}

/// A store's answer that should have told its time did not.
#[derive(Debug, Error)]
#[error("the store's answer carried no usable Date header")]
pub struct NoStoreTime;

/// A conditional write that the store refused because the record was not as expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The version the writer expected (none: it expected no record).
    pub expected: Option<Version>,
    /// The version the store holds (none: no record), when it could be read.
    pub found: Option<Version>,
}

/// The outcome of one conditional write: it landed (with what it gives back), or it was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteOutcome<T> {
    /// The write landed: a put's new version, or `()` for a delete.
    Written(T),
    /// The store refused the write; nothing was changed.
    Conflict(Conflict),
}

/// A place that keeps records and decides every write with one atomic conditional request.
///
/// Concurrency duty: any number of writers, in this process or others, may call every
/// method at once; the store alone decides which conditional write lands, and a refused
/// write changes nothing.
#[async_trait]
pub trait RecordStore: Send + Sync + fmt::Debug {
    /// A short description for messages, e.g. `s3://bucket` or `local:/path`.
    fn describe(&self) -> String;

    /// The store's kind.
    fn kind(&self) -> StoreKind;

    /// Its kind and description, as a failed call names it.
    fn name(&self) -> StoreName {
        StoreName::new(self.kind(), self.describe())
    }

    /// Read one record; `None` when it does not exist.
    async fn get(&self, key: &str) -> Result<Option<Stored>, StoreError>;

    /// Read one record as its bytes arrive (a large one can be worked on before its last
    /// byte); `None` when it does not exist. By default, its bytes as one chunk.
    async fn get_streamed(&self, key: &str) -> Result<Option<Streamed>, StoreError> {
        Ok(self.get(key).await?.map(Streamed::from))
    }

    /// One page of the keys under `prefix`, in byte order, starting after `token`'s position.
    async fn list_page(&self, prefix: &str, token: Option<String>) -> Result<Page, StoreError>;

    /// Write `bytes` at `key` only if the record there meets `precondition`.
    async fn put(
        &self,
        key: &str,
        bytes: &[u8],
        precondition: &Precondition,
    ) -> Result<WriteOutcome<Version>, StoreError>;

    /// Delete the record at `key` only if its version is still `expected` (`If-Match`).
    async fn delete(&self, key: &str, expected: &Version) -> Result<WriteOutcome<()>, StoreError>;

    // The object-version API (records history, restore, log): additive, read-only.

    /// Every stored version of the keys under `prefix` (all pages), each key's newest first,
    /// and whether the store keeps old versions at all ([`History`](super::versions::History)).
    async fn list_versions(&self, prefix: &str) -> Result<VersionListing, StoreError>;

    /// The bytes of one stored version of `key` (its `version_id` from [`RecordStore::list_versions`]);
    /// `None` when that version is gone or is a delete.
    async fn get_version(&self, key: &str, version_id: &str) -> Result<Option<Stored>, StoreError>;
    /// The store's clock, from one small request about `key` (whether or not it exists):
    /// the `Date` of its answer, or on a local folder a probe file's modification time.
    async fn store_time(&self, key: &str) -> Result<StoreTime, StoreError>;

    // Range listing: many listings of one prefix at once, each over its own key range.

    /// How this kind's listing honours a range's start; the default only filters.
    fn range_start(&self) -> RangeStart {
        RangeStart::Filtered
    }

    /// One page of the keys under `prefix` inside `range`, in byte order, of about `limit` keys
    /// at most (capped at the kind's page size); `token` continues a page this call returned.
    ///
    /// Only keys inside the range are returned, and `next` is `None` once the range's end is
    /// reached. A key created or deleted during the listing is listed or not, like any listing;
    /// every key present throughout is listed. The default pages through
    /// [`RecordStore::list_page`] from the prefix's start and filters.
    async fn list_range_page(
        &self,
        prefix: &str,
        range: &KeyRange,
        limit: usize,
        token: Option<String>,
    ) -> Result<Page, StoreError> {
        let _ = limit;
        let page = self.list_page(prefix, token).await?;
        Ok(within(page, range))
    }

    /// Write `bytes` at `key` only if no record is there (`If-None-Match: *`).
    async fn create(&self, key: &str, bytes: &[u8]) -> Result<WriteOutcome<Version>, StoreError> {
        self.put(key, bytes, &Precondition::Absent).await
    }

    /// Replace the record at `key` only if its version is still `expected` (`If-Match`).
    async fn update(
        &self,
        key: &str,
        bytes: &[u8],
        expected: &Version,
    ) -> Result<WriteOutcome<Version>, StoreError> {
        self.put(key, bytes, &Precondition::Matches(expected.clone()))
            .await
    }
}

/// A shared handle on a record store.
pub type DynStore = Arc<dyn RecordStore>;

/// The part of `page` inside `range`; no next page once the page reached the range's end.
pub fn within(page: Page, range: &KeyRange) -> Page {
    let past = page.items.last().is_some_and(|l| range.ends_after(&l.key));
    let items = page
        .items
        .into_iter()
        .filter(|l| range.contains(&l.key))
        .collect();
    Page {
        items,
        next: if past { None } else { page.next },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_through_a_key_tile_the_key_space() {
        let a = KeyRange::through(None, Some("k5".into()));
        let b = KeyRange::through(Some("k5".into()), Some("k9".into()));
        let c = KeyRange::new(Some("k9".into()), None);
        for key in ["", "k", "k5", "k5\0", "k50", "k6", "k9", "k9\0", "k90", "z"] {
            let n = [&a, &b, &c].iter().filter(|r| r.contains(key)).count();
            assert_eq!(n, 1, "{key:?}");
        }
        assert!(b.ends_after("k9") && !b.ends_after("k8") && b.ends_after("k90"));
        assert!(!c.ends_after("zzz"));
        assert_eq!(b.wire_before(), None);
        assert_eq!(
            KeyRange::new(None, Some("p/".into())).wire_before(),
            Some("p/")
        );
    }
}
