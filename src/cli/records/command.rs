//! The `records` subcommands and running the one given.

use std::path::{Path, PathBuf};

use clap::Subcommand;

use super::{adopt, claims, current, history, log, out, recover, restore, transfer};
use crate::cli::error::CliError;

/// Look at the estate's records, their history, and move state in and out.
#[derive(Debug, Subcommand)]
pub enum RecordsCommand {
    /// List every record: address, version and the program stamp of its last writer.
    Ls,
    /// The claims runs hold now: address, operation, run, since when, and whether the run is alive.
    #[command(
        long_about = "The claims runs hold now, one per resource a run is changing: the address, what the run is doing to it, the run id, since when, and whether the run counts as alive.\n\nA run that ends, or is interrupted, releases its claims. A run killed with SIGKILL (or whose machine died) cannot: its claims stand until its heartbeat is three beats old (15 s with run's default --heartbeat=5s), and are then shown as gone; the next run that needs one takes it over, says so, and removes the gone run's record."
    )]
    Claims,
    /// Show one record as stored (it may hold secrets: it is printed only here, never logged).
    Show {
        /// The resource instance address, e.g. 'terraform_data.db' or 'module.a.x["k"]', or 'output.NAME'.
        address: String,
    },
    /// Every stored version of one record, newest first: version id, time, operation, run, program, size.
    #[command(
        long_about = "Every stored version of one record, newest first.\n\nEach row gives the store's version id (what `restore --version` takes), when the version was written, what the write was (create, update, restore, delete), the writer's run id, program stamp and terraform version, and the size. The versions come from the store: S3 object versions, Azure blob versions, GCS object generations. A store that keeps no old versions (a local folder, a bucket without versioning) shows only the current one and says so.\n\nExit status: 0, or 1 when the address has no record and no stored version."
    )]
    History {
        /// The resource instance address, e.g. 'terraform_data.db', or 'output.NAME'.
        address: String,
    },
    /// Put an older version of one record back, conditionally on the version now current.
    #[command(
        disable_version_flag = true,
        long_about = "Put an older version of one record back as its new current version.\n\nThe write is one conditional request on the version that is current when the restore reads it (If-Match; If-None-Match: * when the record is deleted now): if another run writes the record in between, the restore is refused by name (RecordConflictError, exit 4) and nothing is overwritten. No other record is touched.\n\nIt prints what it replaces, the attributes that change (sensitive values masked), and what the next plan should be expected to show: terraform refreshes the restored record against the real object. --dry-run prints the same and writes nothing.\n\nExit status: 0 restored (or nothing to do), 1 no such version or a store that keeps no history, 4 refused because the record changed."
    )]
    Restore {
        /// The resource instance address, e.g. 'terraform_data.db', or 'output.NAME'.
        address: String,
        /// The version to put back, as `records history ADDRESS` lists it.
        #[arg(long, value_name = "VERSION_ID")]
        version: String,
        /// Show what would change, and write nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// The estate's writes in time order: creates, updates, restores, deletes, with run ids.
    #[command(
        long_about = "The estate's writes in time order, across all records: each create, update, restore and delete with its time, address, the writer's run id and program stamp, and the version it made. It answers \"what did the 14:02 run change?\": `records log --since 2h | grep RUN_ID`.\n\nThe writes come from the store's object versions, so the log reaches back as far as the store keeps them (a lifecycle rule expires old versions; the oldest version kept shows as a create). A delete carries no record, so no run id: S3 gives its time, GCS the time the object went noncurrent, Azure no time. A store that keeps no history (a local folder) shows each record's last write only, and says so."
    )]
    Log {
        /// Only writes newer than this: a duration (90s, 30m, 2h, 1d, 1h30m) or an RFC 3339 time.
        #[arg(long, value_name = "DURATION|TIME")]
        since: Option<String>,
        /// Only addresses matching this pattern (`*` any characters, `?` one), e.g. 'module.net.*' or 'output.*'.
        #[arg(long, value_name = "PATTERN")]
        address: Option<String>,
    },
    /// The estate as one terraform state v4 document, exactly as `run` serves it.
    #[command(
        long_about = "The estate as one terraform state (version 4) document: exactly the document `run` serves terraform, with its lineage, serial and terraform_version. For a backup, for another tool, or to leave: `terraform show FILE` and `terraform state push FILE` read it.\n\nThe document holds every attribute, secrets included: with -o the file is created private (0600) and replaced whole; without -o it goes to stdout."
    )]
    Export {
        /// Write to FILE (private, 0600) instead of stdout.
        #[arg(
            short = 'o',
            long = "output",
            value_name = "FILE",
            conflicts_with = "to_backend"
        )]
        output: Option<PathBuf>,
        /// For a root whose backend is s3: write the state at the selected workspace's key, in place of choudoufu-live's marker (leaving).
        #[arg(long = "to-backend")]
        to_backend: bool,
    },
    /// Create records from a terraform state v4 document: conditional creates only.
    #[command(
        long_about = "Create one record per resource instance and output of a terraform state (version 4) document, e.g. a `terraform state pull` of another backend: the way in without running terraform.\n\nOnly creates are made (If-None-Match: *). Before anything is written, every address of the document is checked: if any already has a record in the estate, the import is refused naming them (exit 1) and nothing is written. A record another run creates meanwhile is refused by name (RecordConflictError, exit 4); the others land. Records of other addresses in the estate are left as they are. The store's safety check runs before the first write, as for a run.\n\nA malformed document (not JSON, not version 4, one address twice) is refused before anything is written."
    )]
    Import {
        /// The state document, e.g. terraform.tfstate; without it, for a root whose backend is s3, the stock state at the selected workspace's key (then replaced by choudoufu-live's marker).
        file: Option<PathBuf>,
    },
    /// Write the state a run could not write (its recovery file), conditionally on the versions that run read.
    #[command(
        long_about = "Write the state a `run` could not write because the record store did not answer: the recovery file it left (choudoufu-live-recovery-ESTATE-TIME-RUN.tfstate.json in the root).\n\nEach record is written as that run's own write would have been: conditionally on the version the run read (If-Match; If-None-Match: * for a new one), so a record another run changed since is refused by name (RecordConflictError, exit 4) and keeps that run's content, while the others land. Records that already hold the file's content, written by that run, count as written: recovering one file twice changes nothing. A file of another estate or store is refused (RecoveryEstateMismatch) and nothing is written. The store's safety check runs before the first write.\n\nDo not `terraform state push errored.tfstate` instead: that writes terraform's copy against the records as they are then, and can undo what other runs wrote since.\n\nExit status: 0 written (or nothing left to write), 1 the file is unreadable, of another estate, or the store still does not answer (the file is kept), 4 some records were refused."
    )]
    Recover {
        /// The recovery file `run` wrote.
        file: PathBuf,
    },
}

/// Run a `records` command.
pub async fn run(root: &Path, cmd: RecordsCommand) -> Result<i32, CliError> {
    match run_one(root, cmd).await {
        Err(e) if out::closed(&e) => Ok(0),
        done => done,
    }
}

/// Run one `records` command, its output through [`out`].
async fn run_one(root: &Path, cmd: RecordsCommand) -> Result<i32, CliError> {
    match cmd {
        RecordsCommand::Ls => current::ls(root).await,
        RecordsCommand::Claims => claims::claims(root).await,
        RecordsCommand::Show { address } => current::show(root, &address).await,
        RecordsCommand::History { address } => history::history(root, &address).await,
        RecordsCommand::Restore {
            address,
            version,
            dry_run,
        } => restore::restore(root, &address, &version, dry_run).await,
        RecordsCommand::Log { since, address } => {
            log::log(root, since.as_deref(), address.as_deref()).await
        }
        RecordsCommand::Export {
            to_backend: true, ..
        } => adopt::export_to_backend(root).await,
        RecordsCommand::Export { output, .. } => transfer::export(root, output.as_deref()).await,
        RecordsCommand::Import { file: Some(file) } => transfer::import(root, &file).await,
        RecordsCommand::Import { file: None } => adopt::import_from_backend(root).await,
        RecordsCommand::Recover { file } => recover::recover(root, &file).await,
    }
}
