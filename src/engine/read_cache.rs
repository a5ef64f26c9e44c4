//! A local cache of record bytes by key and version: a warm read lists the estate and fetches
//! only the records whose listed version is not cached. Never trusted without the listing.

use std::path::{Path, PathBuf};

use crate::engine::digest::sha256_hex;
use crate::store::{Stored, Version};

/// Record bytes cached under a folder, one file per (key, version).
#[derive(Clone, Debug)]
pub struct ReadCache {
    dir: PathBuf,
}

impl ReadCache {
    /// A cache in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ReadCache { dir: dir.into() }
    }

    /// The cache a root keeps: under its `.terraform/`.
    pub fn for_root(root: &Path) -> Self {
        Self::new(root.join(".terraform").join("choudoufu-live-cache"))
    }

    /// The cache's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &str, version: &Version) -> PathBuf {
        self.dir
            .join(sha256_hex(format!("{key}\0{}", version.token).as_bytes()))
    }

    /// The bytes of `key` at exactly `version`, if cached.
    pub fn get(&self, key: &str, version: &Version) -> Option<Stored> {
        let bytes = std::fs::read(self.path(key, version)).ok()?;
        Some(Stored {
            bytes,
            version: version.clone(),
        })
    }

    /// Remember the bytes of `key` at `version`; a failure only costs a fetch next time.
    pub fn put(&self, key: &str, version: &Version, bytes: &[u8]) {
        let path = self.path(key, version);
        if path.exists() || std::fs::create_dir_all(&self.dir).is_err() {
            return;
        }
        // Temp file and rename: concurrent runs never see a half-written entry.
        let tmp = self
            .dir
            .join(format!(".tmp-{}", uuid::Uuid::new_v4().simple()));
        if std::fs::write(&tmp, bytes).is_ok() && std::fs::rename(&tmp, &path).is_ok() {
            return;
        }
        let _ = std::fs::remove_file(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_listed_version_is_served() {
        let dir = tempfile::tempdir().unwrap();
        let c = ReadCache::new(dir.path());
        let (v1, v2) = (Version::new("\"a\""), Version::new("\"b\""));
        c.put("k", &v1, b"one");
        assert_eq!(c.get("k", &v1).unwrap().bytes, b"one");
        assert!(
            c.get("k", &v2).is_none(),
            "another version is fetched, never served from the cache"
        );
        assert!(c.get("other", &v1).is_none());
    }
}
