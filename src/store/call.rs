//! Which record store call a failure, a span or a metric names.

use std::fmt;

/// One kind of record store call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StoreCall {
    /// Read one record.
    Get,
    /// List keys.
    List,
    /// Write a record where none may be (`If-None-Match: *`).
    Create,
    /// Replace a record at a version (`If-Match`).
    Update,
    /// Delete a record at a version.
    Delete,
    /// Ask about a record without its bytes.
    Head,
    /// Read the store's clock.
    Time,
    /// List the stored versions of keys.
    ListVersions,
    /// Read one stored version.
    GetVersion,
    /// Reach the store's client before any call.
    Connect,
    /// A call about the store itself (its settings), not a record.
    Admin,
    /// Read a GCS bucket's metadata.
    BucketsGet,
    /// Change a GCS bucket's settings.
    BucketsPatch,
}

impl StoreCall {
    /// The name messages, spans and metrics give it.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreCall::Get => "get",
            StoreCall::List => "list",
            StoreCall::Create => "create",
            StoreCall::Update => "update",
            StoreCall::Delete => "delete",
            StoreCall::Head => "head",
            StoreCall::Time => "time",
            StoreCall::ListVersions => "list_versions",
            StoreCall::GetVersion => "get_version",
            StoreCall::Connect => "connect",
            StoreCall::Admin => "admin",
            StoreCall::BucketsGet => "buckets.get",
            StoreCall::BucketsPatch => "buckets.patch",
        }
    }
}

impl fmt::Display for StoreCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
