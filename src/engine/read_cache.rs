//! A local cache of record bytes by key and version: a warm read lists the estate and fetches
//! only the records whose listed version is not cached. Never trusted without the listing.

use std::path::{Path, PathBuf};

use crate::engine::digest::sha256_hex;
use crate::engine::private_dir;
use crate::store::private_file::{self, Durability};
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
    ///
    /// Record bytes hold attribute values, secrets included: the folder is made 0700 and
    /// each file 0600, whatever the umask (a folder an older version left wider is narrowed).
    pub fn put(&self, key: &str, version: &Version, bytes: &[u8]) {
        let path = self.path(key, version);
        if path.exists() || private_dir::create(&self.dir).is_err() {
            return;
        }
        // Temp file and rename: concurrent runs never see a half-written entry. Unsynced: a
        // lost entry is read from the store again.
        if let Err(e) = private_file::write(&path, bytes, Durability::Unsynced) {
            tracing::debug!(error = %e, "could not keep a cached record");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

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

    #[test]
    fn the_folder_and_its_files_are_private() {
        let dir = tempfile::tempdir().unwrap();
        let cache_dir = dir.path().join("a").join("cache");
        let c = ReadCache::new(&cache_dir);
        c.put("k", &Version::new("\"a\""), b"secret");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&cache_dir), 0o700);
        for e in std::fs::read_dir(&cache_dir).unwrap() {
            assert_eq!(mode(&e.unwrap().path()), 0o600);
        }
        // A folder left wider is narrowed on the next write.
        std::fs::set_permissions(&cache_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        c.put("k2", &Version::new("\"b\""), b"secret");
        assert_eq!(mode(&cache_dir), 0o700);
    }
}
