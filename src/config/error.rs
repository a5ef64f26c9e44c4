//! Why the root's live block or backend cannot be used.

use std::path::PathBuf;

use thiserror::Error;

use super::run_sets::BACKEND_SETTINGS_RUN_SETS;

/// The root's `live` block is missing or invalid.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// No live block anywhere in the root.
    #[error(
        "no live block in {root}: add a file live.hcl to the root with\n\n  live {{\n    estate = \"my-estate\"\n    record_store \"local\" {{\n      path = \".live-records\"\n    }}\n  }}\n\n(or, for choudoufu, the same block inside terraform {{}})"
    )]
    NoLiveBlock {
        /// The root folder.
        root: PathBuf,
    },
    /// Two live blocks: in two files, or twice in one.
    #[error("two live blocks: {first} and {second}; keep exactly one")]
    TwoLiveBlocks {
        /// `file:line` of the first.
        first: String,
        /// `file:line` of the second.
        second: String,
    },
    /// A file that is not valid HCL.
    #[error("{file}: {message}")]
    Parse {
        /// The file.
        file: String,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A live block whose content is wrong.
    #[error("{at}: {message}")]
    Invalid {
        /// `file:line` of the offending item.
        at: String,
        /// What is wrong and what to write instead.
        message: String,
    },
    /// The root's backend block is of another type than `http`.
    #[error(
        "{at}: backend {kind:?}: `choudoufu-live run` serves the state itself; replace it with backend \"http\" {{}}"
    )]
    NotHttpBackend {
        /// `file:line` of the block.
        at: String,
        /// Its type, e.g. `local`.
        kind: String,
    },
    /// The root's backend block left http, and terraform's working folder still uses http:
    /// a migration out of the records, which only `init -migrate-state` makes.
    #[error(
        "{at}: backend {kind:?}: `choudoufu-live run` serves the state over backend \"http\", and this root's {stored} still names backend \"http\". To move the estate's state to backend {kind:?}, run `choudoufu-live run -- terraform init -migrate-state` (the records stay in the store); to keep using the records, put back backend \"http\" {{}}"
    )]
    LeaveWithInit {
        /// `file:line` of the new backend block (the root's folder when there is none).
        at: String,
        /// The new backend's type (`local` when the block was removed).
        kind: String,
        /// terraform's stored backend file, e.g. `.terraform/terraform.tfstate`.
        stored: String,
    },
    /// The root has no `backend "http" {}` for `run` to point at its server.
    #[error(
        "no backend \"http\" block in {root}: `choudoufu-live run` serves the state over terraform's HTTP backend; add to a .tf file in the root:\n\n  terraform {{\n    backend \"http\" {{}}\n  }}\n\n(leave address, lock_address and unlock_address out: run sets the address for each run)"
    )]
    NoHttpBackend {
        /// The root folder.
        root: PathBuf,
    },
    /// `.terraform/terraform.tfstate` stores a backend setting that wins over the ones `run` gives terraform.
    #[error(
        "{file} stores backend \"http\" `{setting}` (set by `terraform init -backend-config=...`); terraform would use it instead of this run's own state server and bypass choudoufu-live, so terraform was not started and nothing was read or written. Clear it with `choudoufu-live run -- terraform init -reconfigure`, without -backend-config for {BACKEND_SETTINGS_RUN_SETS}"
    )]
    StoredBackend {
        /// The backend file.
        file: PathBuf,
        /// The stored setting.
        setting: String,
    },
    /// `init -backend-config` sets what `run` gives terraform itself.
    #[error(
        "{arg}: -backend-config sets `{setting}`, which `choudoufu-live run` gives terraform itself (this run's own state server and its credentials); remove it. Nothing was started."
    )]
    BackendConfigArg {
        /// The argument (or the file it names).
        arg: String,
        /// The setting it sets.
        setting: String,
    },
    /// A file that could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}
