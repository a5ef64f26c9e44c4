//! The write guard: a check a store kind makes once, before a run's first write, and the
//! safety report every kind's bucket check gives (`bucket check`, the guard's refusal).
//!
//! Concurrency duty: a guard may be called by several writers of one run at once; the
//! session calls it at most once per run and waits for its answer before any write.

use std::sync::Arc;

use async_trait::async_trait;
use thiserror::Error;

use super::error::Reason;
use super::s3::bucket::{BucketReport, SetupStep};
use super::settings::StoreSettings;

/// A check made before a session's first write (the record store bucket's safety); one that could not be made is made again before the next write.
#[async_trait]
pub trait WriteGuard: Send + Sync + std::fmt::Debug {
    /// Pass, or say why nothing may be written.
    async fn check(&self) -> Result<(), GuardError>;
}

/// Why a store's write guard did not pass; nothing was written either way.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum GuardError {
    /// The store answered, and a safety setting fails.
    #[error(transparent)]
    Unsafe(#[from] UnsafeRecordStore),
    /// The settings could not be read: this says nothing about whether the store is safe.
    #[error(transparent)]
    Unchecked(#[from] SafetyUnchecked),
}

/// The record store's safety settings could not be checked (the store did not answer, refused the credentials, or would not show them).
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error(
    "{}the safety settings of record store {store} could not be checked ({last_error}). Nothing was written, and the check is made again before the next write. This is not a finding that the store is unsafe. {hint}",
    if reason.unavailable() { "StoreUnavailable: " } else { "" }
)]
pub struct SafetyUnchecked {
    /// The store, e.g. `s3://bucket`.
    pub store: String,
    /// Why the settings could not be read.
    pub reason: Reason,
    /// The last error of the check.
    pub last_error: String,
    /// What to look at: the network path, the credentials, the permissions the check needs.
    pub hint: String,
}

impl SafetyUnchecked {
    /// The check of `store` could not run for `reason`; `permissions` names what the identity needs to read the settings.
    pub fn new(store: String, reason: Reason, last_error: String, permissions: &str) -> Self {
        let hint = match reason {
            Reason::Unreachable => format!(
                "Check the network path to the store; once it answers, `choudoufu-live bucket check --root DIR` shows its settings ({permissions})."
            ),
            Reason::CredentialsRefused => format!(
                "Check the credentials: they may have expired, or lack the permission to read the settings ({permissions}); `choudoufu-live bucket check --root DIR` shows them."
            ),
            Reason::Answered => format!(
                "{permissions}; `choudoufu-live bucket check --root DIR` shows the settings."
            ),
        };
        SafetyUnchecked {
            store,
            reason,
            last_error,
            hint,
        }
    }
}

/// The record store's bucket is not safe to keep records in; nothing was written.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error(
    "UnsafeRecordStore: {store} is not safe to keep records in; nothing was written.\n{}\nTo proceed anyway (unsafe), set skip_bucket_checks = true in the record_store block.",
    problems.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n")
)]
pub struct UnsafeRecordStore {
    /// The store, e.g. `s3://bucket`.
    pub store: String,
    /// Each failing setting, with the command that fixes it.
    pub problems: Vec<String>,
}

/// How one safety setting stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckStatus {
    /// It is as it must be.
    Pass,
    /// It is not: runs refuse to write.
    Fail,
    /// No call this program can make reads it (an Azure account's management-plane setting):
    /// it neither passes nor fails the guard; the fix names the command that checks it.
    Unchecked,
}

/// One safety setting of a store, as found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SafetyCheck {
    /// Which setting.
    pub setting: &'static str,
    /// How it stands.
    pub status: CheckStatus,
    /// What was found.
    pub found: String,
    /// The commands that fix it (for an unchecked setting: check it, then fix it).
    pub fix: String,
}

impl SafetyCheck {
    /// The problem line an `UnsafeRecordStore` error shows for a failing setting.
    pub fn problem(&self) -> String {
        format!("{}: found {}; fix: {}", self.setting, self.found, self.fix)
    }
}

/// Every safety setting of one store, in a fixed order per kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SafetyReport {
    /// The store, e.g. `azurerm://account/container`.
    pub store: String,
    /// The settings.
    pub checks: Vec<SafetyCheck>,
}

impl SafetyReport {
    /// True when no setting fails (unchecked ones do not fail).
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.status != CheckStatus::Fail)
    }

    /// The refusal for the failing settings, or none when none fails.
    pub fn unsafe_error(&self) -> Option<UnsafeRecordStore> {
        let problems: Vec<String> = self
            .checks
            .iter()
            .filter(|c| c.status == CheckStatus::Fail)
            .map(SafetyCheck::problem)
            .collect();
        if problems.is_empty() {
            None
        } else {
            Some(UnsafeRecordStore {
                store: self.store.clone(),
                problems,
            })
        }
    }
}

impl From<BucketReport> for SafetyReport {
    fn from(report: BucketReport) -> Self {
        SafetyReport {
            store: report.store,
            checks: report
                .checks
                .into_iter()
                .map(|c| SafetyCheck {
                    setting: c.setting,
                    status: if c.ok {
                        CheckStatus::Pass
                    } else {
                        CheckStatus::Fail
                    },
                    found: c.found,
                    fix: c.fix,
                })
                .collect(),
        }
    }
}

/// What `bucket setup` did to one setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetupOutcome {
    /// It was changed.
    Applied,
    /// It was already as it must be.
    Unchanged,
    /// No call this program can make sets it: the command that does.
    Manual(String),
}

/// One setting `bucket setup` went through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SafetyStep {
    /// Which setting.
    pub setting: &'static str,
    /// What became of it.
    pub outcome: SetupOutcome,
}

impl From<SetupStep> for SafetyStep {
    fn from(step: SetupStep) -> Self {
        SafetyStep {
            setting: step.setting,
            outcome: if step.changed {
                SetupOutcome::Applied
            } else {
                SetupOutcome::Unchanged
            },
        }
    }
}

/// The guard a store kind's settings ask for, if any (none with `skip_bucket_checks`, or for a local folder).
pub fn guard_for(settings: &StoreSettings) -> Option<Arc<dyn WriteGuard>> {
    match settings {
        StoreSettings::S3(s3) => {
            super::s3::bucket::guard_for_s3(s3).map(|g| Arc::new(g) as Arc<dyn WriteGuard>)
        }
        StoreSettings::Azure(az) => {
            super::azure::safety::guard_for_azure(az).map(|g| Arc::new(g) as Arc<dyn WriteGuard>)
        }
        StoreSettings::Gcs(gcs) => {
            super::gcs::safety::guard_for_gcs(gcs).map(|g| Arc::new(g) as Arc<dyn WriteGuard>)
        }
        StoreSettings::Local(_) => None,
    }
}

/// Warn once per process that `store`'s checks are skipped (the setting is unsafe).
pub(crate) fn warn_skipped(once: &'static std::sync::Once, store: &str, what: &str) {
    once.call_once(|| {
        tracing::warn!(
            store = %store,
            "skip_bucket_checks = true: the record store is NOT checked for {what}; records (which may hold secrets) can be lost or exposed. Run `choudoufu-live bucket setup` and remove the setting."
        );
    });
}
