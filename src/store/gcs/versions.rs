//! GCS object generations: a listing with `versions=true`, a download with `generation=`.
//!
//! A noncurrent generation carries `timeDeleted`; a key whose generations are all
//! noncurrent was deleted, and is shown with a delete on top at the latest `timeDeleted`.
//! Whether old generations are kept at all is the bucket's `versioning.enabled`.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use super::client::GcsStore;
use crate::store::call::StoreCall;
use crate::store::error::StoreError;
use crate::store::record_store::{RecordStore, Stored, Version};
use crate::store::versions::{
    History, ObjectVersion, VersionKind, VersionListing, parse_time, sort_newest_first,
};

#[derive(Deserialize)]
struct Generation {
    name: String,
    generation: serde_json::Value,
    #[serde(default, rename = "timeCreated")]
    time_created: Option<String>,
    #[serde(default, rename = "timeDeleted")]
    time_deleted: Option<String>,
    #[serde(default)]
    size: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Generations {
    #[serde(default)]
    items: Vec<Generation>,
    #[serde(default, rename = "nextPageToken")]
    next_page_token: Option<String>,
}

fn text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl GcsStore {
    /// The bucket's own URL (its metadata), e.g. `.../storage/v1/b/BUCKET`.
    pub(super) fn bucket_meta_url(&self) -> String {
        format!(
            "{}/storage/v1/b/{}",
            self.endpoint,
            percent_encoding::utf8_percent_encode(&self.bucket, super::client::NAME)
        )
    }

    /// The bucket's metadata (versioning, lifecycle, iamConfiguration) as JSON.
    pub(super) async fn bucket_metadata(
        &self,
        op: StoreCall,
    ) -> Result<serde_json::Value, StoreError> {
        let url = self.bucket_meta_url();
        let response = self.send(op, "", |http| http.get(&url)).await?;
        if response.status().as_u16() != 200 {
            return Err(self.error(op, "", response).await);
        }
        response.json().await.map_err(|e| self.fail(op, "", e))
    }
}

/// Every generation of the objects under `prefix`.
pub(super) async fn list(store: &GcsStore, prefix: &str) -> Result<VersionListing, StoreError> {
    let url = store.bucket_url();
    let page_size = store.page_size.to_string();
    let mut all = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let response = store
            .send(StoreCall::ListVersions, prefix, |http| {
                let mut req = http.get(&url).query(&[
                    ("prefix", prefix),
                    ("versions", "true"),
                    ("maxResults", page_size.as_str()),
                    (
                        "fields",
                        "items(name,generation,timeCreated,timeDeleted,size),nextPageToken",
                    ),
                ]);
                if let Some(t) = &token {
                    req = req.query(&[("pageToken", t.as_str())]);
                }
                req
            })
            .await?;
        if response.status().as_u16() != 200 {
            return Err(store.error(StoreCall::ListVersions, prefix, response).await);
        }
        let page: Generations = response
            .json()
            .await
            .map_err(|e| store.fail(StoreCall::ListVersions, prefix, e))?;
        all.extend(page.items);
        match page.next_page_token.filter(|t| !t.is_empty()) {
            Some(t) if token.as_deref() == Some(t.as_str()) => {
                return Err(store.fail(
                    StoreCall::ListVersions,
                    prefix,
                    format!(
                        "the service gave page token {t:?} twice; the listing does not advance"
                    ),
                ));
            }
            Some(t) => token = Some(t),
            None => break,
        }
    }
    let live: BTreeSet<&str> = all
        .iter()
        .filter(|g| g.time_deleted.is_none())
        .map(|g| g.name.as_str())
        .collect();
    // A key with no live generation was deleted when its last generation went noncurrent.
    let mut gone: BTreeMap<&str, Option<time::OffsetDateTime>> = BTreeMap::new();
    for g in all.iter().filter(|g| !live.contains(g.name.as_str())) {
        let at = gone.entry(g.name.as_str()).or_insert(None);
        *at = (*at).max(g.time_deleted.as_deref().and_then(parse_time));
    }
    let mut versions: Vec<ObjectVersion> = all
        .iter()
        .map(|g| ObjectVersion {
            key: g.name.clone(),
            version_id: Some(text(&g.generation)),
            modified: g.time_created.as_deref().and_then(parse_time),
            latest: g.time_deleted.is_none(),
            kind: VersionKind::Content {
                size: g
                    .size
                    .as_ref()
                    .and_then(|s| text(s).parse().ok())
                    .unwrap_or(0),
            },
        })
        .collect();
    for (key, at) in gone {
        versions.push(ObjectVersion {
            key: key.to_string(),
            version_id: None,
            modified: at,
            latest: true,
            kind: VersionKind::Deleted,
        });
    }
    // Generations are increasing numbers: order them so, newest first, whatever order the service listed.
    versions.sort_by(|a, b| {
        let n = |v: &ObjectVersion| v.version_id.as_deref().and_then(|g| g.parse::<u128>().ok());
        a.key.cmp(&b.key).then_with(|| n(b).cmp(&n(a)))
    });
    sort_newest_first(&mut versions);
    let enabled = store
        .bucket_metadata(StoreCall::ListVersions)
        .await?
        .pointer("/versioning/enabled")
        .and_then(serde_json::Value::as_bool)
        == Some(true);
    let history = if enabled {
        History::Kept
    } else {
        History::CurrentOnly(format!(
            "object versioning is off on {}: GCS keeps only each record's live generation (`choudoufu-live bucket setup` turns it on)",
            store.describe()
        ))
    };
    Ok(VersionListing { versions, history })
}

/// One generation's bytes; `None` when that generation is gone.
pub(super) async fn get(
    store: &GcsStore,
    key: &str,
    generation: &str,
) -> Result<Option<Stored>, StoreError> {
    let url = store.object_url(key);
    let response = store
        .send(StoreCall::GetVersion, key, |http| {
            http.get(&url)
                .query(&[("alt", "media"), ("generation", generation)])
        })
        .await?;
    match response.status().as_u16() {
        200 => {
            let bytes = response
                .bytes()
                .await
                .map_err(|e| store.fail(StoreCall::GetVersion, key, e))?;
            Ok(Some(Stored {
                bytes: Vec::from(bytes),
                version: Version::new(generation),
            }))
        }
        404 | 400 => Ok(None),
        _ => Err(store.error(StoreCall::GetVersion, key, response).await),
    }
}
