//! What a session keeps when a write fails for a store error: the unwritten document, written
//! again later against the same base; and the recovery file that holds both when the store stays away.
//!
//! A recovery file is written as the run that made it: its writes are conditional on the
//! versions that run read, exactly as the run's own would have been, so a record another run
//! changed since is refused by name, never overwritten. Records that already hold the file's
//! content, written by that run, count as landed: recovering a file twice changes nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::error::SessionError;
use super::handle::Session;
use super::report::WriteReport;
use super::run_info::RunInfo;
use super::snapshot::BaseRef;
use super::view::Unwritten;
use crate::cut::{Mechanism, cut};
use crate::engine::layout::Layout;
use crate::engine::program::{ProgramStamp, now_rfc3339};
use crate::store::DynStore;
use crate::store::private_file;

/// Format tag of a recovery file.
pub const RECOVERY_FORMAT: &str = "choudoufu-live/recovery/v1";

/// A recovery file: the state a run could not write, the versions it read, and who it was.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recovery {
    /// Always [`RECOVERY_FORMAT`].
    pub format: String,
    /// The estate the state belongs to.
    pub estate: String,
    /// The record store, e.g. `s3://bucket`.
    pub store: String,
    /// The run that could not write it.
    pub run_id: String,
    /// That run's program stamp.
    pub program: ProgramStamp,
    /// When the file was written (RFC 3339).
    pub saved_at: String,
    /// The last error the write met.
    pub last_error: String,
    /// Every record the run's view held, by key: the version each write is conditional on.
    pub base: BTreeMap<String, BaseRef>,
    /// The keys of the records the run's plan changes, when it had a plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<BTreeSet<String>>,
    /// The state document terraform could not save.
    pub state: serde_json::Value,
}

/// A recovery file could not be read, or is not for this estate; nothing was written.
#[derive(Debug, Error)]
pub enum RecoveryError {
    /// The file could not be read or written.
    #[error("recovery file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a recovery file this program writes.
    #[error("{path} is not a choudoufu-live recovery file ({reason}); nothing was written")]
    NotRecovery {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The file holds another estate's state, or one of another store.
    #[error(
        "RecoveryEstateMismatch: {path} holds the state of estate {file_estate} in {file_store}, but this root's live block names estate {estate} in {store}. Nothing was written. Run `choudoufu-live --root DIR records recover {path}` with the root (DIR) whose live block names estate {file_estate} in {file_store}."
    )]
    OtherEstate {
        /// The file.
        path: PathBuf,
        /// The estate the file is for.
        file_estate: String,
        /// The store the file is for.
        file_store: String,
        /// The root's estate.
        estate: String,
        /// The root's store.
        store: String,
    },
}

impl Recovery {
    /// Read the recovery file at `path`.
    pub fn load(path: &Path) -> Result<Recovery, RecoveryError> {
        let bytes = std::fs::read(path).map_err(|source| RecoveryError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let not = |reason: String| RecoveryError::NotRecovery {
            path: path.to_path_buf(),
            reason,
        };
        let value: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| not(format!("not JSON: {e}")))?;
        match value.get("format").and_then(|f| f.as_str()) {
            Some(RECOVERY_FORMAT) => {}
            Some(other) => return Err(not(format!("its format is {other:?}"))),
            None => return Err(not("it has no format field".into())),
        }
        serde_json::from_value(value).map_err(|e| not(e.to_string()))
    }

    /// Refuse the file unless it is for `estate` in `store`.
    pub fn check_for(&self, path: &Path, estate: &str, store: &str) -> Result<(), RecoveryError> {
        if (self.estate == estate && self.store == store) || cut(Mechanism::RecoveryEstate) {
            return Ok(());
        }
        Err(RecoveryError::OtherEstate {
            path: path.to_path_buf(),
            file_estate: self.estate.clone(),
            file_store: self.store.clone(),
            estate: estate.to_string(),
            store: store.to_string(),
        })
    }

    /// Write the file into `dir`, readable by this user only (0600); its path.
    pub fn save(&self, dir: &Path) -> Result<PathBuf, RecoveryError> {
        let stamp = self
            .saved_at
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .take(15)
            .collect::<String>();
        let run: String = self.run_id.chars().take(8).collect();
        // `*.tfstate.*`: the name terraform's usual .gitignore already leaves out, as it holds state.
        let path = dir.join(format!(
            "choudoufu-live-recovery-{}-{stamp}-{run}.tfstate.json",
            self.estate.replace(['/', '@'], "_")
        ));
        let io = |source| RecoveryError::Io {
            path: path.clone(),
            source,
        };
        let bytes = serde_json::to_vec_pretty(self).map_err(|e| io(std::io::Error::other(e)))?;
        // Whole or absent (a crash never leaves half a recovery file), and never over another.
        private_file::write_new(&path, &bytes).map_err(|e| io(e.source))?;
        Ok(path)
    }

    /// The state document, as bytes to write.
    pub fn document(&self) -> Vec<u8> {
        // A JSON value's text: infallible, unlike `serde_json::to_vec`'s signature suggests.
        self.state.to_string().into_bytes()
    }
}

impl Session {
    /// The document whose write failed for a store error, while no later write landed.
    pub async fn unwritten(&self) -> Option<Unwritten> {
        self.view.lock().await.unwritten.clone()
    }

    /// The error of the last write when it failed for another reason than the store's absence or a conflict (an unsafe store, a refused document), while no later write landed: terraform could not save that state.
    pub async fn refused(&self) -> Option<String> {
        self.view.lock().await.refused.clone()
    }

    /// Write the unwritten document again, against the base as it stands (the versions this run read, advanced for what landed); none when nothing is unwritten.
    pub async fn flush(&self) -> Result<Option<WriteReport>, SessionError> {
        let Some(unwritten) = self.unwritten().await else {
            return Ok(None);
        };
        if cut(Mechanism::FlushBase) {
            // As `state push` would: against what the store holds now.
            let mut view = self.view.lock().await;
            view.pin = None;
            drop(view);
            self.refresh().await?;
        }
        self.write_state(&unwritten.doc).await.map(Some)
    }

    /// The recovery of the unwritten document, for the store `store` names; none when nothing is unwritten.
    pub async fn recovery(&self, store: &str) -> Option<Recovery> {
        let mut view = self.view.lock().await;
        let unwritten = view.unwritten.as_ref()?;
        let state = serde_json::from_slice(&unwritten.doc).ok()?;
        Some(Recovery {
            format: RECOVERY_FORMAT.into(),
            estate: self.layout.estate().to_string(),
            store: store.to_string(),
            run_id: self.run.run_id.clone(),
            program: self.run.program.clone(),
            saved_at: now_rfc3339(),
            last_error: unwritten.last_error.clone(),
            base: view.base().clone(),
            changes: view.changes.clone(),
            state,
        })
    }

    /// A session that writes `recovery`'s document as the run that made it, against the versions that run read.
    pub async fn resume(store: DynStore, layout: Layout, recovery: &Recovery) -> Session {
        let session = Session::new(
            store,
            layout,
            RunInfo {
                run_id: recovery.run_id.clone(),
                program: recovery.program.clone(),
            },
        );
        {
            // Only keys of this estate: a write never reaches past its prefix.
            let prefix = session.layout.prefix();
            let mut view = session.view.lock().await;
            view.set_base(
                recovery
                    .base
                    .iter()
                    .filter(|(k, _)| k.starts_with(&prefix))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            );
            view.changes = recovery.changes.clone();
        }
        session
    }
}
