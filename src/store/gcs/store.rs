//! The GCS store as a record store, and the settings that build it and its guard.

use async_trait::async_trait;

use super::client::GcsStore;
use super::settings::GcsSettings;
use super::{safety, versions};
use crate::store::call::StoreCall;
use crate::store::error::StoreError;
use crate::store::guard::WriteGuard;
use crate::store::open::StoreConfig;
use crate::store::record_store::{
    DynStore, KeyRange, Page, Precondition, RangeStart, RecordStore, StoreTime, Stored, Version,
    WriteOutcome, within,
};
use crate::store::settings::kind::StoreKind;
use crate::store::versions::VersionListing;

#[async_trait]
impl StoreConfig for GcsSettings {
    async fn store(&self, _root: &std::path::Path) -> DynStore {
        std::sync::Arc::new(GcsStore::connect(self))
    }

    fn guard(&self) -> Option<std::sync::Arc<dyn WriteGuard>> {
        safety::guard(self)
    }
}

#[async_trait]
impl RecordStore for GcsStore {
    fn describe(&self) -> String {
        format!("gs://{}", self.bucket)
    }

    fn kind(&self) -> StoreKind {
        StoreKind::Gcs
    }

    async fn get(&self, key: &str) -> Result<Option<Stored>, StoreError> {
        // The generation first, then that generation's bytes: a pair that belongs together
        // (a newer write in between makes the old generation 404; read again).
        for _ in 0..5 {
            let Some(object) = self.metadata(key).await? else {
                return Ok(None);
            };
            let version = object.version();
            let url = self.object_url(key);
            let response = self
                .send(StoreCall::Get, key, |http| {
                    http.get(&url)
                        .query(&[("alt", "media"), ("generation", version.token.as_str())])
                })
                .await?;
            match response.status().as_u16() {
                200 => {
                    let bytes = response
                        .bytes()
                        .await
                        .map_err(|e| self.fail(StoreCall::Get, key, e))?;
                    return Ok(Some(Stored {
                        bytes: Vec::from(bytes),
                        version,
                    }));
                }
                404 => continue,
                _ => return Err(self.error(StoreCall::Get, key, response).await),
            }
        }
        Err(self.fail(
            StoreCall::Get,
            key,
            "the record kept changing while it was read",
        ))
    }

    async fn list_page(&self, prefix: &str, token: Option<String>) -> Result<Page, StoreError> {
        self.list_in(prefix, &KeyRange::default(), self.page_size, token)
            .await
    }

    fn range_start(&self) -> RangeStart {
        RangeStart::Server
    }

    async fn list_range_page(
        &self,
        prefix: &str,
        range: &KeyRange,
        limit: usize,
        token: Option<String>,
    ) -> Result<Page, StoreError> {
        let limit = limit.clamp(1, self.page_size);
        let page = self.list_in(prefix, range, limit, token).await?;
        // startOffset is inclusive and emulators may ignore both offsets: cut the range here.
        Ok(within(page, range))
    }

    async fn put(
        &self,
        key: &str,
        bytes: &[u8],
        precondition: &Precondition,
    ) -> Result<WriteOutcome<Version>, StoreError> {
        self.upload(key, bytes, precondition).await
    }

    async fn delete(&self, key: &str, expected: &Version) -> Result<WriteOutcome<()>, StoreError> {
        let url = self.object_url(key);
        let response = self
            .send(StoreCall::Delete, key, |http| {
                http.delete(&url)
                    .query(&[("ifGenerationMatch", expected.token.as_str())])
            })
            .await?;
        match response.status().as_u16() {
            200..=299 => Ok(WriteOutcome::Written(())),
            412 | 404 => Ok(WriteOutcome::Conflict(
                Precondition::Matches(expected.clone())
                    .conflict(self.metadata(key).await?.map(|o| o.version())),
            )),
            _ => Err(self.error(StoreCall::Delete, key, response).await),
        }
    }

    async fn list_versions(&self, prefix: &str) -> Result<VersionListing, StoreError> {
        versions::list(self, prefix).await
    }

    async fn store_time(&self, key: &str) -> Result<StoreTime, StoreError> {
        self.clock(key).await
    }

    async fn get_version(&self, key: &str, version_id: &str) -> Result<Option<Stored>, StoreError> {
        versions::get(self, key, version_id).await
    }
}
