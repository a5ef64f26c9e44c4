//! The local record store: one file per record under a folder, each write under a short-lived lock file.
//!
//! A write takes `.lock.<name>` beside the record with `create_new` and holds an
//! advisory `flock` on it for that one write, then writes a temp file, fsyncs it
//! and renames it over the record. A lock file left by a writer that died is
//! broken by the next writer: the kernel drops a dead holder's `flock`, so a lock
//! file nobody holds whose writer process is gone (or that is older than
//! [`STALE_AFTER`]) is removed. Versions are SHA-256 digests of the record bytes.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use sha2::{Digest, Sha256};
use thiserror::Error;

use super::call::StoreCall;
use super::error::StoreError;
use super::record_store::{
    Conflict, DynStore, KeyRange, Listed, Page, Precondition, RangeStart, RecordStore, StoreTime,
    Stored, Version, WriteOutcome,
};
use super::versions::{History, ObjectVersion, VersionKind, VersionListing};
use crate::cut::{Mechanism, cut};
use crate::store::guard::WriteGuard;
use crate::store::open::StoreConfig;
use crate::store::private_file::{self, Durability, FILE_MODE};
use crate::store::settings::error::SettingError;
use crate::store::settings::kind::StoreKind;
use crate::store::settings::source::{Reader, SettingsSource};

/// A lock file nobody holds is stale once it is this old, even if its writer's pid is alive.
pub const STALE_AFTER: Duration = Duration::from_secs(30);
/// How long a fresh lock file may stay empty and unheld while its creator takes it.
const CREATE_GRACE: Duration = Duration::from_secs(2);
/// How long a writer waits for a live holder before giving up.
const LOCK_WAIT: Duration = Duration::from_secs(30);
/// Keys per listing page.
const PAGE_SIZE: usize = 1000;

/// The local store's folder when none is named.
pub const DEFAULT_LOCAL_PATH: &str = ".live-records";

/// Settings of a local record store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalSettings {
    /// The folder (relative paths are taken from the root).
    pub path: PathBuf,
}

impl Default for LocalSettings {
    fn default() -> Self {
        LocalSettings {
            path: PathBuf::from(DEFAULT_LOCAL_PATH),
        }
    }
}

impl LocalSettings {
    /// The settings of `record_store "local"` from any source.
    pub fn from_source(source: &dyn SettingsSource) -> Result<Self, SettingError> {
        let r = Reader::new(source, StoreKind::Local, &["path"])?;
        match r.string("path")? {
            None => Ok(LocalSettings::default()),
            Some(p) if p.is_empty() => Err(SettingError::block(format!(
                "{}: `path` is empty",
                r.what()
            ))),
            Some(p) => Ok(LocalSettings {
                path: PathBuf::from(p),
            }),
        }
    }

    /// The folder, made absolute against `root`.
    pub fn path_from(&self, root: &Path) -> PathBuf {
        if self.path.is_absolute() {
            self.path.clone()
        } else {
            root.join(&self.path)
        }
    }
}

#[async_trait]
impl StoreConfig for LocalSettings {
    async fn store(&self, root: &Path) -> DynStore {
        std::sync::Arc::new(LocalStore::new(self.path_from(root)))
    }

    /// A folder keeps no versions and has no settings to check.
    fn guard(&self) -> Option<std::sync::Arc<dyn WriteGuard>> {
        None
    }
}

/// Why a local store call failed.
#[derive(Debug, Error)]
pub enum LocalError {
    /// A file operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// The operation.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A record's lock file was held by a live writer for longer than the wait bound.
    #[error(
        "{path} is held by a live writer ({holder}) for more than {waited_secs}s; nothing was written"
    )]
    LockBusy {
        /// The lock file.
        path: PathBuf,
        /// Who holds it, as written in the lock file.
        holder: String,
        /// How long this writer waited.
        waited_secs: u64,
    },
    /// A key that is not inside the store's layout.
    #[error("refused key {key:?}: {reason}")]
    BadKey {
        /// The key.
        key: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// The blocking task that did the file work did not finish.
    #[error("the file task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
    /// An old version was asked for: a local folder keeps only each record's current file.
    #[error("{NO_HISTORY}; there is no version {version_id:?} to read")]
    NoHistory {
        /// The version asked for.
        version_id: String,
    },
}

/// What a local folder keeps of a record's past, as `records history` and `log` say it.
pub const NO_HISTORY: &str = "a local folder keeps no history: only each record's current file (back the folder up, or use an s3, azurerm or gcs store with versioning for history and restore)";

/// Records in a local folder.
#[derive(Debug, Clone)]
pub struct LocalStore {
    root: PathBuf,
    page_size: usize,
}

impl LocalStore {
    /// A store rooted at `root` (created on first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        LocalStore {
            root: root.into(),
            page_size: PAGE_SIZE,
        }
    }

    /// The same store with another listing page size (for tests of paging).
    pub fn with_page_size(mut self, page_size: usize) -> Self {
        self.page_size = page_size.max(1);
        self
    }

    fn path_of(&self, key: &str) -> Result<PathBuf, LocalError> {
        let bad = |reason| LocalError::BadKey {
            key: key.to_string(),
            reason,
        };
        if key.is_empty() || key.starts_with('/') || key.contains('\0') {
            return Err(bad("empty, absolute or containing NUL"));
        }
        let mut path = self.root.clone();
        for seg in key.split('/') {
            if seg.is_empty() || seg == "." || seg == ".." || seg.starts_with('.') {
                return Err(bad("a segment is empty, `.`, `..` or hidden"));
            }
            path.push(seg);
        }
        Ok(path)
    }

    fn fail(&self, op: StoreCall, key: &str) -> impl FnOnce(LocalError) -> StoreError {
        let store = self.name();
        let key = key.to_string();
        move |e| StoreError::new(store, op, key, e)
    }

    /// Run file work off the async threads; its error becomes the store error of `op` on `key`.
    async fn blocking<T: Send + 'static>(
        &self,
        op: StoreCall,
        key: &str,
        f: impl FnOnce() -> Result<T, LocalError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let done = match tokio::task::spawn_blocking(f).await {
            Ok(done) => done,
            Err(e) => Err(LocalError::Join(e)),
        };
        done.map_err(self.fail(op, key))
    }
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> LocalError + 'a {
    move |source| LocalError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

fn version_of(bytes: &[u8]) -> Version {
    Version::new(format!("sha256:{}", hex::encode(Sha256::digest(bytes))))
}

fn read_record(path: &Path) -> Result<Option<Stored>, LocalError> {
    match fs::read(path) {
        Ok(bytes) => {
            let version = version_of(&bytes);
            Ok(Some(Stored { bytes, version }))
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io("read", path)(e)),
    }
}

fn sibling(path: &Path, prefix: &str, suffix: &str) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!("{prefix}{name}{suffix}"))
}

fn sync_dir(dir: &Path) -> Result<(), LocalError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("fsync folder", dir))
}

fn same_inode(file: &File, path: &Path) -> bool {
    match (file.metadata(), fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
        _ => false,
    }
}

fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// A held record lock: the lock file, removed on drop while still held.
struct LockGuard {
    path: PathBuf,
    _file: File,
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        // Removing a lock file we hold cannot race: others wait for our flock first.
        let _ = fs::remove_file(&self.path);
    }
}

fn holder_of(path: &Path) -> String {
    fs::read_to_string(path)
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn acquire(lock: &Path) -> Result<LockGuard, LocalError> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        match private_file().open(lock) {
            Ok(mut file) => {
                file.lock().map_err(io("lock", lock))?;
                if !same_inode(&file, lock) {
                    // A breaker removed it before we held it: try again.
                    continue;
                }
                let since = SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0);
                let _ = writeln!(file, "pid={} since={since}", std::process::id());
                return Ok(LockGuard {
                    path: lock.to_path_buf(),
                    _file: file,
                });
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                break_if_stale(lock)?;
                if started.elapsed() > LOCK_WAIT {
                    return Err(LocalError::LockBusy {
                        path: lock.to_path_buf(),
                        holder: holder_of(lock),
                        waited_secs: LOCK_WAIT.as_secs(),
                    });
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {
                if let Some(dir) = lock.parent() {
                    private_dirs(dir).map_err(io("create folder", dir))?;
                }
            }
            Err(e) => return Err(io("create lock", lock)(e)),
        }
    }
}

/// Remove `lock` if no live writer holds it; leave it otherwise.
fn break_if_stale(lock: &Path) -> Result<(), LocalError> {
    let mut file = match File::open(lock) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io("open lock", lock)(e)),
    };
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Ok(()),
        Err(TryLockError::Error(e)) => return Err(io("lock", lock)(e)),
    }
    if !same_inode(&file, lock) {
        return Ok(());
    }
    let age = file
        .metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|m| m.elapsed().ok())
        .unwrap_or_default();
    let mut text = String::new();
    let _ = file.read_to_string(&mut text);
    let pid = text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("pid="))
        .and_then(|p| p.parse::<u32>().ok());
    let stale = !cut(Mechanism::StaleBreak)
        && match pid {
            Some(pid) => !pid_alive(pid) || age > STALE_AFTER,
            None => age > CREATE_GRACE,
        };
    if stale {
        tracing::warn!(lock = %lock.display(), holder = %text.trim(), "breaking a stale record lock file");
        match fs::remove_file(lock) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(io("remove stale lock", lock)(e)),
        }
    }
    Ok(())
}

/// Mode of the folders the store makes: their owner only (records hold attribute values, secrets included).
const DIR_MODE: u32 = 0o700;
/// Options that create a new file 0600 (a record is its renamed temp file, so it keeps the mode).
fn private_file() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    if !cut(Mechanism::PrivateFiles) {
        options.mode(FILE_MODE);
    }
    options
}

/// Create `dir` and its missing parents 0700; folders that exist keep their modes.
fn private_dirs(dir: &Path) -> std::io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    if !cut(Mechanism::PrivateFiles) {
        builder.mode(DIR_MODE);
    }
    builder.create(dir)
}

/// Write `bytes` to `path` atomically: temp file, fsync, rename, fsync folder.
fn replace_file(path: &Path, bytes: &[u8]) -> Result<(), LocalError> {
    private_file::write(path, bytes, Durability::Synced).map_err(|e| LocalError::Io {
        op: e.step,
        path: e.path,
        source: e.source,
    })
}

/// The folder's clock: the modification time of a probe file made in `root` (a hidden name,
/// which listings skip) and removed at once; on a network file system that is the server's time.
fn probe_time(root: &Path) -> Result<StoreTime, LocalError> {
    private_dirs(root).map_err(io("create folder", root))?;
    let probe = root.join(format!(".clock.{}", uuid::Uuid::new_v4().simple()));
    let file = private_file()
        .open(&probe)
        .map_err(io("create clock probe", &probe))?;
    let modified = file
        .metadata()
        .and_then(|m| m.modified())
        .map_err(io("read clock probe", &probe));
    drop(file);
    let removed = fs::remove_file(&probe).map_err(io("remove clock probe", &probe));
    let at = modified?;
    removed?;
    Ok(StoreTime {
        at,
        // Some file systems keep whole seconds (and FAT two).
        resolution: std::time::Duration::from_secs(2),
    })
}

/// The write a conditional local call makes once its precondition holds.
enum Change<'a> {
    Put(&'a [u8]),
    Delete,
}

fn conditional(
    path: &Path,
    precondition: &Precondition,
    change: Change,
) -> Result<Result<(), Conflict>, LocalError> {
    let lock = sibling(path, ".lock.", "");
    let _guard = acquire(&lock)?;
    let current = read_record(path)?.map(|s| s.version);
    let ok = match precondition {
        Precondition::Absent => current.is_none(),
        Precondition::Matches(v) => current.as_ref() == Some(v),
    };
    if !ok && !cut(Mechanism::Conditions) {
        return Ok(Err(precondition.conflict(current)));
    }
    match change {
        Change::Put(bytes) => {
            replace_file(path, bytes)?;
            Ok(Ok(()))
        }
        Change::Delete => {
            fs::remove_file(path).map_err(io("delete", path))?;
            if let Some(dir) = path.parent() {
                sync_dir(dir)?;
            }
            Ok(Ok(()))
        }
    }
}

impl LocalStore {
    /// One page of the keys under `prefix` inside `range`, after `token` (the last key of the page before).
    async fn list_in(
        &self,
        prefix: &str,
        range: KeyRange,
        limit: usize,
        token: Option<String>,
    ) -> Result<Page, StoreError> {
        // Walk the folder that holds the prefix, then filter by the full prefix.
        let (dir_key, _) = prefix.rsplit_once('/').unwrap_or(("", prefix));
        let dir = if dir_key.is_empty() {
            self.root.clone()
        } else {
            self.path_of(dir_key)
                .map_err(self.fail(StoreCall::List, prefix))?
        };
        let dir_prefix = if dir_key.is_empty() {
            String::new()
        } else {
            format!("{dir_key}/")
        };
        let wanted = prefix.to_string();
        self.blocking(StoreCall::List, prefix, move || {
            let mut found = Vec::new();
            walk(&dir, &dir_prefix, &mut found)?;
            found.retain(|(k, _)| k.starts_with(&wanted) && range.contains(k));
            found.sort();
            let start = match &token {
                Some(after) => found.partition_point(|(k, _)| k.as_str() <= after.as_str()),
                None => 0,
            };
            let mut items = Vec::new();
            let mut seen = start;
            for (key, path) in found.iter().skip(start) {
                if items.len() == limit {
                    break;
                }
                seen += 1;
                // A record deleted since the walk is simply not listed.
                if let Some(stored) = read_record(path)? {
                    items.push(Listed {
                        key: key.clone(),
                        version: stored.version,
                    });
                }
            }
            // The next page starts after the last key looked at, listed or vanished.
            let next = match seen.checked_sub(1).map(|i| &found[i]) {
                Some((last, _)) if found.len() > seen => Some(last.clone()),
                _ => None,
            };
            Ok(Page { items, next })
        })
        .await
    }
}

fn walk(dir: &Path, key_prefix: &str, out: &mut Vec<(String, PathBuf)>) -> Result<(), LocalError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io("list", dir)(e)),
    };
    for entry in entries {
        let entry = entry.map_err(io("list", dir))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue; // lock and temp files
        }
        let path = entry.path();
        let key = format!("{key_prefix}{name}");
        let kind = entry.file_type().map_err(io("stat", &path))?;
        if kind.is_dir() {
            walk(&path, &format!("{key}/"), out)?;
        } else if kind.is_file() {
            out.push((key, path));
        }
    }
    Ok(())
}

#[async_trait]
impl RecordStore for LocalStore {
    fn describe(&self) -> String {
        format!("local:{}", self.root.display())
    }

    fn kind(&self) -> StoreKind {
        StoreKind::Local
    }

    async fn store_time(&self, key: &str) -> Result<StoreTime, StoreError> {
        let root = self.root.clone();
        self.blocking(StoreCall::Time, key, move || probe_time(&root))
            .await
    }

    async fn get(&self, key: &str) -> Result<Option<Stored>, StoreError> {
        let path = self.path_of(key).map_err(self.fail(StoreCall::Get, key))?;
        self.blocking(StoreCall::Get, key, move || read_record(&path))
            .await
    }

    async fn list_page(&self, prefix: &str, token: Option<String>) -> Result<Page, StoreError> {
        self.list_in(prefix, KeyRange::default(), self.page_size, token)
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
        self.list_in(prefix, range.clone(), limit, token).await
    }

    async fn put(
        &self,
        key: &str,
        bytes: &[u8],
        precondition: &Precondition,
    ) -> Result<WriteOutcome<Version>, StoreError> {
        let op = StoreCall::from(precondition);
        let path = self.path_of(key).map_err(self.fail(op, key))?;
        let version = version_of(bytes);
        let bytes = bytes.to_vec();
        let precondition = precondition.clone();
        let done = self
            .blocking(op, key, move || {
                conditional(&path, &precondition, Change::Put(&bytes))
            })
            .await?;
        Ok(match done {
            Ok(()) => WriteOutcome::Written(version),
            Err(conflict) => WriteOutcome::Conflict(conflict),
        })
    }

    async fn delete(&self, key: &str, expected: &Version) -> Result<WriteOutcome<()>, StoreError> {
        let path = self
            .path_of(key)
            .map_err(self.fail(StoreCall::Delete, key))?;
        let precondition = Precondition::Matches(expected.clone());
        let done = self
            .blocking(StoreCall::Delete, key, move || {
                conditional(&path, &precondition, Change::Delete)
            })
            .await?;
        Ok(match done {
            Ok(()) => WriteOutcome::Written(()),
            Err(conflict) => WriteOutcome::Conflict(conflict),
        })
    }

    /// The current file of each key only, with its modification time and size: no history.
    async fn list_versions(&self, prefix: &str) -> Result<VersionListing, StoreError> {
        let mut files = Vec::new();
        let mut token = None;
        loop {
            let page = self.list_page(prefix, token).await?;
            for item in page.items {
                let path = self
                    .path_of(&item.key)
                    .map_err(self.fail(StoreCall::ListVersions, prefix))?;
                files.push((item.key, path));
            }
            match page.next {
                Some(t) => token = Some(t),
                None => break,
            }
        }
        let versions = self
            .blocking(StoreCall::ListVersions, prefix, move || {
                let mut versions = Vec::new();
                for (key, path) in files {
                    let meta = match fs::metadata(&path) {
                        Ok(m) => m,
                        // Deleted since it was listed.
                        Err(e) if e.kind() == ErrorKind::NotFound => continue,
                        Err(e) => return Err(io("stat", &path)(e)),
                    };
                    versions.push(ObjectVersion {
                        key,
                        version_id: None,
                        modified: meta.modified().ok().map(time::OffsetDateTime::from),
                        latest: true,
                        kind: VersionKind::Content { size: meta.len() },
                    });
                }
                Ok(versions)
            })
            .await?;
        Ok(VersionListing {
            versions,
            history: History::CurrentOnly(NO_HISTORY.to_string()),
        })
    }

    /// Always refused: a local folder keeps no old versions.
    async fn get_version(&self, key: &str, version_id: &str) -> Result<Option<Stored>, StoreError> {
        Err(self.fail(StoreCall::GetVersion, key)(
            LocalError::NoHistory {
                version_id: version_id.to_string(),
            },
        ))
    }
}
