//! What a run asks to claim.

use crate::engine::operation::Operation;

/// One change a run wants to claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    /// The resource instance address (a deposed object: `ADDR (deposed KEY)`).
    pub address: String,
    /// What the run will do.
    pub operation: Operation,
    /// What the change depends on: resource addresses (instance keys are ignored) or `module.NAME`.
    pub dependencies: Vec<String>,
}
