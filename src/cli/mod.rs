//! The command line: `records`, `run`, `bucket`, `iam`, `shim`.
//!
//! By owner: `command` the arguments and the dispatch, `records`, `bucket` and `iam` their
//! commands (the policies `iam` prints are the cloud's: `cloud::<cloud>`), `shim` the `terraform`/`tofu`
//! shims and their command, and `error` what a failed command reports.

pub mod bucket;
mod command;
mod error;
pub mod iam;
pub mod records;
pub mod shim;

pub use command::{Cli, Command, main};
pub use error::{CliError, EXIT_ERROR};
