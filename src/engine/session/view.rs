//! A session's view: the last read, the write base, a saved plan's pin, what the run claimed, and what it could not write.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::snapshot::{BaseRef, Snapshot};
use crate::engine::claims::Claims;
use crate::engine::image::Held;

/// A document terraform sent whose write failed for a store error, and that error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unwritten {
    /// The state document, as terraform sent it.
    pub doc: Vec<u8>,
    /// The error its last write met.
    pub last_error: String,
}

/// A saved plan's view, pinned for its apply: writes diff against what the plan read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pin {
    /// The lineage the plan saw.
    pub lineage: String,
    /// The serial the plan saw.
    pub serial: u64,
    /// Every record the plan read, by key.
    pub base: BTreeMap<String, BaseRef>,
    /// The keys of the records the plan changes.
    pub changes: BTreeSet<String>,
}

/// A session's view: the last read, the write base, a saved plan's pin, and what the run claimed.
#[derive(Debug, Default)]
pub(super) struct View {
    pub(super) snapshot: Snapshot,
    /// The write base ([`View::base`]); none: `snapshot`'s, not made until a write or a pin needs it (a read that nothing writes against makes none).
    base: Option<BTreeMap<String, BaseRef>>,
    pub(super) pin: Option<Pin>,
    pub(super) served: Option<(String, u64)>,
    /// The keys this run's plan changes; a write of any other record is skipped when another run moved or holds it.
    pub(super) changes: Option<BTreeSet<String>>,
    /// This run's claims, whose marks are cleared as their records land.
    pub(super) claims: Option<Arc<Claims>>,
    /// Whether a refused output write is left for the door to reconcile instead of being a conflict.
    pub(super) reconcile_outputs: bool,
    /// Outputs whose write met another run's newer value.
    pub(super) stale_outputs: BTreeSet<String>,
    /// Resources a cone plan refreshed whose records are old: the next write rewrites each unchanged one, so it carries the refresh's time.
    pub(super) refreshed: BTreeSet<String>,
    /// What this run knows of the estate image (`read.rs`).
    pub(super) image: Held,
    /// Whether `snapshot` is a read (not yet: the first read fetches the stored image).
    pub(super) read_before: bool,
    /// The newest document terraform sent whose write failed for a store error, until a write lands.
    pub(super) unwritten: Option<Unwritten>,
    /// The error of the last write when it failed for another reason than the store or a conflict, until a write lands.
    pub(super) refused: Option<String>,
}

impl View {
    /// The write base: each record's version and digest this run writes against (made from the last read the first time it is needed).
    pub(super) fn base(&mut self) -> &mut BTreeMap<String, BaseRef> {
        self.base.get_or_insert_with(|| self.snapshot.refs())
    }

    /// Write against `base` (a saved plan's, or a recovered run's) from now on, whatever is read.
    pub(super) fn set_base(&mut self, base: BTreeMap<String, BaseRef>) {
        self.base = Some(base);
    }

    /// Write against the last read's versions (the base is made from it when first needed).
    pub(super) fn base_from_read(&mut self) {
        self.base = None;
    }
}
