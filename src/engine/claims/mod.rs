//! Claims: the pending marks a run sets on the changes it is about to make, run liveness, and in-flight checks.

mod claim;

pub use claim::*;
