//! The `terraform` and `tofu` shims: `choudoufu-live shim DIR` writes them, and the binary called
//! by one of those names runs the real terraform, through `run` when the root has opted in.
//!
//! By owner: `name` the two names and their variables, `install` the `shim` command, `next`
//! the real program after the shim on PATH and the loop check, `route` which commands of which
//! roots pass through untouched, `dispatch` the exec, and `error` what a shim reports.

mod dispatch;
mod error;
mod install;
mod name;
mod next;
mod route;

pub use dispatch::{called_as, dispatch};
pub use error::ShimError;
pub use install::{ShimArgs, install};
pub use name::ShimName;
