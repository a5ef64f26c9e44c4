//! The object-version API's values: the stored versions of keys, and what a store kind keeps of the past.
//!
//! S3 keeps object versions (bucket versioning), Azure Blob Storage blob versions (when the
//! account has versioning on), GCS object generations (when the bucket has versioning on);
//! a local folder keeps only each record's current file. [`VersionListing::history`] says
//! which the store gave, so a caller never mistakes "no history kept" for "never changed".

use time::OffsetDateTime;

/// What one stored version of a key is: content of a size, or the mark of a delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VersionKind {
    /// A version holding bytes.
    Content {
        /// Its size in bytes.
        size: u64,
    },
    /// The key was deleted here (an S3 delete marker; on GCS and Azure, no live version left).
    Deleted,
}

/// One stored version of one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectVersion {
    /// The full store key.
    pub key: String,
    /// The id that reads this version back (S3 version id, Azure version id, GCS generation);
    /// none where the store gives none (a local folder, an Azure account without versioning).
    pub version_id: Option<String>,
    /// When the store wrote it, as the store says (S3 and moto give whole seconds).
    pub modified: Option<OffsetDateTime>,
    /// Whether it is the key's current version.
    pub latest: bool,
    /// Content or delete.
    pub kind: VersionKind,
}

/// Whether a store keeps the past of its keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum History {
    /// Old versions are kept: the listing holds every version the store still has.
    Kept,
    /// Only current versions are kept; the reason, as the user reads it.
    CurrentOnly(String),
}

/// Every stored version under a prefix: keys in byte order, each key's versions newest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionListing {
    /// The versions.
    pub versions: Vec<ObjectVersion>,
    /// Whether the store keeps old versions at all.
    pub history: History,
}

impl VersionListing {
    /// The versions of exactly `key`, newest first.
    pub fn of_key<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a ObjectVersion> + 'a {
        self.versions.iter().filter(move |v| v.key == key)
    }
}

/// Put each key's versions newest first (by time; at one time, the current one first, then a
/// delete mark before content, which is the only order a delete between two writes allows),
/// keys in byte order. Stable: versions at one time keep the store's order otherwise.
pub fn sort_newest_first(versions: &mut [ObjectVersion]) {
    versions.sort_by(|a, b| {
        a.key
            .cmp(&b.key)
            .then_with(|| b.latest.cmp(&a.latest))
            .then_with(|| b.modified.cmp(&a.modified))
            .then_with(|| {
                let deleted = |v: &ObjectVersion| matches!(v.kind, VersionKind::Deleted);
                deleted(b).cmp(&deleted(a))
            })
    });
}

/// A store time in RFC 3339, if it is one.
pub fn parse_time(text: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(key: &str, id: &str, at: &str, latest: bool, kind: VersionKind) -> ObjectVersion {
        ObjectVersion {
            key: key.into(),
            version_id: Some(id.into()),
            modified: parse_time(at),
            latest,
            kind,
        }
    }

    #[test]
    fn versions_sort_newest_first_per_key_with_a_delete_between_writes_of_one_second() {
        let c = VersionKind::Content { size: 1 };
        let t = "2026-12-01T10:00:00Z";
        let mut all = vec![
            v("b", "b1", "2026-12-01T09:00:00Z", false, c.clone()),
            v("a", "v1", t, false, c.clone()),
            v("a", "v2", t, true, c.clone()),
            v("a", "m1", t, false, VersionKind::Deleted),
            v("b", "b2", "2026-12-01T09:30:00Z", true, c.clone()),
        ];
        sort_newest_first(&mut all);
        let ids: Vec<&str> = all
            .iter()
            .map(|v| v.version_id.as_deref().unwrap())
            .collect();
        assert_eq!(ids, ["v2", "m1", "v1", "b2", "b1"]);
    }
}
