//! How a plan refreshes: every resource (`full`, terraform's own way) or the change cone (`cone`).

use std::time::Duration;

use thiserror::Error;

/// How long a record may go without a real refresh before a cone plan refreshes it anyway, unless `refresh_max_age` says otherwise.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(24 * 60 * 60);

/// How a plan through `run` refreshes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RefreshMode {
    /// Every resource is read from the cloud, as terraform does alone.
    #[default]
    Full,
    /// Only the change cone is read from the cloud; the other resources are answered from their records.
    Cone,
}

/// A refresh mode that is neither `full` nor `cone`.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("refresh mode {0:?} is not one of \"full\" or \"cone\"")]
pub struct RefreshModeError(pub String);

impl RefreshMode {
    /// The mode `text` names (`full` or `cone`).
    pub fn parse(text: &str) -> Result<RefreshMode, RefreshModeError> {
        match text.trim() {
            "full" => Ok(RefreshMode::Full),
            "cone" => Ok(RefreshMode::Cone),
            other => Err(RefreshModeError(other.to_string())),
        }
    }

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            RefreshMode::Full => "full",
            RefreshMode::Cone => "cone",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_by_name() {
        assert_eq!(RefreshMode::parse("cone"), Ok(RefreshMode::Cone));
        assert_eq!(RefreshMode::parse(" full "), Ok(RefreshMode::Full));
        assert!(RefreshMode::parse("some").is_err());
        assert_eq!(RefreshMode::default(), RefreshMode::Full);
    }
}
