//! The S3 store as a record store, and the settings that build it and its guard.

use std::path::Path;

use async_trait::async_trait;

use super::client::{S3Store, absent, conflict_verdict, status};
use super::settings::S3Settings;
use super::{bucket, versions};
use crate::cut::{Mechanism, cut};
use crate::store::call::StoreCall;
use crate::store::error::StoreError;
use crate::store::guard::WriteGuard;
use crate::store::open::StoreConfig;
use crate::store::record_store::{
    DynStore, KeyRange, Page, Precondition, RangeStart, RecordStore, StoreTime, Stored, Streamed,
    Version, WriteOutcome, within,
};
use crate::store::settings::kind::StoreKind;
use crate::store::versions::VersionListing;

#[async_trait]
impl StoreConfig for S3Settings {
    async fn store(&self, _root: &Path) -> DynStore {
        std::sync::Arc::new(S3Store::connect(self).await)
    }

    fn guard(&self) -> Option<std::sync::Arc<dyn WriteGuard>> {
        bucket::guard(self)
    }
}

impl S3Store {
    /// GetObject of `key`'s current version: its answer, its body still to come; none when absent.
    async fn get_object(
        &self,
        key: &str,
    ) -> Result<Option<aws_sdk_s3::operation::get_object::GetObjectOutput>, StoreError> {
        match self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => Ok(Some(out)),
            Err(e) if absent(&e) => Ok(None),
            Err(e) => Err(self.fail(StoreCall::Get, key, e)),
        }
    }
}

#[async_trait]
impl RecordStore for S3Store {
    fn describe(&self) -> String {
        format!("s3://{}", self.bucket)
    }

    fn kind(&self) -> StoreKind {
        StoreKind::S3
    }

    async fn get(&self, key: &str) -> Result<Option<Stored>, StoreError> {
        match self.get_object(key).await? {
            Some(out) => self.stored(StoreCall::Get, key, out).await.map(Some),
            None => Ok(None),
        }
    }

    async fn get_streamed(&self, key: &str) -> Result<Option<Streamed>, StoreError> {
        if cut(Mechanism::ImageStream) {
            return Ok(self.get(key).await?.map(Streamed::from));
        }
        let Some(out) = self.get_object(key).await? else {
            return Ok(None);
        };
        let version = Version {
            token: out.e_tag.clone().unwrap_or_default(),
            version_id: out.version_id.clone(),
        };
        let (store, key) = (self.name(), key.to_string());
        let chunks = futures::stream::unfold(Some(out.body), move |body| {
            let (store, key) = (store.clone(), key.clone());
            async move {
                let mut body = body?;
                match body.next().await? {
                    Ok(bytes) => Some((Ok(Vec::from(bytes)), Some(body))),
                    // The stream ends after its error.
                    Err(e) => Some((Err(StoreError::new(store, StoreCall::Get, key, e)), None)),
                }
            }
        });
        Ok(Some(Streamed {
            version,
            chunks: Box::pin(chunks),
        }))
    }

    async fn list_page(&self, prefix: &str, token: Option<String>) -> Result<Page, StoreError> {
        self.list_v2(prefix, None, token, self.page_size).await
    }

    async fn put(
        &self,
        key: &str,
        bytes: &[u8],
        precondition: &Precondition,
    ) -> Result<WriteOutcome<Version>, StoreError> {
        self.put_object(key, bytes, precondition).await
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
        // StartAfter on the first page only: with a continuation token some servers (moto,
        // SeaweedFS) ignore it, others honour it; the token alone is understood by all.
        let start_after = match &token {
            Some(_) => None,
            None => range.after.as_deref(),
        };
        let max_keys = i32::try_from(limit)
            .unwrap_or(i32::MAX)
            .clamp(1, self.page_size);
        let page = self.list_v2(prefix, start_after, token, max_keys).await?;
        Ok(within(page, range))
    }

    async fn delete(&self, key: &str, expected: &Version) -> Result<WriteOutcome<()>, StoreError> {
        let send = || {
            let mut req = self.client.delete_object().bucket(&self.bucket).key(key);
            if !cut(Mechanism::Conditions) {
                req = req.if_match(&expected.token);
            }
            req.send()
        };
        match self.policy.run(send, conflict_verdict).await {
            Ok(_) => Ok(WriteOutcome::Written(())),
            Err(e) if status(&e) == Some(412) || absent(&e) => {
                let found = self.head_version(key).await?;
                Ok(WriteOutcome::Conflict(
                    Precondition::Matches(expected.clone()).conflict(found),
                ))
            }
            Err(e) => Err(self.fail(StoreCall::Delete, key, e)),
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
