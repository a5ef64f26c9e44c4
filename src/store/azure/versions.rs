//! Azure blob versions: List Blobs with `include=versions`, Get Blob with `versionid`.
//!
//! Blob versioning is an account setting. Without it (and on azurite, which has no
//! versions) a listing gives each blob once, with no version id: the store then says it
//! keeps only current versions. A blob whose current version was deleted keeps its previous
//! versions only; it is shown with a delete on top, whose time Azure does not give.

use std::collections::HashSet;

use reqwest::Method;
use serde::Deserialize;
use time::OffsetDateTime;

use super::client::AzureStore;
use super::client::version;
use crate::store::call::StoreCall;
use crate::store::error::StoreError;
use crate::store::http;
use crate::store::record_store::{RecordStore, Stored};
use crate::store::versions::{
    History, ObjectVersion, VersionKind, VersionListing, parse_time, sort_newest_first,
};

#[derive(Debug, Deserialize)]
struct EnumerationResults {
    #[serde(rename = "Blobs", default)]
    blobs: Blobs,
    #[serde(rename = "NextMarker", default)]
    next_marker: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Blobs {
    #[serde(rename = "Blob", default)]
    blob: Vec<Blob>,
}

#[derive(Debug, Deserialize)]
struct Blob {
    #[serde(rename = "Name")]
    name: String,
    #[serde(rename = "VersionId", default)]
    version_id: Option<String>,
    #[serde(rename = "IsCurrentVersion", default)]
    is_current_version: Option<bool>,
    #[serde(rename = "Properties")]
    properties: Properties,
}

#[derive(Debug, Deserialize)]
struct Properties {
    #[serde(rename = "Last-Modified", default)]
    last_modified: Option<String>,
    #[serde(rename = "Content-Length", default)]
    content_length: Option<u64>,
}

fn http_time(text: &str) -> Option<OffsetDateTime> {
    httpdate::parse_http_date(text)
        .ok()
        .map(OffsetDateTime::from)
}

/// One page of List Blobs with versions, under `prefix`, from `marker`.
async fn page(
    store: &AzureStore,
    prefix: &str,
    marker: Option<&str>,
) -> Result<EnumerationResults, StoreError> {
    let size = store.page_size.to_string();
    let mut query = vec![
        ("restype", "container"),
        ("comp", "list"),
        ("include", "versions"),
        ("prefix", prefix),
        ("maxresults", size.as_str()),
    ];
    if let Some(m) = marker {
        query.push(("marker", m));
    }
    let url = store
        .container_url(&query)
        .map_err(|e| store.fail(StoreCall::ListVersions, prefix, e))?;
    let response = store
        .rest(
            StoreCall::ListVersions,
            prefix,
            Method::GET,
            url,
            &[],
            Vec::new(),
        )
        .await?;
    if !response.status().is_success() {
        return Err(
            http::unexpected(store.name(), StoreCall::ListVersions, prefix, response).await,
        );
    }
    let text = response
        .text()
        .await
        .map_err(|e| store.fail(StoreCall::ListVersions, prefix, e))?;
    quick_xml::de::from_str(&text).map_err(|e| store.fail(StoreCall::ListVersions, prefix, e))
}

/// Every version of the blobs under `prefix`.
pub(super) async fn list(store: &AzureStore, prefix: &str) -> Result<VersionListing, StoreError> {
    let mut blobs = Vec::new();
    let mut marker: Option<String> = None;
    loop {
        let page = page(store, prefix, marker.as_deref()).await?;
        blobs.extend(page.blobs.blob);
        match page.next_marker.filter(|m| !m.is_empty()) {
            Some(m) if marker.as_deref() == Some(m.as_str()) => {
                return Err(store.fail(
                    StoreCall::ListVersions,
                    prefix,
                    format!("the service gave marker {m:?} twice; the listing does not advance"),
                ));
            }
            Some(m) => marker = Some(m),
            None => break,
        }
    }
    let versioned = blobs.iter().any(|b| b.version_id.is_some());
    let mut versions: Vec<ObjectVersion> = blobs
        .into_iter()
        .map(|b| {
            // A version id is the time the version was made; without one, the blob's Last-Modified.
            let modified = b
                .version_id
                .as_deref()
                .and_then(parse_time)
                .or_else(|| b.properties.last_modified.as_deref().and_then(http_time));
            ObjectVersion {
                latest: b.version_id.is_none() || b.is_current_version == Some(true),
                key: b.name,
                version_id: b.version_id,
                modified,
                kind: VersionKind::Content {
                    size: b.properties.content_length.unwrap_or(0),
                },
            }
        })
        .collect();
    // A key whose versions are all previous ones: its current blob was deleted.
    let current: HashSet<&str> = versions
        .iter()
        .filter(|v| v.latest)
        .map(|v| v.key.as_str())
        .collect();
    let mut seen = HashSet::new();
    let mut deleted: Vec<ObjectVersion> = Vec::new();
    for v in &versions {
        if !current.contains(v.key.as_str()) && seen.insert(v.key.as_str()) {
            deleted.push(ObjectVersion {
                key: v.key.clone(),
                version_id: None,
                modified: None,
                latest: true,
                kind: VersionKind::Deleted,
            });
        }
    }
    versions.extend(deleted);
    sort_newest_first(&mut versions);
    let history = if versioned || versions.is_empty() {
        History::Kept
    } else {
        History::CurrentOnly(format!(
            "{} keeps no blob versions: blob versioning is off on the account (`az storage account blob-service-properties update --account-name {} --enable-versioning true`), or the service has none (azurite)",
            store.describe(),
            store.account
        ))
    };
    Ok(VersionListing { versions, history })
}

/// One version's bytes; `None` when that version is gone.
pub(super) async fn get(
    store: &AzureStore,
    key: &str,
    version_id: &str,
) -> Result<Option<Stored>, StoreError> {
    let mut url = store
        .blob_url(key)
        .map_err(|e| store.fail(StoreCall::GetVersion, key, e))?;
    url.query_pairs_mut().append_pair("versionid", version_id);
    let response = store
        .rest(
            StoreCall::GetVersion,
            key,
            Method::GET,
            url,
            &[],
            Vec::new(),
        )
        .await?;
    match response.status().as_u16() {
        200 => {
            let etag = response
                .headers()
                .get("etag")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            let bytes = response
                .bytes()
                .await
                .map_err(|e| store.fail(StoreCall::GetVersion, key, e))?;
            let mut v = version(&etag);
            v.version_id = Some(version_id.to_string());
            Ok(Some(Stored {
                bytes: Vec::from(bytes),
                version: v,
            }))
        }
        404 | 400 => Ok(None),
        _ => Err(http::unexpected(store.name(), StoreCall::GetVersion, key, response).await),
    }
}
