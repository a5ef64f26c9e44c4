//! What a change does to one resource instance: planned from a plan, claimed in a mark.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// What a planned (and claimed) change does to one resource instance.
///
/// Stored in pending marks by its name (`"create"`, ...), as earlier programs wrote it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    /// A new object.
    Create,
    /// An in-place update.
    Update,
    /// A destroy.
    Delete,
    /// A destroy and a create, in either order.
    Replace,
    /// Removed from the state, the object kept (`removed { lifecycle { destroy = false } }`).
    Forget,
    /// Only moved to a new address (`moved` block).
    Move,
    /// An existing object imported (`import` block).
    Import,
}

impl Operation {
    /// Every operation, in declaration order.
    pub const ALL: [Operation; 7] = [
        Operation::Create,
        Operation::Update,
        Operation::Delete,
        Operation::Replace,
        Operation::Forget,
        Operation::Move,
        Operation::Import,
    ];

    /// The name marks and messages use.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "create",
            Operation::Update => "update",
            Operation::Delete => "delete",
            Operation::Replace => "replace",
            Operation::Forget => "forget",
            Operation::Move => "move",
            Operation::Import => "import",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not an [`Operation`].
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("not an operation (one of create, update, delete, replace, forget, move, import)")]
pub struct UnknownOperation;

impl FromStr for Operation {
    type Err = UnknownOperation;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Operation::ALL
            .into_iter()
            .find(|o| o.as_str() == s)
            .ok_or(UnknownOperation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_print_and_serialise_alike() {
        for op in Operation::ALL {
            assert_eq!(op.as_str().parse::<Operation>(), Ok(op));
            assert_eq!(op.to_string(), op.as_str());
            let json = serde_json::to_string(&op).unwrap();
            assert_eq!(json, format!("\"{}\"", op.as_str()));
            assert_eq!(serde_json::from_str::<Operation>(&json).unwrap(), op);
        }
        assert_eq!("obliterate".parse::<Operation>(), Err(UnknownOperation));
        assert!(serde_json::from_str::<Operation>("\"Create\"").is_err());
    }
}
