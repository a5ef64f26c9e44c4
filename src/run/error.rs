//! Why `run` stopped before or around terraform, and the exit statuses it ends with.

use thiserror::Error;

use crate::config::ConfigError;
use crate::engine::claims::ClaimError;
use crate::engine::plan::PlanJsonError;
use crate::engine::session::SessionError;
use crate::store::StoreError;

/// Why `run` stopped before or around terraform (terraform's own failures are its exit status).
#[derive(Debug, Error)]
pub enum RunError {
    /// The root's live block or backend block is wrong.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The estate could not be read or written.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// A claim, heartbeat or release could not reach the store.
    #[error("claims: {0}")]
    Store(#[from] StoreError),
    /// The record store could not be used (not reached, the credentials refused, no such bucket): terraform was not started.
    #[error("the record store cannot be used, so terraform was not started: {0}")]
    StoreRefused(#[source] StoreError),
    /// A claim could not be made.
    #[error("claims: {0}")]
    Claim(#[from] ClaimError),
    /// terraform (or tofu) could not be started.
    #[error("cannot start {program}: {source}")]
    Start {
        /// The program.
        program: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// `terraform show -json` of a plan failed or gave no JSON.
    #[error("{0}")]
    Show(String),
    /// A plan's JSON is not as terraform writes it.
    #[error(transparent)]
    PlanJson(#[from] PlanJsonError),
    /// A plan or stamp file could not be read or written.
    #[error("{what}: {source}")]
    File {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The state server or the signal handlers could not be set up.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// terraform planned without reading the state through this run: its changes cannot be checked.
    #[error(
        "terraform planned without reading the state through this run, so its changes cannot be checked; nothing was applied"
    )]
    Unread,
    /// The provider door could not open, or refused the plan.
    #[error(transparent)]
    Door(#[from] crate::frontdoor::provider::DoorError),
    /// The command line names no command.
    #[error("run needs a command: choudoufu-live run -- terraform apply")]
    NoCommand,
    /// A root whose backend is `s3` run with the provider door off.
    #[error(
        "the root's backend is s3, and `run` serves it through its S3 door, which needs the provider door: with --provider-door=off terraform would start the providers with the door's AWS_ENDPOINT_URL_S3 and credentials, and the AWS provider's own S3 calls would reach the door. Nothing was run; run with the provider door on (the default)"
    )]
    S3NeedsProviderDoor,
    /// The backend's bucket holds terraform's own state at the selected workspace's key.
    #[error(
        "the bucket {bucket:?} holds terraform's own state at {key:?}: `run` serves this workspace from records only, and terraform would plan to create everything that state holds again. Nothing was run. Move it into records first: `terraform state pull > stock.tfstate` (plain terraform), then `choudoufu-live run -- terraform state push stock.tfstate`, then move the object at {key:?} away (docs/run.md)"
    )]
    StockState {
        /// The bucket.
        bucket: String,
        /// The state's key.
        key: String,
    },
    /// `CHOUDOUFU_REFRESH` names no refresh mode.
    #[error(transparent)]
    RefreshEnv(#[from] super::args::RefreshEnvError),
}

/// Exit status when a saved plan is refused (its changes moved, or it has no stamp), as choudoufu uses.
pub const EXIT_PLAN_REFUSED: i32 = 3;
/// Exit status when a record write met another run's newer record.
pub const EXIT_CONFLICT: i32 = 4;
/// Exit status when a change, or a resource it depends on, is claimed by another live run: nothing was applied.
pub const EXIT_IN_FLIGHT: i32 = 5;
/// Exit status when the state terraform could not save was not written either: it is in a recovery file.
pub const EXIT_UNWRITTEN: i32 = 6;
/// Exit status when two or more live objects carry one planned create's markers (or one cannot be bound): nothing was created.
pub const EXIT_COLLISION: i32 = 7;
