//! `choudoufu-live bucket check|setup`: the S3 record store bucket's safety settings.

use std::path::Path;

use clap::Subcommand;

use super::CliError;
use crate::config::LiveConfig;
use crate::store::StoreSettings;
use crate::store::s3::{S3Settings, S3Store, bucket};

/// Check or apply the record store bucket's safety settings.
#[derive(Debug, Subcommand)]
pub enum BucketCommand {
    /// Report versioning, noncurrent-version expiry and public access block; exit 0 when all pass, 1 otherwise.
    Check,
    /// Turn on versioning, add a rule expiring noncurrent versions, and block all public access (idempotent).
    Setup,
}

/// The S3 settings of the root's live block, or why there are none.
fn s3_settings(root: &Path) -> Result<S3Settings, CliError> {
    let config = LiveConfig::load(root)?;
    match config.store {
        StoreSettings::S3(s3) => Ok(s3),
        other => Err(format!(
            "the live block at {} uses record_store {:?}; bucket checks are for record_store \"s3\"",
            config.source,
            other.kind()
        )
        .into()),
    }
}

/// Run a `bucket` command.
pub async fn run(root: &Path, cmd: BucketCommand) -> Result<i32, CliError> {
    let settings = s3_settings(root)?;
    let store = S3Store::connect(&settings).await;
    match cmd {
        BucketCommand::Check => {
            let report = bucket::check(store.client(), &settings).await?;
            print_report(&report);
            if report.passed() {
                println!("{}: safe to keep records in.", report.store);
                Ok(0)
            } else {
                println!(
                    "{}: NOT safe; runs refuse to write here until this is fixed (choudoufu-live bucket setup).",
                    report.store
                );
                Ok(1)
            }
        }
        BucketCommand::Setup => {
            let steps = bucket::setup(store.client(), &settings.bucket).await?;
            for step in &steps {
                let what = if step.changed { "applied" } else { "unchanged" };
                println!("{what:9}  {}", step.setting);
            }
            let report = bucket::check(store.client(), &settings).await?;
            print_report(&report);
            if report.passed() {
                println!("{}: safe to keep records in.", report.store);
                Ok(0)
            } else {
                println!("{}: still NOT safe after setup.", report.store);
                Ok(1)
            }
        }
    }
}

fn print_report(report: &bucket::BucketReport) {
    for c in &report.checks {
        if c.ok {
            println!("ok    {}: {}", c.setting, c.found);
        } else {
            println!(
                "FAIL  {}: found {}\n      fix: {}",
                c.setting, c.found, c.fix
            );
        }
    }
}
