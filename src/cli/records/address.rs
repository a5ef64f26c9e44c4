//! Addresses as the records commands print them.

use crate::engine::record::RecordKind;

/// An address as the commands print it: `output.NAME` for an output.
pub(super) fn shown_address(kind: RecordKind, address: &str) -> String {
    match kind {
        RecordKind::Resource => address.to_string(),
        RecordKind::Output => format!("output.{address}"),
    }
}
