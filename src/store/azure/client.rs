//! The Azure store's client: its `object_store` client, its HTTP client and policy, and the
//! requests its record calls are made of.

use std::sync::Arc;

use futures::TryStreamExt;
use object_store::azure::{AzureConfigKey, MicrosoftAzure, MicrosoftAzureBuilder};
use object_store::path::Path;
use object_store::{BackoffConfig, ObjectStore, ObjectStoreExt, RetryConfig};
use reqwest::Method;

use super::settings::{AzureSettings, parse_connection_string};
use crate::store::call::StoreCall;
use crate::store::error::{Cause, StoreError};
use crate::store::http::{self, ClientError};
use crate::store::record_store::{
    KeyRange, Listed, Page, Precondition, RecordStore, Version, WriteOutcome,
};
use crate::store::retry::{self, RetryPolicy};

/// Keys per listing page.
pub(super) const PAGE_SIZE: usize = 1000;

/// The `object_store` client the store reads with and signs its direct requests with.
#[derive(Clone, Debug)]
enum Blobs {
    Ready(MicrosoftAzure),
    /// The settings could not make a client; every call says why.
    Broken(String),
}

/// Records in an Azure Blob Storage container.
#[derive(Debug, Clone)]
pub struct AzureStore {
    blobs: Blobs,
    pub(super) http: Result<reqwest::Client, Arc<ClientError>>,
    pub(super) policy: RetryPolicy,
    /// The account's blob endpoint, without a trailing slash.
    pub(super) service: String,
    pub(super) account: String,
    pub(super) container: String,
    pub(super) page_size: usize,
}

impl AzureStore {
    /// A store on the container in `settings`; credentials from the settings, else the
    /// standard Azure chain (`AZURE_STORAGE_*` variables, service principal, workload or
    /// managed identity, Azure CLI). Bad settings make a store whose calls fail with the reason.
    pub fn connect(settings: &AzureSettings) -> Self {
        let policy = RetryPolicy::configured();
        let (account, service, blobs) = match build(settings, &policy) {
            Ok((account, service, azure)) => (account, service, Blobs::Ready(azure)),
            Err(e) => (
                settings.storage_account_name.clone().unwrap_or_default(),
                String::new(),
                Blobs::Broken(e),
            ),
        };
        AzureStore {
            blobs,
            http: http::client().map_err(Arc::new),
            policy,
            service,
            account,
            container: settings.container_name.clone(),
            page_size: PAGE_SIZE,
        }
    }

    /// The same store with another listing page size (at most 5000).
    pub fn with_page_size(mut self, page_size: usize) -> Self {
        self.page_size = page_size.clamp(1, 5000);
        self
    }

    /// The `object_store` client, e.g. for test setup.
    pub fn client(&self) -> Result<&MicrosoftAzure, StoreError> {
        match &self.blobs {
            Blobs::Ready(a) => Ok(a),
            Blobs::Broken(m) => Err(StoreError::new(
                self.name(),
                StoreCall::Connect,
                "",
                m.clone(),
            )),
        }
    }

    /// The HTTP client of the direct requests, or why there is none.
    pub(super) fn http(&self, op: StoreCall, key: &str) -> Result<&reqwest::Client, StoreError> {
        self.http
            .as_ref()
            .map_err(|e| self.fail(op, key, e.clone()))
    }

    pub(super) fn fail(&self, op: StoreCall, key: &str, err: impl Into<Cause>) -> StoreError {
        StoreError::new(self.name(), op, key, err)
    }

    pub(super) fn path(&self, op: StoreCall, key: &str) -> Result<Path, StoreError> {
        Path::parse(key).map_err(|e| self.fail(op, key, e))
    }

    pub(super) async fn head_version(&self, key: &str) -> Result<Option<Version>, StoreError> {
        let path = self.path(StoreCall::Head, key)?;
        match self.client()?.head(&path).await {
            Ok(meta) => Ok(meta.e_tag.map(|t| version(&t))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.fail(StoreCall::Head, key, e)),
        }
    }

    /// Put Blob with `If-None-Match: *` (create) or `If-Match: <ETag>` (update).
    pub(super) async fn put_blob(
        &self,
        key: &str,
        bytes: &[u8],
        precondition: &Precondition,
    ) -> Result<WriteOutcome<Version>, StoreError> {
        let op = StoreCall::from(precondition);
        let url = self.blob_url(key).map_err(|e| self.fail(op, key, e))?;
        let condition = match precondition {
            Precondition::Absent => ("If-None-Match", "*".to_string()),
            Precondition::Matches(v) => ("If-Match", v.token.clone()),
        };
        let headers = [
            ("x-ms-blob-type", "BlockBlob".to_string()),
            ("content-type", "application/octet-stream".to_string()),
            condition,
        ];
        let response = self
            .rest(op, key, Method::PUT, url, &headers, bytes.to_vec())
            .await?;
        match response.status().as_u16() {
            200..=299 => {
                let etag = response
                    .headers()
                    .get("etag")
                    .and_then(|v| v.to_str().ok())
                    .map(version);
                let version = match etag {
                    Some(v) => v,
                    None => self.head_version(key).await?.ok_or_else(|| {
                        self.fail(
                            op,
                            key,
                            "the write landed but the blob has no ETag (it vanished at once)",
                        )
                    })?,
                };
                Ok(WriteOutcome::Written(version))
            }
            // 409 BlobAlreadyExists (create), 412 ConditionNotMet (update), 404 (update of no blob).
            409 | 412 | 404 => Ok(WriteOutcome::Conflict(precondition.conflict(None))),
            _ => Err(http::unexpected(self.name(), op, key, response).await),
        }
    }

    pub(super) fn blob_url(&self, key: &str) -> Result<url::Url, String> {
        let mut url = url::Url::parse(&self.service).map_err(|e| e.to_string())?;
        url.path_segments_mut()
            .map_err(|_| "the endpoint cannot carry a path".to_string())?
            .pop_if_empty()
            .push(&self.container)
            .extend(key.split('/'));
        Ok(url)
    }
}

impl AzureStore {
    /// One page of the keys under `prefix` inside `range`, after `token` (the last key of the page before).
    ///
    /// `object_store` starts an offset listing with `startFrom` (Blob service version
    /// 2026-02-06; Azurite honours it); whatever the service does with it, keys at or before
    /// the start are dropped here, and the stream is left once the range's end is passed.
    pub(super) async fn list_in(
        &self,
        prefix: &str,
        range: &KeyRange,
        limit: usize,
        token: Option<String>,
    ) -> Result<Page, StoreError> {
        let azure = self.client()?;
        // Listings are by whole path segments; filter the last, partial one here.
        let (dir, _) = prefix.rsplit_once('/').unwrap_or(("", prefix));
        let dir = Path::parse(dir).map_err(|e| self.fail(StoreCall::List, prefix, e))?;
        let dir = Some(&dir).filter(|d| !d.as_ref().is_empty());
        let start = match (token, &range.after) {
            (Some(t), Some(a)) => Some(t.max(a.clone())),
            (t, a) => t.or_else(|| a.clone()),
        };
        let mut stream = match start.as_deref().map(Path::parse) {
            Some(Ok(after)) => azure.list_with_offset(dir, &after),
            // A start that is no blob path: list from the prefix and drop what is before it.
            Some(Err(_)) | None => azure.list(dir),
        };
        let mut items = Vec::new();
        let mut more = false;
        while let Some(meta) = stream
            .try_next()
            .await
            .map_err(|e| self.fail(StoreCall::List, prefix, e))?
        {
            let key = meta.location.as_ref().to_string();
            if !key.starts_with(prefix) {
                // Keys come in byte order: past the prefix, nothing further matches.
                if key.as_str() > prefix {
                    break;
                }
                continue;
            }
            if start.as_deref().is_some_and(|s| key.as_str() <= s) || !range.contains(&key) {
                if range.is_past(&key) {
                    break;
                }
                continue;
            }
            if items.len() == limit {
                more = true;
                break;
            }
            items.push(Listed {
                key,
                version: version(meta.e_tag.as_deref().unwrap_or_default()),
            });
        }
        let next = match items.last() {
            Some(last) if more && !range.ends_after(&last.key) => Some(last.key.clone()),
            _ => None,
        };
        Ok(Page { items, next })
    }
}

/// The ETag as a version, always quoted as the Blob service's headers give it (listings give it bare).
pub(super) fn version(etag: &str) -> Version {
    Version::new(format!("\"{}\"", etag.trim_matches('"')))
}

/// `object_store`'s own retry, from the store's policy: the same tries, waits and deadline.
pub(super) fn object_store_retry(policy: &RetryPolicy) -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig {
            init_backoff: policy.backoff.initial,
            max_backoff: policy.backoff.cap,
            base: 2.0,
        },
        max_retries: policy.tries.saturating_sub(1) as usize,
        retry_timeout: policy.deadline,
    }
}

pub(super) fn build(
    settings: &AzureSettings,
    policy: &RetryPolicy,
) -> Result<(String, String, MicrosoftAzure), String> {
    let conn = settings
        .connection_string
        .as_deref()
        .map(parse_connection_string)
        .transpose()
        .map_err(|e| format!("connection_string: {e}"))?
        .unwrap_or_default();
    let mut builder = MicrosoftAzureBuilder::from_env()
        .with_container_name(&settings.container_name)
        .with_retry(object_store_retry(policy))
        .with_config(
            AzureConfigKey::Client(object_store::ClientConfigKey::ConnectTimeout),
            humantime::format_duration(retry::connect_timeout()).to_string(),
        );
    let account = settings
        .storage_account_name
        .clone()
        .or(conn.account)
        .or_else(|| std::env::var("AZURE_STORAGE_ACCOUNT_NAME").ok())
        .ok_or("no storage account: set storage_account_name, a connection string, or AZURE_STORAGE_ACCOUNT_NAME")?;
    builder = builder.with_account(&account);
    if let Some(key) = settings.access_key.clone().or(conn.key) {
        builder = builder.with_access_key(key);
    }
    if let Some(sas) = settings.sas_token.clone().or(conn.sas) {
        builder = builder.with_config(AzureConfigKey::SasKey, sas.trim_start_matches('?'));
    }
    let endpoint = settings.endpoint.clone().or(conn.blob_endpoint);
    let service = match &endpoint {
        Some(e) => e.trim_end_matches('/').to_string(),
        None => format!("https://{account}.blob.core.windows.net"),
    };
    if let Some(e) = &endpoint {
        builder = builder
            .with_endpoint(e.trim_end_matches('/').to_string())
            .with_allow_http(e.starts_with("http://"));
    }
    let azure = builder.build().map_err(|e| e.to_string())?;
    Ok((account, service, azure))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_are_quoted_alike() {
        assert_eq!(version("0x8D1").token, "\"0x8D1\"");
        assert_eq!(version("\"0x8D1\"").token, "\"0x8D1\"");
    }
}
