//! What a kind's settings build: its store and its write guard, as vector's sink config
//! builds a sink and its health check. `StoreSettings` dispatches to its kind once.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;

use super::guard::WriteGuard;
use super::record_store::DynStore;

/// A kind's settings, as the builder of its store and of the guard checked before its first write.
#[async_trait]
pub trait StoreConfig: Send + Sync {
    /// Open the kind's store (a relative local path is taken from `root`), untraced.
    async fn store(&self, root: &Path) -> DynStore;

    /// The guard checked before a run's first write; none with `skip_bucket_checks`, or for a kind with nothing to check.
    fn guard(&self) -> Option<Arc<dyn WriteGuard>>;
}

/// A store opened from its settings, traced, with its kind's write guard.
#[derive(Debug)]
pub struct Opened {
    /// The store, in its traced wrapper.
    pub store: DynStore,
    /// The guard checked before the first write, if the kind has one.
    pub guard: Option<Arc<dyn WriteGuard>>,
}
