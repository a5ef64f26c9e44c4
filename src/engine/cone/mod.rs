//! The change cone: which resources a plan refreshes from the cloud (`run --refresh=cone`), and which reads the provider door answers from their records.
//!
//! A cone plan is made in two steps. A first plan without a refresh says what changes; the
//! cone is those changes, the resources whose plan depends on them and the dependencies they
//! read, and every resource whose record was last refreshed longer ago than the maximum age
//! ([`Cone::of`]). The real plan then refreshes as terraform does, except that each resource
//! read outside the cone is answered from its record ([`ReadAnswers`]). Every decision here
//! is pure: the run and the door do the I/O.

mod age;
mod decide;
mod mode;
mod reads;

pub use age::last_refresh;
pub use decide::{Cone, LastRefresh};
pub use mode::{DEFAULT_MAX_AGE, RefreshMode, RefreshModeError};
pub use reads::{Read, ReadAnswers};
