//! The Azure store as a record store, and the settings that build it and its guard.

use async_trait::async_trait;
use object_store::ObjectStoreExt;
use reqwest::Method;

use super::client::{AzureStore, version};
use super::settings::AzureSettings;
use super::{safety, versions};
use crate::store::call::StoreCall;
use crate::store::error::StoreError;
use crate::store::guard::WriteGuard;
use crate::store::http;
use crate::store::open::StoreConfig;
use crate::store::record_store::{
    DynStore, KeyRange, Page, Precondition, RangeStart, RecordStore, StoreTime, Stored, Version,
    WriteOutcome,
};
use crate::store::settings::kind::StoreKind;
use crate::store::versions::VersionListing;

#[async_trait]
impl StoreConfig for AzureSettings {
    async fn store(&self, _root: &std::path::Path) -> DynStore {
        std::sync::Arc::new(AzureStore::connect(self))
    }

    fn guard(&self) -> Option<std::sync::Arc<dyn WriteGuard>> {
        safety::guard(self)
    }
}

#[async_trait]
impl RecordStore for AzureStore {
    fn describe(&self) -> String {
        format!("azurerm://{}/{}", self.account, self.container)
    }

    fn kind(&self) -> StoreKind {
        StoreKind::Azure
    }

    async fn get(&self, key: &str) -> Result<Option<Stored>, StoreError> {
        let path = self.path(StoreCall::Get, key)?;
        let result = match self.client()?.get(&path).await {
            Ok(r) => r,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(self.fail(StoreCall::Get, key, e)),
        };
        let token = result.meta.e_tag.clone().unwrap_or_default();
        let bytes = result
            .bytes()
            .await
            .map_err(|e| self.fail(StoreCall::Get, key, e))?;
        Ok(Some(Stored {
            bytes: Vec::from(bytes),
            version: version(&token),
        }))
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
        self.list_in(prefix, range, limit, token).await
    }

    async fn put(
        &self,
        key: &str,
        bytes: &[u8],
        precondition: &Precondition,
    ) -> Result<WriteOutcome<Version>, StoreError> {
        self.put_blob(key, bytes, precondition).await
    }

    async fn delete(&self, key: &str, expected: &Version) -> Result<WriteOutcome<()>, StoreError> {
        let url = self
            .blob_url(key)
            .map_err(|e| self.fail(StoreCall::Delete, key, e))?;
        let headers = [("If-Match", expected.token.clone())];
        let response = self
            .rest(
                StoreCall::Delete,
                key,
                Method::DELETE,
                url,
                &headers,
                Vec::new(),
            )
            .await?;
        match response.status().as_u16() {
            200..=299 => Ok(WriteOutcome::Written(())),
            412 | 404 | 409 => Ok(WriteOutcome::Conflict(
                Precondition::Matches(expected.clone()).conflict(self.head_version(key).await?),
            )),
            _ => Err(http::unexpected(self.name(), StoreCall::Delete, key, response).await),
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
