//! The write guard: a check a store kind makes once, before a run's first write.
//!
//! Concurrency duty: a guard may be called by several writers of one run at once; the
//! session calls it at most once per run and waits for its answer before any write.

use std::sync::Arc;

use async_trait::async_trait;
use thiserror::Error;

use super::settings::StoreSettings;

/// A check made once, before a session's first write (the record store bucket's safety).
#[async_trait]
pub trait WriteGuard: Send + Sync + std::fmt::Debug {
    /// Pass, or say why nothing may be written.
    async fn check(&self) -> Result<(), UnsafeRecordStore>;
}

/// The record store's bucket is not safe to keep records in; nothing was written.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error(
    "UnsafeRecordStore: {store} is not safe to keep records in; nothing was written.\n{}\nTo proceed anyway (unsafe), set skip_bucket_checks = true in the record_store block.",
    problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n")
)]
pub struct UnsafeRecordStore {
    /// The store, e.g. `s3://bucket`.
    pub store: String,
    /// Each failing setting, with the command that fixes it.
    pub problems: Vec<String>,
}

/// The guard a store kind's settings ask for, if any.
pub fn guard_for(settings: &StoreSettings) -> Option<Arc<dyn WriteGuard>> {
    match settings {
        StoreSettings::S3(s3) => {
            super::s3::bucket::guard_for_s3(s3).map(|g| Arc::new(g) as Arc<dyn WriteGuard>)
        }
        StoreSettings::Local(_) | StoreSettings::Azure(_) | StoreSettings::Gcs(_) => None,
    }
}
