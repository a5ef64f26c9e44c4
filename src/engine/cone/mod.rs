//! The change cone: which resources a plan refreshes from the cloud (`run --refresh=cone`), and which reads the provider door answers from their records.
//!
//! A cone plan is made once, with the door answering each resource read from its record
//! unless the record is too old or the object depends on a change ([`Watch`]). Each object
//! whose plan changes, or depends on a change, is then read from the cloud with the
//! dependencies it read, and compared with its record; when one drifted, the plan is made
//! again with the fresh reads. Every decision here is pure: the run and the door do the I/O.

mod age;
mod mode;
mod named;
mod watch;

pub use age::{LastRefresh, last_refresh};
pub use mode::{DEFAULT_MAX_AGE, RefreshMode, RefreshModeError};
pub use watch::{ObjectId, Outcome, Read, Watch, same_state};
