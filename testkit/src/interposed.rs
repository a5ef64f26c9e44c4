//! A real store with a test's hand on its calls: one key's write held once until the test
//! releases it, and deletes refused while the test says so. Every other call passes through.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use choudoufu_live::store::{
    DynStore, KeyRange, Page, Precondition, RangeStart, RecordStore, StoreCall, StoreError,
    StoreKind, StoreName, StoreTime, Stored, Version, VersionListing, WriteOutcome,
};
use tokio::sync::Notify;

/// `inner`, with the test's hand on its writes and deletes.
#[derive(Debug)]
pub struct Interposed {
    inner: DynStore,
    /// The key whose first write waits until [`Interposed::release`], if any.
    held_key: Option<String>,
    /// Notified when that write arrives.
    pub held: Arc<Notify>,
    /// Notified to let it go.
    pub release: Arc<Notify>,
    once: AtomicBool,
    refusing: AtomicBool,
    /// Deletes refused so far.
    pub refused: AtomicUsize,
}

impl Interposed {
    /// `inner` with nothing held or refused yet.
    pub fn new(inner: DynStore) -> Interposed {
        Interposed {
            inner,
            held_key: None,
            held: Arc::default(),
            release: Arc::default(),
            once: AtomicBool::new(true),
            refusing: AtomicBool::new(false),
            refused: AtomicUsize::new(0),
        }
    }

    /// The first write of `key` waits: [`Interposed::held`] is notified as it arrives, and it goes on once [`Interposed::release`] is.
    pub fn holding_put(mut self, key: impl Into<String>) -> Interposed {
        self.held_key = Some(key.into());
        self
    }

    /// Refuse every delete from now on (`true`), as a store that answers 500, or let them through again.
    pub fn refuse_deletes(&self, refuse: bool) {
        self.refusing.store(refuse, Ordering::SeqCst);
    }
}

#[async_trait::async_trait]
impl RecordStore for Interposed {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn kind(&self) -> StoreKind {
        self.inner.kind()
    }
    async fn get(&self, key: &str) -> Result<Option<Stored>, StoreError> {
        self.inner.get(key).await
    }
    async fn list_page(&self, prefix: &str, token: Option<String>) -> Result<Page, StoreError> {
        self.inner.list_page(prefix, token).await
    }
    async fn put(
        &self,
        key: &str,
        bytes: &[u8],
        precondition: &Precondition,
    ) -> Result<WriteOutcome<Version>, StoreError> {
        if self.held_key.as_deref() == Some(key) && self.once.swap(false, Ordering::SeqCst) {
            self.held.notify_one();
            self.release.notified().await;
        }
        self.inner.put(key, bytes, precondition).await
    }
    async fn delete(&self, key: &str, expected: &Version) -> Result<WriteOutcome<()>, StoreError> {
        if self.refusing.load(Ordering::SeqCst) {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return Err(StoreError::new(
                StoreName::new(self.inner.kind(), self.inner.describe()),
                StoreCall::Delete,
                key,
                std::io::Error::other("InternalError: refused by the test"),
            ));
        }
        self.inner.delete(key, expected).await
    }
    async fn list_versions(&self, prefix: &str) -> Result<VersionListing, StoreError> {
        self.inner.list_versions(prefix).await
    }
    async fn get_version(&self, key: &str, version_id: &str) -> Result<Option<Stored>, StoreError> {
        self.inner.get_version(key, version_id).await
    }
    async fn store_time(&self, key: &str) -> Result<StoreTime, StoreError> {
        self.inner.store_time(key).await
    }
    fn range_start(&self) -> RangeStart {
        self.inner.range_start()
    }
    async fn list_range_page(
        &self,
        prefix: &str,
        range: &KeyRange,
        limit: usize,
        token: Option<String>,
    ) -> Result<Page, StoreError> {
        self.inner
            .list_range_page(prefix, range, limit, token)
            .await
    }
}
