//! Why a plan's JSON is refused.

use thiserror::Error;

/// A plan's JSON (`terraform show -json PLAN`) that is not as terraform writes it.
#[derive(Debug, Error)]
pub enum PlanJsonError {
    /// The text is not JSON at all.
    #[error("not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// JSON whose structure is not a plan's (a field of the wrong type, a change without an address).
    #[error("not a plan as terraform writes it: {0}")]
    Malformed(#[source] serde_json::Error),
    /// JSON that is a list, not a plan's object.
    #[error("not a plan as terraform writes it: a list, not an object")]
    NotAnObject,
}

impl PlanJsonError {
    /// A parse error as one of these: not JSON at all, or JSON of the wrong structure.
    pub(super) fn of(e: serde_json::Error) -> PlanJsonError {
        match e.classify() {
            serde_json::error::Category::Data => PlanJsonError::Malformed(e),
            _ => PlanJsonError::NotJson(e),
        }
    }
}
