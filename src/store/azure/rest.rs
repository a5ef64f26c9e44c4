//! Direct Blob service requests (the conditional put and delete, version listings, version
//! reads, service and container properties), each under the retry policy, authorised exactly as `object_store` authorises its own: Shared Key for an
//! account key, the SAS token's query, or the bearer token (its `AzureAuthorizer`).

use object_store::azure::AzureAuthorizer;
use object_store::client::HttpRequestBody;
use reqwest::Method;
use reqwest::header::CONTENT_LENGTH;

use super::client::AzureStore;
use crate::store::call::StoreCall;
use crate::store::error::StoreError;
use crate::store::http;
use crate::store::record_store::{RecordStore, StoreTime};

/// The Blob service REST version these requests speak (blob versions need 2019-12-12 or later).
pub(super) const REST_VERSION: &str = "2023-11-03";

impl AzureStore {
    /// The account's service URL with `query`, e.g. `?restype=service&comp=properties`.
    pub(super) fn service_url(&self, query: &[(&str, &str)]) -> Result<url::Url, String> {
        let mut url = url::Url::parse(&format!("{}/", self.service)).map_err(|e| e.to_string())?;
        url.query_pairs_mut().extend_pairs(query);
        Ok(url)
    }

    /// The container's URL with `query`.
    pub(super) fn container_url(&self, query: &[(&str, &str)]) -> Result<url::Url, String> {
        let mut url = url::Url::parse(&self.service).map_err(|e| e.to_string())?;
        url.path_segments_mut()
            .map_err(|_| "the endpoint cannot carry a path".to_string())?
            .pop_if_empty()
            .push(&self.container);
        url.query_pairs_mut().extend_pairs(query);
        Ok(url)
    }

    /// The `Date` of a Get Blob Properties (`HEAD`) of `key`: a missing blob's 404 tells the time as well.
    pub(super) async fn clock(&self, key: &str) -> Result<StoreTime, StoreError> {
        let url = self
            .blob_url(key)
            .map_err(|e| self.fail(StoreCall::Time, key, e))?;
        let response = self
            .rest(StoreCall::Time, key, Method::HEAD, url, &[], Vec::new())
            .await?;
        http::time_of(self.name(), StoreCall::Time, key, response).await
    }

    /// Send one authorised request under the retry policy (a busy service, a failed or lost
    /// answer is tried again, signed afresh); the answer of the last try, whatever its status.
    pub(super) async fn rest(
        &self,
        op: StoreCall,
        key: &str,
        method: Method,
        url: url::Url,
        headers: &[(&'static str, String)],
        body: Vec<u8>,
    ) -> Result<reqwest::Response, StoreError> {
        let outcome = http::retried(&self.policy, || {
            self.try_rest(op, key, method.clone(), &url, headers, body.clone())
        })
        .await?;
        outcome.map_err(|e| self.fail(op, key, e))
    }

    /// One try of [`AzureStore::rest`]: signed and sent; the answer or the transport's error.
    async fn try_rest(
        &self,
        op: StoreCall,
        key: &str,
        method: Method,
        url: &url::Url,
        headers: &[(&'static str, String)],
        body: Vec<u8>,
    ) -> Result<Result<reqwest::Response, reqwest::Error>, StoreError> {
        let client = self.http(op, key)?;
        let azure = self.client()?;
        let credential = azure
            .credentials()
            .get_credential()
            .await
            .map_err(|e| self.fail(op, key, e))?;
        let mut builder = ::http::Request::builder()
            .method(method)
            .uri(url.as_str())
            .header("x-ms-version", REST_VERSION);
        for (name, value) in headers {
            builder = builder.header(*name, value);
        }
        if !body.is_empty() {
            builder = builder.header(CONTENT_LENGTH, body.len());
        }
        // The signature covers the headers, not the bytes: sign an empty body, send the real one.
        let mut request = builder
            .body(HttpRequestBody::from(Vec::new()))
            .map_err(|e| self.fail(op, key, e))?;
        AzureAuthorizer::new(credential.as_ref(), &self.account)
            .try_authorize(&mut request)
            .map_err(|e| self.fail(op, key, e))?;
        let (parts, _) = request.into_parts();
        // A SAS credential adds its query to the URI.
        let url = url::Url::parse(&parts.uri.to_string()).map_err(|e| self.fail(op, key, e))?;
        let mut send = client.request(parts.method, url);
        for (name, value) in parts.headers.iter() {
            if name != CONTENT_LENGTH {
                send = send.header(name, value);
            }
        }
        Ok(send.body(body).send().await)
    }
}
