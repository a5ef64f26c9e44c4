//! Program stamps: which commit of the configuration a run applied, and when that commit was made.

use std::path::Path;
use std::process::Command;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Environment variable that sets the stamp's commit.
pub const COMMIT_ENV: &str = "CHOUDOUFU_PROGRAM_COMMIT";
/// Environment variable that sets the stamp's commit time (RFC 3339).
pub const TIME_ENV: &str = "CHOUDOUFU_PROGRAM_TIME";

/// The commit and commit time of the configuration a run applied.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramStamp {
    /// The commit, or `unknown`.
    pub commit: String,
    /// The commit time in RFC 3339, or empty when unknown.
    pub time: String,
}

impl ProgramStamp {
    /// The stamp from the environment, else from git in `root`, else unknown.
    pub fn detect(root: &Path) -> Self {
        let env_commit = std::env::var(COMMIT_ENV).ok().filter(|s| !s.is_empty());
        let env_time = std::env::var(TIME_ENV).ok().filter(|s| !s.is_empty());
        if env_commit.is_some() || env_time.is_some() {
            return ProgramStamp {
                commit: env_commit.unwrap_or_else(|| "unknown".into()),
                time: env_time.unwrap_or_default(),
            };
        }
        let out = Command::new("git")
            .arg("-C")
            .arg(root)
            .args(["log", "-1", "--format=%H%n%cI"])
            .output();
        if let Ok(out) = out
            && out.status.success()
        {
            let text = String::from_utf8_lossy(&out.stdout);
            let mut lines = text.lines();
            if let (Some(commit), Some(time)) = (lines.next(), lines.next()) {
                return ProgramStamp {
                    commit: commit.trim().to_string(),
                    time: time.trim().to_string(),
                };
            }
        }
        ProgramStamp {
            commit: "unknown".into(),
            time: String::new(),
        }
    }

    /// The commit time, when it parses.
    pub fn parsed_time(&self) -> Option<OffsetDateTime> {
        OffsetDateTime::parse(&self.time, &Rfc3339).ok()
    }

    /// True when this stamp's commit time is strictly later than `other`'s (unknown: not newer).
    pub fn is_newer_than(&self, other: &ProgramStamp) -> bool {
        match (self.parsed_time(), other.parsed_time()) {
            (Some(a), Some(b)) => a > b,
            _ => false,
        }
    }

    /// A short form for listings: `abcdef123456 @ 2026-01-01T00:00:00Z`.
    pub fn short(&self) -> String {
        let commit: String = self.commit.chars().take(12).collect();
        if self.time.is_empty() {
            commit
        } else {
            format!("{commit} @ {}", self.time)
        }
    }
}

/// Now, in RFC 3339 with nanoseconds, UTC.
pub fn now_rfc3339() -> String {
    OffsetDateTime::now_utc()
        .format(&Rfc3339)
        .unwrap_or_else(|_| String::from("1970-01-01T00:00:00Z"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_compares_commit_times() {
        let old = ProgramStamp {
            commit: "a".into(),
            time: "2026-01-01T00:00:00Z".into(),
        };
        let new = ProgramStamp {
            commit: "b".into(),
            time: "2026-01-01T01:00:00+00:30".into(),
        };
        assert!(new.is_newer_than(&old));
        assert!(!old.is_newer_than(&new));
        assert!(!old.is_newer_than(&old));
        assert!(!ProgramStamp::default().is_newer_than(&old));
    }
}
