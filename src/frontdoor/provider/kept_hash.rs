//! A package's `h1:` hash kept between runs, used again only while every file of the package is
//! the same file, unchanged.
//!
//! Hashing the AWS package (0.7 GB) takes most of a second before the door's first plugin can
//! start. A kept hash is used only when each file under the package folder has the same name,
//! device, inode, size, mode, modification and change time as when it was hashed. A write to a
//! file moves its change time, which its owner cannot set back, and a replaced file is another
//! inode; either way the package is hashed again. A hash is kept only when no file changed in the
//! last [`SETTLE`] before it was read, so a change within one tick of the clock is not missed.

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::lockfile;
use crate::cut::{Mechanism, cut};
use crate::engine::digest::sha256_hex;
use crate::engine::private_dir;
use crate::store::private_file::{self, Durability};

/// How long ago a package file must have last changed for the package's hash to be kept.
pub const SETTLE: Duration = Duration::from_secs(2);

/// What one file of a package is: enough to tell it was neither changed nor replaced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct FileId {
    name: String,
    dev: u64,
    ino: u64,
    size: u64,
    mode: u32,
    mtime_ns: i128,
    ctime_ns: i128,
}

/// One kept hash: the package folder, its files as they were, and their hash.
#[derive(Debug, Serialize, Deserialize)]
struct Kept {
    dir: PathBuf,
    files: Vec<FileId>,
    h1: String,
}

/// How a package's hash was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hashed {
    /// Kept from an earlier run: no file of the package was read.
    Kept(String),
    /// Computed now from every file of the package.
    Computed(String),
}

impl Hashed {
    /// The `h1:` hash.
    pub fn h1(&self) -> &str {
        match self {
            Hashed::Kept(h) | Hashed::Computed(h) => h,
        }
    }
}

/// Kept hashes in a private folder (0700, each entry 0600).
#[derive(Clone, Debug)]
pub struct KeptHashes {
    dir: PathBuf,
    settle: Duration,
}

impl KeptHashes {
    /// Hashes kept in `dir`, kept only for packages whose files last changed at least `settle` ago.
    pub fn new(dir: impl Into<PathBuf>, settle: Duration) -> Self {
        KeptHashes {
            dir: dir.into(),
            settle,
        }
    }

    /// The hashes a root keeps under terraform's data folder (`.terraform`).
    pub fn for_data_dir(data_dir: &Path) -> Self {
        Self::new(
            data_dir.join("choudoufu-live-cache").join("package-hashes"),
            SETTLE,
        )
    }

    fn entry(&self, package: &Path) -> PathBuf {
        self.dir.join(sha256_hex(package.as_os_str().as_bytes()))
    }

    /// The `h1:` hash of the package folder `dir`: the kept one while its files are unchanged, else hashed now (and kept when they have settled).
    pub fn h1(&self, dir: &Path) -> std::io::Result<Hashed> {
        let files = identities(dir)?;
        let entry = self.entry(dir);
        if let Some(kept) = std::fs::read(&entry)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Kept>(&bytes).ok())
            && kept.dir == dir
            && (kept.files == files || cut(Mechanism::KeptHashCheck))
        {
            return Ok(Hashed::Kept(kept.h1));
        }
        let h1 = lockfile::h1(dir)?;
        // A file that changed while it was read, or too recently to tell the next change apart, is not kept.
        if identities(dir)? == files && settled(&files, self.settle) {
            self.keep(
                &entry,
                Kept {
                    dir: dir.to_path_buf(),
                    files,
                    h1: h1.clone(),
                },
            );
        }
        Ok(Hashed::Computed(h1))
    }

    /// Keep `kept` at `entry`; a failure only costs a hash next time.
    fn keep(&self, entry: &Path, kept: Kept) {
        let written = private_dir::create(&self.dir)
            .map_err(|e| e.to_string())
            .and_then(|()| serde_json::to_vec(&kept).map_err(|e| e.to_string()))
            .and_then(|bytes| {
                private_file::write(entry, &bytes, Durability::Unsynced).map_err(|e| e.to_string())
            });
        if let Err(e) = written {
            tracing::debug!(error = %e, "could not keep a package's hash");
        }
    }
}

/// Every file under `dir` (links followed to what they name), sorted by name.
fn identities(dir: &Path) -> std::io::Result<Vec<FileId>> {
    let mut files = Vec::new();
    lockfile::collect(dir, dir, &mut files)?;
    files.sort();
    files
        .into_iter()
        .map(|(name, path)| {
            let meta = std::fs::metadata(&path)?;
            Ok(FileId {
                name,
                dev: meta.dev(),
                ino: meta.ino(),
                size: meta.size(),
                mode: meta.mode(),
                mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
                ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
            })
        })
        .collect()
}

/// Whether every file last changed at least `settle` ago.
fn settled(files: &[FileId], settle: Duration) -> bool {
    let Ok(now) = SystemTime::now().duration_since(UNIX_EPOCH) else {
        return false;
    };
    let limit = now.as_nanos().saturating_sub(settle.as_nanos());
    files
        .iter()
        .all(|f| u128::try_from(f.mtime_ns.max(f.ctime_ns)).is_ok_and(|changed| changed < limit))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn package() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("terraform-provider-x_v1"), b"binary").unwrap();
        std::fs::write(dir.path().join("LICENSE"), b"license").unwrap();
        dir
    }

    #[test]
    fn a_settled_package_is_hashed_once() {
        let pkg = package();
        let kept = tempfile::tempdir().unwrap();
        let hashes = KeptHashes::new(kept.path(), Duration::ZERO);
        let first = hashes.h1(pkg.path()).unwrap();
        assert!(matches!(first, Hashed::Computed(_)));
        assert_eq!(
            hashes.h1(pkg.path()).unwrap(),
            Hashed::Kept(first.h1().to_string())
        );
    }

    #[test]
    fn a_fresh_package_is_not_kept() {
        let pkg = package();
        let kept = tempfile::tempdir().unwrap();
        let hashes = KeptHashes::new(kept.path(), Duration::from_secs(3600));
        hashes.h1(pkg.path()).unwrap();
        assert!(matches!(
            hashes.h1(pkg.path()).unwrap(),
            Hashed::Computed(_)
        ));
    }

    #[test]
    fn a_changed_or_replaced_file_is_hashed_again() {
        let pkg = package();
        let kept = tempfile::tempdir().unwrap();
        let hashes = KeptHashes::new(kept.path(), Duration::ZERO);
        let first = hashes.h1(pkg.path()).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(pkg.path().join("LICENSE"), b"LICENSE").unwrap();
        let changed = hashes.h1(pkg.path()).unwrap();
        assert!(matches!(changed, Hashed::Computed(_)));
        assert_ne!(changed.h1(), first.h1());
        let other = pkg.path().join("other");
        std::fs::write(&other, b"license").unwrap();
        std::fs::rename(&other, pkg.path().join("LICENSE")).unwrap();
        assert_eq!(
            hashes.h1(pkg.path()).unwrap(),
            Hashed::Computed(first.h1().to_string())
        );
    }

    #[test]
    fn a_kept_entry_that_is_not_json_is_hashed_again() {
        let pkg = package();
        let kept = tempfile::tempdir().unwrap();
        let hashes = KeptHashes::new(kept.path(), Duration::ZERO);
        std::fs::write(hashes.entry(pkg.path()), b"{not json").unwrap();
        assert!(matches!(
            hashes.h1(pkg.path()).unwrap(),
            Hashed::Computed(_)
        ));
    }
}
