//! Assembling the state document a session serves: terraform's order, a derived serial, the estate's lineage.

use sha2::{Digest, Sha256};

use super::{Session, Snapshot};
use crate::engine::layout::Layout;
use crate::engine::state::{self, Header, compare_versions};

/// The terraform version an assembled state names when no record says.
pub const FALLBACK_TERRAFORM_VERSION: &str = "1.0.0";

/// The lineage an estate has before any run wrote it: the same for every first run.
pub fn initial_lineage(layout: &Layout) -> String {
    uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_URL,
        format!("choudoufu-live:estate:{}", layout.estate()).as_bytes(),
    )
    .to_string()
}

/// The serial of a snapshot: a digest of its lineage and every record version, never zero.
pub fn serial_of(lineage: &str, snapshot: &Snapshot) -> u64 {
    let mut h = Sha256::new();
    h.update(lineage.as_bytes());
    for (key, entry) in &snapshot.records {
        h.update([0]);
        h.update(key.as_bytes());
        h.update([0]);
        h.update(entry.version.token.as_bytes());
    }
    let d = h.finalize();
    let mut n = [0u8; 8];
    n.copy_from_slice(&d[..8]);
    (u64::from_be_bytes(n) & ((1 << 52) - 1)) + 1
}

/// The header of a snapshot's document: its lineage and serial (or those given), and terraform version.
pub fn header_of(layout: &Layout, snapshot: &Snapshot, fixed: Option<(String, u64)>) -> Header {
    let lineage = snapshot
        .estate
        .as_ref()
        .map(|(m, _)| m.lineage.clone())
        .unwrap_or_else(|| initial_lineage(layout));
    let terraform_version = snapshot
        .records
        .values()
        .filter_map(|e| e.record.writer.terraform_version.clone())
        .min_by(|a, b| compare_versions(a, b))
        .unwrap_or_else(|| FALLBACK_TERRAFORM_VERSION.into());
    match fixed {
        Some((lineage, serial)) => Header {
            lineage,
            serial,
            terraform_version,
        },
        None => Header {
            serial: serial_of(&lineage, snapshot),
            lineage,
            terraform_version,
        },
    }
}

impl Session {
    /// The state document of the last read (with a pinned plan's lineage and serial).
    pub async fn state_document(&self) -> Vec<u8> {
        let mut view = self.view.lock().await;
        let fixed = view
            .pin
            .as_ref()
            .map(|pin| (pin.lineage.clone(), pin.serial));
        let header = header_of(&self.layout, &view.snapshot, fixed);
        view.served = Some((header.lineage.clone(), header.serial));
        state::assemble_bytes(
            &header,
            view.snapshot.records.values().map(|e| &e.record.item),
        )
    }
}
