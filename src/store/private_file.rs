//! The one atomic writer of private files: a temp file beside the target (owner-only, 0600),
//! written whole, synced, then renamed over the target, so a reader sees the old file or the
//! new one, never a part. Files written here hold record bytes, secrets included.

use std::fs::{File, Permissions};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::cut::{Mechanism, cut};

/// Mode of a file written here: its owner only.
pub const FILE_MODE: u32 = 0o600;

/// How far a written file is pushed to the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// The file and its folder are synced before the write returns: it survives a crash.
    Synced,
    /// Nothing is synced: a crash may lose the file, never leave it half-written (a cache).
    Unsynced,
}

/// A step of an atomic write failed; the target is as it was.
#[derive(Debug, Error)]
#[error("{step} {path}: {source}")]
pub struct WriteError {
    /// The step: `create temp`, `write temp`, `fsync temp`, `rename`, `fsync folder`.
    pub step: &'static str,
    /// The file the step was on.
    pub path: PathBuf,
    /// The cause.
    #[source]
    pub source: std::io::Error,
}

/// Write `bytes` to `path` atomically as a private file.
pub fn write(path: &Path, bytes: &[u8], durability: Durability) -> Result<(), WriteError> {
    write_with(path, durability, |f| f.write_all(bytes))
}

/// Write `path` atomically as a private file whose content `fill` writes.
pub fn write_with(
    path: &Path,
    durability: Durability,
    fill: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> Result<(), WriteError> {
    write_as(path, durability, Replace::Yes, fill)
}

/// Write `bytes` to `path` atomically as a private file that must not exist yet (synced); an existing file is kept and the write fails.
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    write_as(path, Durability::Synced, Replace::No, |f| {
        f.write_all(bytes)
    })
}

/// Whether a write may replace a file already at its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Replace {
    Yes,
    No,
}

fn write_as(
    path: &Path,
    durability: Durability,
    replace: Replace,
    fill: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> Result<(), WriteError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let fail = |step: &'static str, at: &Path| {
        let at = at.to_path_buf();
        move |source| WriteError {
            step,
            path: at,
            source,
        }
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let prefix = format!(".tmp.{name}.");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix);
    if cut(Mechanism::PrivateFiles) {
        // As any file the umask lets through.
        builder.permissions(Permissions::from_mode(0o666));
    } else {
        builder.permissions(Permissions::from_mode(FILE_MODE));
    }
    let mut tmp = builder.tempfile_in(dir).map_err(fail("create temp", dir))?;
    fill(tmp.as_file_mut()).map_err(fail("write temp", tmp.path()))?;
    if durability == Durability::Synced {
        tmp.as_file()
            .sync_all()
            .map_err(fail("fsync temp", tmp.path()))?;
    }
    // On failure the temp file is removed when the handle the error gives back drops.
    match replace {
        Replace::Yes => tmp.persist(path).map(drop),
        Replace::No => tmp.persist_noclobber(path).map(drop),
    }
    .map_err(|e| fail("rename", path)(e.error))?;
    if durability == Durability::Synced {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(fail("fsync folder", dir))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    #[test]
    fn a_file_is_replaced_whole_and_private_with_no_temp_left() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r");
        write(&path, b"one", Durability::Synced).unwrap();
        write(&path, b"two", Durability::Unsynced).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, FILE_MODE);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["r"]);
    }

    #[test]
    fn a_new_file_never_replaces_one_already_there() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r");
        write_new(&path, b"first").unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, FILE_MODE);
        let e = write_new(&path, b"second").unwrap_err();
        assert_eq!(e.source.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_failed_fill_leaves_the_target_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r");
        write(&path, b"kept", Durability::Synced).unwrap();
        let e = write_with(&path, Durability::Synced, |_| {
            Err(std::io::Error::other("no"))
        })
        .unwrap_err();
        assert_eq!(e.step, "write temp");
        assert_eq!(std::fs::read(&path).unwrap(), b"kept");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
