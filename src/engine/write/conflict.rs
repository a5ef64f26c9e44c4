//! A record write another run's write got to first.

use std::fmt;

use crate::engine::operation::Operation;
use crate::store::Version;

/// One record whose conditional write met a version another run wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordConflict {
    /// The resource instance address (or the output's name).
    pub address: String,
    /// What this run tried: create, update or delete.
    pub op: Operation,
    /// The version this run read (none: it expected no record).
    pub expected: Option<Version>,
    /// The version the store holds now (none: no record).
    pub stored: Option<Version>,
}

impl fmt::Display for RecordConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: &Option<Version>| match v {
            Some(v) => v.to_string(),
            None => "no record".to_string(),
        };
        write!(
            f,
            "{} ({}): expected version {}, store has {}",
            self.address,
            self.op,
            show(&self.expected),
            show(&self.stored)
        )
    }
}
