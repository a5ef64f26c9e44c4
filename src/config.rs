//! The root's `live` block: in `terraform {}` of a `.tf` file (choudoufu), or at the top of `live.hcl`;
//! and the root's backend block as `run` needs it ([`migration`]: leaving for another backend).
//!
//! By owner: `live` the live block, `backend` the backend checks `run` makes, `backend_s3`
//! the `backend "s3"` block `run` serves, `migration`
//! leaving for another backend, `stored` terraform's stored backend, `run_sets` the settings
//! `run` gives terraform itself, `files` reading and placing HCL, and `error` what is wrong.

pub mod backend;
pub mod backend_s3;
mod error;
mod files;
mod live;
pub mod migration;
mod run_sets;
pub mod stored;

pub use backend::{check_http_backend, check_stored_backend};
pub use error::ConfigError;
pub use live::{LIVE_FILE, LiveConfig, MarkerListing};
