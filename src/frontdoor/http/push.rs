//! `terraform state push` without `-force`, guarded: a document not made from the state this run just served is refused, since writing it would undo what other runs wrote after it was pulled.
//!
//! Terraform checks a push itself, against the state it reads first: a file of another
//! lineage, or of a lower serial, is refused unless `-force`. Here the serial is derived from
//! the records' versions (a digest, docs/architecture.md), so an older pull's serial is as
//! likely higher as lower, and terraform's check would let half of them through. What terraform
//! sends for a file it accepts is the file's serial plus one. A file pulled from the state
//! served now carries that serial, or that serial bumped by the user's edit; an older pull
//! carries another digest, which falls in that narrow window with odds of about
//! `PUSH_BUMP / 2^52`.

use thiserror::Error;

/// How far past the served serial a pushed file's serial may be: the user's bump of a pulled file.
pub const PUSH_BUMP: u64 = 1_000_000;

/// A pushed state was not made from the state served now.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error(
    "StalePushError: the pushed state (serial {file}) was not pulled from the state this estate holds now (serial {served}): it is older than the records other runs have written since, and pushing it would undo them. Nothing was written. Pull the state again and make the change on that, or push with -force to overwrite the estate with the file."
)]
pub struct StalePushError {
    /// The file's serial (terraform sends it plus one).
    pub file: u64,
    /// The serial served before the push.
    pub served: u64,
}

/// Whether a pushed document terraform sent with serial `sent` may land on the state served with serial `served` (none: nothing was served, or the estate held no records, which any file may replace).
pub fn check(sent: u64, served: Option<u64>) -> Result<(), StalePushError> {
    let Some(served) = served else {
        return Ok(());
    };
    let file = sent.saturating_sub(1);
    match file.checked_sub(served) {
        Some(bump) if bump <= PUSH_BUMP => Ok(()),
        _ => Err(StalePushError { file, served }),
    }
}

/// The serial a state document carries (zero when it has none or is not a state document: its write refuses it then).
pub fn serial_of(body: &[u8]) -> u64 {
    #[derive(serde::Deserialize)]
    struct Head {
        #[serde(default)]
        serial: u64,
    }
    serde_json::from_slice::<Head>(body)
        .map(|h| h.serial)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_pull_of_the_served_state_may_be_pushed() {
        // The served state's own pull, unchanged but for its serial, or bumped by an edit.
        assert_eq!(check(101, Some(100)), Ok(()));
        assert_eq!(check(102, Some(100)), Ok(()));
        assert_eq!(check(101 + PUSH_BUMP, Some(100)), Ok(()));
        // An older pull: another digest, higher or lower.
        assert_eq!(
            check(102 + PUSH_BUMP, Some(100)),
            Err(StalePushError {
                file: 101 + PUSH_BUMP,
                served: 100
            })
        );
        assert!(check(51, Some(100)).is_err());
        assert!(check(0, Some(100)).is_err());
        assert!(check(u64::MAX, Some(100)).is_err());
        // Nothing served, or an empty estate: any file.
        assert_eq!(check(7, None), Ok(()));
    }

    #[test]
    fn the_serial_is_read_from_the_document() {
        assert_eq!(serial_of(br#"{"version":4,"serial":42,"lineage":"l"}"#), 42);
        assert_eq!(serial_of(br#"{"version":4}"#), 0);
        assert_eq!(serial_of(b"not json"), 0);
        assert_eq!(serial_of(br#"{"serial":-1}"#), 0);
    }
}
