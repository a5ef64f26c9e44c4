//! The command line's arguments, and running the command they name.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use super::error::{CliError, EXIT_ERROR};
use super::{bucket, iam, records, shim};

/// Record-per-resource remote state for OpenTofu and Terraform, with no state lock.
///
/// Each resource instance is one record in a record store (a local folder by
/// default, or an S3 bucket you own). Every record write is one conditional
/// request, so two applies that change different resources of one root both
/// land, and a write that meets another run's newer record is refused by name.
#[derive(Debug, Parser)]
#[command(name = "choudoufu-live", version, propagate_version = true)]
pub struct Cli {
    /// The root module folder whose live block names the estate and record store.
    #[arg(long, global = true, default_value = ".", value_name = "DIR")]
    pub root: PathBuf,

    /// How log lines on stderr look (the level comes from CHOUDOUFU_LOG, e.g. `info`).
    #[arg(long, global = true, value_enum, default_value = "human")]
    pub log_format: crate::logging::LogFormat,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Look at the estate's records and their history; restore, export, import.
    #[command(subcommand)]
    Records(records::RecordsCommand),
    /// Run terraform or tofu with the state served from the estate's records.
    Run(crate::run::RunArgs),
    /// Check or set up the record store's safety settings (s3, azurerm, gcs).
    #[command(subcommand)]
    Bucket(bucket::BucketCommand),
    /// Print (every kind) or apply (s3) the access policy of a role scoped to one estate.
    #[command(subcommand)]
    Iam(iam::IamCommand),
    /// Write `terraform` and `tofu` shims into DIR, so any tool that runs terraform from PATH runs it through `run` in live roots.
    Shim(shim::ShimArgs),
}

/// Run the command line; returns the process exit status.
pub async fn main(cli: Cli) -> i32 {
    let result = match cli.command {
        Command::Records(cmd) => records::run(&cli.root, cmd).await,
        Command::Run(args) => crate::run::run(&cli.root, args)
            .await
            .map_err(CliError::from),
        Command::Bucket(cmd) => bucket::run(&cli.root, cmd).await,
        Command::Iam(cmd) => iam::run(&cli.root, cmd).await,
        Command::Shim(args) => shim::install(&args).map_err(CliError::from),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{}", super::error::report(e.as_ref()));
            EXIT_ERROR
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}
