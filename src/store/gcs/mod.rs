//! The Google Cloud Storage record store, on the JSON API: uploads with
//! `ifGenerationMatch=0` (create) or `ifGenerationMatch=<generation>` (update), deletes
//! with `ifGenerationMatch=<generation>`. A record's version is its generation.
//!
//! Credentials come from the `object_store` crate's standard Google chain (a service
//! account key, `GOOGLE_APPLICATION_CREDENTIALS`, application default credentials, the
//! metadata server); the requests themselves are direct JSON API calls, because
//! `object_store`'s GCS client speaks the XML API, whose listings carry no generation and
//! whose deletes it sends without a precondition.

pub mod safety;
mod versions;

use std::sync::Arc;

use async_trait::async_trait;
use object_store::gcp::{GcpCredentialProvider, GoogleCloudStorageBuilder};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Deserialize;

use super::guard::WriteGuard;
use super::http::ClientError;
use super::open::StoreConfig;
use super::retry::{RetryPolicy, Verdict};
use super::settings::error::SettingError;
use super::settings::kind::StoreKind;
use super::settings::source::{Reader, SettingsSource};
use super::{
    DynStore, KeyRange, Listed, Page, Precondition, RangeStart, RecordStore, StoreError, Stored,
    Version, VersionListing, WriteOutcome, http, within,
};

/// The public endpoint.
pub const DEFAULT_ENDPOINT: &str = "https://storage.googleapis.com";
/// Keys per listing page.
const PAGE_SIZE: usize = 1000;

/// Characters kept as they are in an object name in a URL path.
const NAME: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Settings of a Google Cloud Storage record store.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcsSettings {
    /// The bucket.
    pub bucket: String,
    /// A custom endpoint (emulators, private endpoints); default `https://storage.googleapis.com`.
    pub endpoint: Option<String>,
    /// A service account key: a path to its JSON file, or the JSON itself.
    pub credentials: Option<String>,
    /// Send no credentials (emulators only).
    pub skip_credentials: bool,
    /// Skip the store safety check before the first write (unsafe; logs a warning).
    pub skip_bucket_checks: bool,
}

impl GcsSettings {
    /// The settings of `record_store "gcs"` from any source.
    pub fn from_source(source: &dyn SettingsSource) -> Result<Self, SettingError> {
        let r = Reader::new(
            source,
            StoreKind::Gcs,
            &[
                "bucket",
                "endpoint",
                "credentials",
                "skip_credentials",
                "skip_bucket_checks",
            ],
        )?;
        Ok(GcsSettings {
            bucket: r.required("bucket", "my-records-bucket")?,
            endpoint: r.string("endpoint")?,
            credentials: r.string("credentials")?,
            skip_credentials: r.boolean("skip_credentials")?.unwrap_or(false),
            skip_bucket_checks: r.boolean("skip_bucket_checks")?.unwrap_or(false),
        })
    }
}

#[async_trait]
impl StoreConfig for GcsSettings {
    async fn store(&self, _root: &std::path::Path) -> DynStore {
        std::sync::Arc::new(GcsStore::connect(self))
    }

    fn guard(&self) -> Option<std::sync::Arc<dyn WriteGuard>> {
        safety::guard(self)
    }
}

/// Records in a Google Cloud Storage bucket.
#[derive(Debug, Clone)]
pub struct GcsStore {
    http: Result<reqwest::Client, Arc<ClientError>>,
    policy: RetryPolicy,
    credentials: Result<Option<GcpCredentialProvider>, String>,
    endpoint: String,
    bucket: String,
    page_size: usize,
}

#[derive(Deserialize)]
struct Object {
    name: String,
    generation: serde_json::Value,
}

impl Object {
    fn version(&self) -> Version {
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
            policy: RetryPolicy::default(),
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

    fn fail(&self, op: &'static str, key: &str, err: impl Into<super::error::Cause>) -> StoreError {
        StoreError::new(self.describe(), op, key, err)
    }

    fn bucket_url(&self) -> String {
        format!(
            "{}/storage/v1/b/{}/o",
            self.endpoint,
            utf8_percent_encode(&self.bucket, NAME)
        )
    }

    fn object_url(&self, key: &str) -> String {
        format!("{}/{}", self.bucket_url(), utf8_percent_encode(key, NAME))
    }

    async fn authorised(
        &self,
        op: &'static str,
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
    async fn send(
        &self,
        op: &'static str,
        key: &str,
        make: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, StoreError> {
        let http = self
            .http
            .as_ref()
            .map_err(|e| self.fail(op, key, e.clone()))?;
        let outcome = self
            .policy
            .run(
                || async { Ok(self.authorised(op, key, make(http)).await?.send().await) },
                |o: &Result<_, StoreError>| o.as_ref().map_or(Verdict::Final, http::verdict),
            )
            .await?;
        outcome.map_err(|e| self.fail(op, key, e))
    }

    async fn error(&self, op: &'static str, key: &str, response: reqwest::Response) -> StoreError {
        http::unexpected(self.describe(), op, key, response).await
    }

    async fn metadata(&self, key: &str) -> Result<Option<Object>, StoreError> {
        let url = self.object_url(key);
        let response = self.send("get", key, |http| http.get(&url)).await?;
        match response.status().as_u16() {
            200 => response
                .json::<Object>()
                .await
                .map(Some)
                .map_err(|e| self.fail("get", key, e)),
            404 => Ok(None),
            _ => Err(self.error("get", key, response).await),
        }
    }

    /// One objects.list page under `prefix`, bounded by `range` (`startOffset`, `endOffset`) as the API allows.
    async fn list_in(
        &self,
        prefix: &str,
        range: &KeyRange,
        limit: usize,
        token: Option<String>,
    ) -> Result<Page, StoreError> {
        let url = self.bucket_url();
        let page_size = limit.to_string();
        let response = self
            .send("list", prefix, |http| {
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
            return Err(self.error("list", prefix, response).await);
        }
        let objects: Objects = response
            .json()
            .await
            .map_err(|e| self.fail("list", prefix, e))?;
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

    async fn upload(
        &self,
        key: &str,
        bytes: &[u8],
        precondition: &Precondition,
    ) -> Result<WriteOutcome<Version>, StoreError> {
        let op = precondition.op();
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
                .send("get", key, |http| {
                    http.get(&url)
                        .query(&[("alt", "media"), ("generation", version.token.as_str())])
                })
                .await?;
            match response.status().as_u16() {
                200 => {
                    let bytes = response
                        .bytes()
                        .await
                        .map_err(|e| self.fail("get", key, e))?;
                    return Ok(Some(Stored {
                        bytes: bytes.to_vec(),
                        version,
                    }));
                }
                404 => continue,
                _ => return Err(self.error("get", key, response).await),
            }
        }
        Err(self.fail("get", key, "the record kept changing while it was read"))
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
            .send("delete", key, |http| {
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
            _ => Err(self.error("delete", key, response).await),
        }
    }

    async fn list_versions(&self, prefix: &str) -> Result<VersionListing, StoreError> {
        versions::list(self, prefix).await
    }

    async fn get_version(&self, key: &str, version_id: &str) -> Result<Option<Stored>, StoreError> {
        versions::get(self, key, version_id).await
    }
}
