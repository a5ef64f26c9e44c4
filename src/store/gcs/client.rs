//! The GCS store's client: its HTTP client, credentials and policy, and the JSON API
//! requests its record calls are made of.

use std::sync::Arc;

use object_store::gcp::{GcpCredentialProvider, GoogleCloudStorageBuilder};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Deserialize;

use super::settings::GcsSettings;
use crate::store::call::StoreCall;
use crate::store::error::{Cause, StoreError};
use crate::store::http::{self, ClientError};
use crate::store::record_store::{
    KeyRange, Listed, Page, Precondition, RecordStore, StoreTime, Version, WriteOutcome,
};
use crate::store::retry::RetryPolicy;

/// The public endpoint.
pub const DEFAULT_ENDPOINT: &str = "https://storage.googleapis.com";
/// Keys per listing page.
pub(super) const PAGE_SIZE: usize = 1000;

/// Characters kept as they are in an object name in a URL path.
pub(super) const NAME: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Records in a Google Cloud Storage bucket.
#[derive(Debug, Clone)]
pub struct GcsStore {
    pub(super) http: Result<reqwest::Client, Arc<ClientError>>,
    pub(super) policy: RetryPolicy,
    pub(super) credentials: Result<Option<GcpCredentialProvider>, String>,
    pub(super) endpoint: String,
    pub(super) bucket: String,
    pub(super) page_size: usize,
}

#[derive(Deserialize)]
pub(super) struct Object {
    name: String,
    generation: serde_json::Value,
}

impl Object {
    pub(super) fn version(&self) -> Version {
        Version::new(match &self.generation {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    }
}

#[derive(Deserialize)]
struct Objects {
    #[serde(default)]
    items: Vec<Object>,
    #[serde(default, rename = "nextPageToken")]
    next_page_token: Option<String>,
}

impl GcsStore {
    /// A store on the bucket in `settings`. Bad credentials settings make a store whose calls fail with the reason.
    pub fn connect(settings: &GcsSettings) -> Self {
        let credentials = if settings.skip_credentials {
            Ok(None)
        } else {
            let mut builder =
                GoogleCloudStorageBuilder::from_env().with_bucket_name(&settings.bucket);
            if let Some(c) = &settings.credentials {
                builder = if c.trim_start().starts_with('{') {
                    builder.with_service_account_key(c)
                } else {
                    builder.with_service_account_path(c)
                };
            }
            builder
                .build()
                .map(|g| Some(g.credentials().clone()))
                .map_err(|e| e.to_string())
        };
        GcsStore {
            http: http::client().map_err(Arc::new),
            policy: RetryPolicy::configured(),
            credentials,
            endpoint: settings
                .endpoint
                .as_deref()
                .unwrap_or(DEFAULT_ENDPOINT)
                .trim_end_matches('/')
                .to_string(),
            bucket: settings.bucket.clone(),
            page_size: PAGE_SIZE,
        }
    }

    /// The same store with another listing page size (at most 1000).
    pub fn with_page_size(mut self, page_size: usize) -> Self {
        self.page_size = page_size.clamp(1, 1000);
        self
    }

    pub(super) fn fail(&self, op: StoreCall, key: &str, err: impl Into<Cause>) -> StoreError {
        StoreError::new(self.name(), op, key, err)
    }

    pub(super) fn bucket_url(&self) -> String {
        format!(
            "{}/storage/v1/b/{}/o",
            self.endpoint,
            utf8_percent_encode(&self.bucket, NAME)
        )
    }

    pub(super) fn object_url(&self, key: &str) -> String {
        format!("{}/{}", self.bucket_url(), utf8_percent_encode(key, NAME))
    }

    pub(super) async fn authorised(
        &self,
        op: StoreCall,
        key: &str,
        req: reqwest::RequestBuilder,
    ) -> Result<reqwest::RequestBuilder, StoreError> {
        match &self.credentials {
            Ok(None) => Ok(req),
            Ok(Some(provider)) => {
                let credential = provider
                    .get_credential()
                    .await
                    .map_err(|e| self.fail(op, key, e))?;
                Ok(req.bearer_auth(&credential.bearer))
            }
            Err(m) => Err(self.fail(op, key, m.clone())),
        }
    }

    /// Send under the retry policy (a busy service, a failed or lost answer is tried again); the response of the last try.
    pub(super) async fn send(
        &self,
        op: StoreCall,
        key: &str,
        make: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, StoreError> {
        let http = self
            .http
            .as_ref()
            .map_err(|e| self.fail(op, key, e.clone()))?;
        let outcome = http::retried(&self.policy, || async {
            Ok(self.authorised(op, key, make(http)).await?.send().await)
        })
        .await?;
        outcome.map_err(|e| self.fail(op, key, e))
    }

    pub(super) async fn error(
        &self,
        op: StoreCall,
        key: &str,
        response: reqwest::Response,
    ) -> StoreError {
        http::unexpected(self.name(), op, key, response).await
    }

    /// The `Date` of an object metadata GET of `key`: a missing object's 404 tells the time as well.
    pub(super) async fn clock(&self, key: &str) -> Result<StoreTime, StoreError> {
        let url = self.object_url(key);
        let response = self
            .send(StoreCall::Time, key, |http| {
                http.get(&url).query(&[("fields", "generation")])
            })
            .await?;
        http::time_of(self.name(), StoreCall::Time, key, response).await
    }

    pub(super) async fn metadata(&self, key: &str) -> Result<Option<Object>, StoreError> {
        let url = self.object_url(key);
        let response = self
            .send(StoreCall::Get, key, |http| http.get(&url))
            .await?;
        match response.status().as_u16() {
            200 => response
                .json::<Object>()
                .await
                .map(Some)
                .map_err(|e| self.fail(StoreCall::Get, key, e)),
            404 => Ok(None),
            _ => Err(self.error(StoreCall::Get, key, response).await),
        }
    }

    /// One objects.list page under `prefix`, bounded by `range` (`startOffset`, `endOffset`) as the API allows.
    pub(super) async fn list_in(
        &self,
        prefix: &str,
        range: &KeyRange,
        limit: usize,
        token: Option<String>,
    ) -> Result<Page, StoreError> {
        let url = self.bucket_url();
        let page_size = limit.to_string();
        let response = self
            .send(StoreCall::List, prefix, |http| {
                let mut req = http.get(&url).query(&[
                    ("prefix", prefix),
                    ("maxResults", page_size.as_str()),
                    ("fields", "items(name,generation),nextPageToken"),
                ]);
                // The same bounds on every page, as the client libraries send them.
                if let Some(after) = &range.after {
                    req = req.query(&[("startOffset", after.as_str())]);
                }
                if let Some(before) = range.wire_before() {
                    req = req.query(&[("endOffset", before)]);
                }
                if let Some(t) = &token {
                    req = req.query(&[("pageToken", t.as_str())]);
                }
                req
            })
            .await?;
        if response.status().as_u16() != 200 {
            return Err(self.error(StoreCall::List, prefix, response).await);
        }
        let objects: Objects = response
            .json()
            .await
            .map_err(|e| self.fail(StoreCall::List, prefix, e))?;
        let items = objects
            .items
            .iter()
            .map(|o| Listed {
                key: o.name.clone(),
                version: o.version(),
            })
            .collect();
        Ok(Page {
            items,
            next: objects.next_page_token.filter(|t| !t.is_empty()),
        })
    }

    pub(super) async fn upload(
        &self,
        key: &str,
        bytes: &[u8],
        precondition: &Precondition,
    ) -> Result<WriteOutcome<Version>, StoreError> {
        let op = StoreCall::from(precondition);
        let url = format!(
            "{}/upload/storage/v1/b/{}/o",
            self.endpoint,
            utf8_percent_encode(&self.bucket, NAME)
        );
        let generation = precondition.expected().map_or("0", |v| v.token.as_str());
        let response = self
            .send(op, key, |http| {
                http.post(&url)
                    .query(&[
                        ("uploadType", "media"),
                        ("name", key),
                        ("ifGenerationMatch", generation),
                    ])
                    // application/octet-stream: gcp-storage-emulator drops the connection on
                    // a media upload typed application/json.
                    .header("Content-Type", "application/octet-stream")
                    .body(bytes.to_vec())
            })
            .await?;
        match response.status().as_u16() {
            200 | 201 => {
                let object: Object = response.json().await.map_err(|e| self.fail(op, key, e))?;
                Ok(WriteOutcome::Written(object.version()))
            }
            412 | 404 => Ok(WriteOutcome::Conflict(precondition.conflict(None))),
            _ => Err(self.error(op, key, response).await),
        }
    }
}
