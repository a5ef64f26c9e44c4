//! The write guard: a check a store kind makes once, before a run's first write, and the
//! safety report every kind's bucket check gives (`bucket check`, the guard's refusal).
//!
//! Every kind's guard is one [`SafetyGuard`] over the kind's [`Safety`]: the kind reads its
//! settings into a [`SafetyReport`], and the guard alone turns that into pass or refusal.
//!
//! Concurrency duty: a guard may be called by several writers of one run at once; the
//! session calls it at most once per run and waits for its answer before any write.

use std::sync::Arc;

use async_trait::async_trait;
use thiserror::Error;

use super::error::Reason;
use crate::cut::{Mechanism, cut};

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
            Reason::Missing => Reason::Missing.advice(&store, None),
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
    /// It is not as this program would set it, but nothing is at risk: runs write, and
    /// `bucket check` says what is missing.
    Warn,
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
    /// Whether the setting is as it must be.
    pub fn passed(&self) -> bool {
        self.status == CheckStatus::Pass
    }

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

/// A store kind's safety settings, read into the shared report.
#[async_trait]
pub trait Safety: Send + Sync + std::fmt::Debug {
    /// Read every safety setting; [`SafetyUnchecked`] when they could not be read.
    async fn report(&self) -> Result<SafetyReport, SafetyUnchecked>;
}

/// The one write guard: a kind's [`Safety`] read, and refused when a setting fails.
#[derive(Debug)]
pub struct SafetyGuard<S>(pub S);

#[async_trait]
impl<S: Safety> WriteGuard for SafetyGuard<S> {
    async fn check(&self) -> Result<(), GuardError> {
        if cut(Mechanism::BucketCheck) {
            return Ok(());
        }
        match self.0.report().await?.unsafe_error() {
            None => Ok(()),
            Some(e) => Err(e.into()),
        }
    }
}

/// The guard over `safety`, or none (with a warning, once per process) when `skip` is set.
///
/// `store` names the store in the warning and `what` the settings left unchecked.
pub(crate) fn unless_skipped<S: Safety + 'static>(
    skip: bool,
    once: &'static std::sync::Once,
    store: &str,
    what: &str,
    safety: impl FnOnce() -> S,
) -> Option<Arc<dyn WriteGuard>> {
    if skip {
        once.call_once(|| {
            tracing::warn!(
                store = %store,
                "skip_bucket_checks = true: the record store is NOT checked for {what}; records (which may hold secrets) can be lost or exposed. Run `choudoufu-live bucket setup` and remove the setting."
            );
        });
        None
    } else {
        Some(Arc::new(SafetyGuard(safety())))
    }
}
