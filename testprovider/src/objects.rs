//! The "cloud": each thing as a file `<id>.json` in the folder `CDFTEST_OBJECTS` names.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use thiserror::Error;

use crate::thing::{self, Thing, ThingError};

/// The variable naming the objects folder; without it things live in terraform's state only.
pub const OBJECTS_ENV: &str = "CDFTEST_OBJECTS";

/// An object could not be read or written.
#[derive(Debug, Error)]
pub enum ObjectError {
    /// An id that is not one this provider makes (letters, digits, `-`, `_`).
    #[error("{0:?} is not a cdftest_thing id")]
    BadId(String),
    /// No objects folder: import has nothing to read.
    #[error("no objects folder ({OBJECTS_ENV} is not set)")]
    NoFolder,
    /// The file could not be read, written or removed.
    #[error("object {id}: {source}")]
    Io {
        /// The object.
        id: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file does not hold a thing.
    #[error("object {id}: {source}")]
    Content {
        /// The object.
        id: String,
        /// What is wrong.
        #[source]
        source: ThingError,
    },
}

/// The objects folder, when there is one.
#[derive(Clone, Debug, Default)]
pub struct Objects {
    dir: Option<PathBuf>,
}

fn file_of(dir: &std::path::Path, id: &str) -> Result<PathBuf, ObjectError> {
    if id.is_empty()
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(ObjectError::BadId(id.to_string()));
    }
    Ok(dir.join(format!("{id}.json")))
}

impl Objects {
    /// The folder `CDFTEST_OBJECTS` names.
    pub fn from_env() -> Objects {
        Objects {
            dir: std::env::var_os(OBJECTS_ENV)
                .filter(|p| !p.is_empty())
                .map(PathBuf::from),
        }
    }

    /// Whether there is a folder (else reads return what terraform holds).
    pub fn enabled(&self) -> bool {
        self.dir.is_some()
    }

    /// Write (or overwrite) the object of `thing`, whose id is `id`.
    pub fn put(&self, id: &str, thing: &Thing) -> Result<(), ObjectError> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let path = file_of(dir, id)?;
        let io = |source| ObjectError::Io {
            id: id.to_string(),
            source,
        };
        let tmp = dir.join(format!(".{id}.{}.tmp", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io)?;
        f.write_all(thing::to_json(thing).to_string().as_bytes())
            .map_err(io)?;
        std::fs::rename(&tmp, &path).map_err(io)
    }

    /// The object `id`: `None` when it is gone.
    pub fn get(&self, id: &str) -> Result<Option<Thing>, ObjectError> {
        let Some(dir) = &self.dir else {
            return Err(ObjectError::NoFolder);
        };
        let path = file_of(dir, id)?;
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(ObjectError::Io {
                    id: id.to_string(),
                    source,
                });
            }
        };
        let content = |source| ObjectError::Content {
            id: id.to_string(),
            source,
        };
        let json = serde_json::from_slice(&bytes).map_err(|e| content(e.into()))?;
        thing::from_json(&json).map_err(content)
    }

    /// Remove the object `id` (already gone is fine).
    pub fn delete(&self, id: &str) -> Result<(), ObjectError> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        match std::fs::remove_file(file_of(dir, id)?) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(ObjectError::Io {
                id: id.to_string(),
                source,
            }),
        }
    }
}
