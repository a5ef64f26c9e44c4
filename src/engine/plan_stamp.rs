//! Saved plans stamped per record: what a plan read, and the check that refuses it only when its own changes moved.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::cut::{Mechanism, cut};
use crate::engine::digest::sha256_hex;
use crate::engine::layout::Layout;
use crate::engine::session::{BaseRef, Pin, Snapshot};
use crate::store::Version;

/// Format tag of a stamp file.
pub const STAMP_FORMAT: &str = "choudoufu-live/plan-stamp/v1";
/// What a stamp file's name adds to its plan file's name.
pub const STAMP_SUFFIX: &str = ".live-stamp";

/// The record versions a saved plan read (versions and content digests, never attribute values).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanStamp {
    /// Always [`STAMP_FORMAT`].
    pub format: String,
    /// The estate the plan read.
    pub estate: String,
    /// The record store the plan read, e.g. `s3://bucket`.
    pub store: String,
    /// SHA-256 of the plan file the stamp belongs to.
    pub plan_sha256: String,
    /// The lineage the plan saw.
    pub lineage: String,
    /// The serial the plan saw.
    pub serial: u64,
    /// Every record the plan read, by store key.
    pub records: BTreeMap<String, BaseRef>,
    /// Where the live markers of the plan's creates are listed before it is applied: the provider configurations it was planned with, reduced to where to list (no credentials).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub marker_listings: Vec<serde_json::Value>,
}

/// A saved plan with no valid stamp; nothing was applied or written.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error(
    "The approved plan no longer matches the live system (UnstampedPlanError): {reason}. A saved plan is applied only with the stamp that `choudoufu-live run -- terraform plan -out=FILE` writes beside it (FILE{STAMP_SUFFIX}). Nothing was applied and nothing was written; plan again through choudoufu-live run."
)]
pub struct UnstampedPlanError {
    /// What is wrong with the stamp.
    pub reason: String,
}

/// One of a plan's changes whose record moved since the plan read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MovedRecord {
    /// The address.
    pub address: String,
    /// The version the plan read (none: no record).
    pub planned: Option<Version>,
    /// The version the store has now (none: no record).
    pub stored: Option<Version>,
}

impl fmt::Display for MovedRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: &Option<Version>| {
            v.as_ref()
                .map_or("no record".to_string(), |v| v.to_string())
        };
        let what = match (&self.planned, &self.stored) {
            (None, Some(_)) => "appeared",
            (Some(_), None) => "vanished",
            _ => "changed",
        };
        write!(
            f,
            "{} {what}: planned against {}, store has {}",
            self.address,
            show(&self.planned),
            show(&self.stored)
        )
    }
}

/// A saved plan one of whose own changes' records moved since it was made; nothing was applied.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub struct PlanMovedError {
    /// Every moved record among the plan's changes.
    pub moved: Vec<MovedRecord>,
}

impl fmt::Display for PlanMovedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "The approved plan no longer matches the live system (PlanMovedError): {} of its changes moved since the plan was made:",
            self.moved.len()
        )?;
        for m in &self.moved {
            writeln!(f, "  - {m}")?;
        }
        write!(
            f,
            "Nothing was applied and nothing was written. Plan again: the new plan reads what the other run wrote."
        )
    }
}

/// Why a saved plan is refused.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum PlanRefused {
    /// No valid stamp.
    #[error(transparent)]
    Unstamped(#[from] UnstampedPlanError),
    /// One of its changes moved.
    #[error(transparent)]
    Moved(#[from] PlanMovedError),
}

/// The stamp file beside a plan file.
pub fn stamp_path(plan: &Path) -> PathBuf {
    let mut name = plan.as_os_str().to_os_string();
    name.push(STAMP_SUFFIX);
    PathBuf::from(name)
}

impl PlanStamp {
    /// A stamp of what a session served: its write base and the lineage and serial it showed.
    pub fn new(
        layout: &Layout,
        store: &str,
        plan_bytes: &[u8],
        served: (String, u64),
        records: BTreeMap<String, BaseRef>,
    ) -> Self {
        PlanStamp {
            format: STAMP_FORMAT.into(),
            estate: layout.estate().to_string(),
            store: store.to_string(),
            plan_sha256: sha256_hex(plan_bytes),
            lineage: served.0,
            serial: served.1,
            records,
            marker_listings: Vec::new(),
        }
    }

    /// Write the stamp beside `plan`.
    pub fn save(&self, plan: &Path) -> std::io::Result<PathBuf> {
        let path = stamp_path(plan);
        let bytes = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(&path, bytes)?;
        Ok(path)
    }

    /// Read and check the stamp of `plan` for `layout` in `store`.
    pub fn load(
        plan: &Path,
        layout: &Layout,
        store: &str,
    ) -> Result<PlanStamp, UnstampedPlanError> {
        let path = stamp_path(plan);
        if cut(Mechanism::StampCheck) {
            if let Some(stamp) = std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
            {
                return Ok(stamp);
            }
            return Ok(PlanStamp {
                format: STAMP_FORMAT.into(),
                estate: layout.estate().to_string(),
                store: store.to_string(),
                plan_sha256: String::new(),
                lineage: String::new(),
                serial: 0,
                records: BTreeMap::new(),
                marker_listings: Vec::new(),
            });
        }
        let bytes = std::fs::read(&path).map_err(|e| UnstampedPlanError {
            reason: format!(
                "the plan {} has no stamp ({}: {e})",
                plan.display(),
                path.display()
            ),
        })?;
        let stamp: PlanStamp = serde_json::from_slice(&bytes).map_err(|e| UnstampedPlanError {
            reason: format!("the stamp {} is unreadable: {e}", path.display()),
        })?;
        if stamp.format != STAMP_FORMAT {
            return Err(UnstampedPlanError {
                reason: format!(
                    "the stamp {} has unknown format {:?}",
                    path.display(),
                    stamp.format
                ),
            });
        }
        if stamp.estate != layout.estate().as_str() || stamp.store != store {
            return Err(UnstampedPlanError {
                reason: format!(
                    "the stamp is for estate {:?} in {}, not estate {:?} in {store}",
                    stamp.estate,
                    stamp.store,
                    layout.estate().as_str()
                ),
            });
        }
        let plan_bytes = std::fs::read(plan).map_err(|e| UnstampedPlanError {
            reason: format!("cannot read the plan {}: {e}", plan.display()),
        })?;
        if sha256_hex(&plan_bytes) != stamp.plan_sha256 {
            return Err(UnstampedPlanError {
                reason: format!("the stamp {} belongs to another plan file", path.display()),
            });
        }
        Ok(stamp)
    }

    /// Compare the plan's own changes (record keys) with the store now; pin the plan's view when none moved.
    pub fn check(
        &self,
        changes: &BTreeSet<String>,
        current: &Snapshot,
    ) -> Result<Pin, PlanMovedError> {
        let mut moved = Vec::new();
        for key in changes {
            let planned = self.records.get(key);
            let stored = current.records.get(key);
            let same = match (planned, stored) {
                (None, None) => true,
                (Some(p), Some(s)) => p.version.token == s.version.token,
                _ => false,
            };
            if !same {
                let address = planned
                    .map(|p| p.address.clone())
                    .or_else(|| stored.map(|s| s.address().to_string()))
                    .unwrap_or_else(|| key.clone());
                moved.push(MovedRecord {
                    address,
                    planned: planned.map(|p| p.version.clone()),
                    stored: stored.map(|s| s.version.clone()),
                });
            }
        }
        if !moved.is_empty() && !cut(Mechanism::StampCheck) {
            moved.sort_by(|a, b| a.address.cmp(&b.address));
            return Err(PlanMovedError { moved });
        }
        Ok(Pin {
            lineage: self.lineage.clone(),
            serial: self.serial,
            base: self.records.clone(),
            changes: changes.clone(),
        })
    }
}
