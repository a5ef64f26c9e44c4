//! S3 object versions: `ListObjectVersions` (paged with both markers) and `GetObject` with a `VersionId`.
//!
//! Pages are followed with `KeyMarker` **and** `VersionIdMarker` together: moto answers a
//! `KeyMarker` alone with the wrong page (it keeps the marker key and drops one version).

use time::OffsetDateTime;

use super::client::{S3Store, no_such_bucket, status};
use crate::store::call::StoreCall;
use crate::store::error::StoreError;
use crate::store::record_store::{RecordStore, Stored};
use crate::store::versions::{
    History, ObjectVersion, VersionKind, VersionListing, sort_newest_first,
};

/// S3's version id of an object written while bucket versioning was never on.
const NULL_VERSION: &str = "null";

fn time_of(t: Option<&aws_smithy_types::DateTime>) -> Option<OffsetDateTime> {
    t.and_then(|t| OffsetDateTime::from_unix_timestamp_nanos(t.as_nanos()).ok())
}

/// Every version and delete marker under `prefix`.
pub(super) async fn list(store: &S3Store, prefix: &str) -> Result<VersionListing, StoreError> {
    let mut versions = Vec::new();
    let (mut key_marker, mut id_marker): (Option<String>, Option<String>) = (None, None);
    let mut seen = std::collections::HashSet::new();
    loop {
        let out = store
            .client
            .list_object_versions()
            .bucket(&store.bucket)
            .prefix(prefix)
            .max_keys(store.page_size)
            .set_key_marker(key_marker.take())
            .set_version_id_marker(id_marker.take())
            .send()
            .await
            .map_err(|e| store.fail(StoreCall::ListVersions, prefix, e))?;
        for v in out.versions.unwrap_or_default() {
            let (Some(key), Some(id)) = (v.key, v.version_id) else {
                continue;
            };
            versions.push(ObjectVersion {
                key,
                version_id: Some(id),
                modified: time_of(v.last_modified.as_ref()),
                latest: v.is_latest == Some(true),
                kind: VersionKind::Content {
                    size: v.size.map_or(0, |s| s.max(0) as u64),
                },
            });
        }
        for m in out.delete_markers.unwrap_or_default() {
            let (Some(key), Some(id)) = (m.key, m.version_id) else {
                continue;
            };
            versions.push(ObjectVersion {
                key,
                version_id: Some(id),
                modified: time_of(m.last_modified.as_ref()),
                latest: m.is_latest == Some(true),
                kind: VersionKind::Deleted,
            });
        }
        match (
            out.is_truncated == Some(true),
            out.next_key_marker,
            out.next_version_id_marker,
        ) {
            (true, Some(k), v) => {
                // A store that answers the same markers again would page forever.
                if seen.contains(&(k.clone(), v.clone())) {
                    return Err(StoreError::new(
                        store.name(),
                        StoreCall::ListVersions,
                        prefix,
                        format!(
                            "the store gave the page after key {k:?} twice; the listing does not advance"
                        ),
                    ));
                }
                seen.insert((k.clone(), v.clone()));
                key_marker = Some(k);
                id_marker = v;
            }
            _ => break,
        }
    }
    sort_newest_first(&mut versions);
    let history = if versions
        .iter()
        .all(|v| v.version_id.as_deref() == Some(NULL_VERSION))
        && !versions.is_empty()
    {
        History::CurrentOnly(format!(
            "bucket versioning is off on {}: S3 keeps only each record's current object (`choudoufu-live bucket setup` turns it on)",
            store.describe()
        ))
    } else {
        History::Kept
    };
    Ok(VersionListing { versions, history })
}

/// One version's bytes; `None` when it is gone, or is a delete marker.
pub(super) async fn get(
    store: &S3Store,
    key: &str,
    version_id: &str,
) -> Result<Option<Stored>, StoreError> {
    let out = match store
        .client
        .get_object()
        .bucket(&store.bucket)
        .key(key)
        .version_id(version_id)
        .send()
        .await
    {
        Ok(out) => out,
        // 404: no such version; 405: the version is a delete marker; 400: not a version id here.
        Err(e) if !no_such_bucket(&e) && matches!(status(&e), Some(404 | 405 | 400)) => {
            return Ok(None);
        }
        Err(e) => return Err(store.fail(StoreCall::GetVersion, key, e)),
    };
    store
        .stored(StoreCall::GetVersion, key, out)
        .await
        .map(Some)
}
