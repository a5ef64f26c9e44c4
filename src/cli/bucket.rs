//! `choudoufu-live bucket check|setup`: the record store's safety settings, for every store kind.

use std::path::Path;

use clap::Subcommand;

use super::error::CliError;
use crate::store::azure::{AzureStore, safety as azure_safety};
use crate::store::error::Reason;
use crate::store::gcs::{GcsStore, safety as gcs_safety};
use crate::store::guard::{CheckStatus, SafetyReport, SafetyStep, SetupOutcome};
use crate::store::s3::{S3Store, bucket};
use crate::store::{RecordStore, StoreSettings};

/// Check or apply the record store's safety settings (the bucket or container the live block names).
#[derive(Debug, Subcommand)]
pub enum BucketCommand {
    /// Report each safety setting; exit 0 when none fails, 1 otherwise.
    #[command(
        long_about = "Report each safety setting of the record store the root's live block names; exit 0 when none fails, 1 otherwise.\n\ns3: versioning, a lifecycle rule expiring noncurrent versions, the public access block; and the write log's rule expiring entries tagged tofu-log=entry (missing: a warning, since the sweep still expires them; one expiring them before 7 days: a failure).\nazurerm: blob soft delete or versioning, the container's public access, HTTPS; the account's \"allow blob public access\" and \"secure transfer required\" are management-plane settings no data-plane call reads: they are shown as unchecked, with the `az` command that checks them.\ngcs: object versioning, a lifecycle rule deleting noncurrent generations (and none deleting live records), public access prevention, uniform bucket-level access.\nlocal: nothing to check (a folder keeps no versions).\n\nThe same check runs before each run's first write, which is refused (UnsafeRecordStore) while a setting fails, unless skip_bucket_checks = true. A store that cannot be reached, or whose settings cannot be read, is reported as \"could not be checked\" (exit 1), never as unsafe; a run's check that could not be made is made again before its next write."
    )]
    Check,
    /// Apply what is missing (idempotent; other lifecycle rules and access policies are kept).
    #[command(
        long_about = "Apply the safety settings that are missing, idempotently: settings already right are left alone, the bucket's other lifecycle rules and the container's stored access policies are kept.\n\ns3: turns versioning on, adds a rule expiring noncurrent versions after 90 days, puts a public access block with all four settings on, adds a rule expiring write log entries (tagged tofu-log=entry) after 7 days.\nazurerm: turns blob soft delete on (90 days) and makes the container private; versioning, \"allow blob public access\" and \"secure transfer required\" are account (ARM) settings: it prints the `az` command for each.\ngcs: turns object versioning on, adds a rule deleting noncurrent generations after 90 days, enforces public access prevention and uniform bucket-level access (one PATCH).\n\nThen it checks again and exits 0 when none fails, 1 otherwise."
    )]
    Setup,
}

/// Run a `bucket` command.
pub async fn run(root: &Path, cmd: BucketCommand) -> Result<i32, CliError> {
    let config = crate::config::backend_s3::root_config(root)?;
    match (&config.store, cmd) {
        (StoreSettings::Local(local), _) => {
            println!(
                "record_store \"local\" ({}): no bucket settings to check. A local folder keeps no versions: back it up, and keep it private to the users who run terraform.",
                local.path_from(root).display()
            );
            Ok(0)
        }
        (StoreSettings::S3(settings), BucketCommand::Check) => {
            let store = S3Store::connect(settings).await;
            match bucket::check(store.client(), settings).await {
                Ok(report) => Ok(verdict(&report, false)),
                Err(e) => Ok(unchecked(
                    &format!("{} at {}", store.describe(), store.endpoint()),
                    e.reason,
                    &e.to_string(),
                )),
            }
        }
        (StoreSettings::S3(settings), BucketCommand::Setup) => {
            let store = S3Store::connect(settings).await;
            let steps = bucket::setup(store.client(), &settings.bucket).await?;
            print_steps(steps);
            let report = bucket::check(store.client(), settings).await?;
            Ok(verdict(&report, true))
        }
        (StoreSettings::Azure(settings), BucketCommand::Check) => {
            let store = AzureStore::connect(settings);
            match azure_safety::check(&store).await {
                Ok(report) => Ok(verdict(&report, false)),
                Err(e) => Ok(unchecked(
                    &store.describe(),
                    e.source.reason,
                    &e.to_string(),
                )),
            }
        }
        (StoreSettings::Azure(settings), BucketCommand::Setup) => {
            let store = AzureStore::connect(settings);
            print_steps(azure_safety::setup(&store).await?);
            Ok(verdict(&azure_safety::check(&store).await?, true))
        }
        (StoreSettings::Gcs(settings), BucketCommand::Check) => {
            let store = GcsStore::connect(settings);
            match gcs_safety::check(&store).await {
                Ok(report) => Ok(verdict(&report, false)),
                Err(e) => Ok(unchecked(
                    &store.describe(),
                    e.source.reason,
                    &e.to_string(),
                )),
            }
        }
        (StoreSettings::Gcs(settings), BucketCommand::Setup) => {
            let store = GcsStore::connect(settings);
            print_steps(gcs_safety::setup(&store).await?);
            Ok(verdict(&gcs_safety::check(&store).await?, true))
        }
    }
}

fn print_steps(steps: impl IntoIterator<Item = SafetyStep>) {
    for step in steps {
        match step.outcome {
            SetupOutcome::Applied => println!("applied    {}", step.setting),
            SetupOutcome::Unchanged => println!("unchanged  {}", step.setting),
            SetupOutcome::Manual(command) => {
                println!("not set    {}: run `{command}`", step.setting)
            }
        }
    }
}

/// Say the settings could not be read (not that they fail), and what to do; the exit status.
fn unchecked(store: &str, reason: Reason, error: &str) -> i32 {
    let what = match reason {
        Reason::Unreachable => "StoreUnavailable: the store could not be reached",
        Reason::CredentialsRefused => {
            "StoreUnavailable: the store refused the credentials (expired, or without the permission to read the settings)"
        }
        Reason::Missing => "it does not exist",
        Reason::Answered => "the store would not show its settings",
    };
    println!("{store}: could not be checked. {what}: {error}");
    let advice = match reason {
        Reason::Unreachable | Reason::CredentialsRefused => format!(
            "this is not a finding that the store is unsafe; runs write nothing here until a check can be made. {}",
            reason.advice(store, None)
        ),
        _ => reason.advice(store, None),
    };
    println!("{store}: {advice}");
    1
}

/// Print the report and the verdict; the exit status.
fn verdict(report: &SafetyReport, after_setup: bool) -> i32 {
    for c in &report.checks {
        match c.status {
            CheckStatus::Pass => println!("ok    {}: {}", c.setting, c.found),
            CheckStatus::Fail => println!(
                "FAIL  {}: found {}\n      fix: {}",
                c.setting, c.found, c.fix
            ),
            CheckStatus::Unchecked => println!("??    {}: {}\n      {}", c.setting, c.found, c.fix),
            CheckStatus::Warn => println!(
                "warn  {}: found {}\n      fix: {}",
                c.setting, c.found, c.fix
            ),
        }
    }
    let unchecked = report
        .checks
        .iter()
        .any(|c| c.status == CheckStatus::Unchecked);
    let note = if unchecked {
        " (check the ?? settings yourself: no call this program can make reads them)"
    } else {
        ""
    };
    if report.passed() {
        println!("{}: safe to keep records in{note}.", report.store);
        0
    } else if after_setup {
        println!("{}: still NOT safe after setup.", report.store);
        1
    } else {
        println!(
            "{}: NOT safe; runs refuse to write here until this is fixed (choudoufu-live bucket setup).",
            report.store
        );
        1
    }
}
