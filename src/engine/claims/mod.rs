//! Claims: the pending marks a run sets on the changes it is about to make, run liveness, and in-flight checks.
//!
//! A mark `p/<address>` says "run R is changing this resource". It is created with one
//! conditional request, so two runs can never both hold it. A run claims all the changes of
//! its plan at once, or none of them, before any provider call; it clears each mark as that
//! resource's record lands, and releases the rest when it ends. A run proves it is alive with
//! its run record `runs/<run id>`, written by its first heartbeat and kept fresh by the next;
//! until that first beat, each of its marks shows it alive by itself (a mark carries its run's
//! heartbeat interval), so a run that ends within one interval writes no run record at all.
//! The marks of a run whose last sign of life (its heartbeat, or its mark's time when it has
//! no run record) is older than [`MISSED_BEATS`] intervals are taken over by the next run that
//! needs them. Both doors (`run` and the choudoufu protocol) use this module.
//!
//! By owner: `wire` the mark and run record as stored, `liveness` the heartbeat and when
//! a run is gone, `holder` who holds what since when, `wanted` what a run asks for,
//! `view` the estate's marks read at once, `claim` the claim algorithm, `refusal` the
//! wording of refusals, and `begin` the one-change claim of the choudoufu protocol.

mod begin;
mod claim;
mod holder;
mod liveness;
mod refusal;
mod view;
mod wanted;
mod wire;

pub use begin::{BeginChangeError, Marked, begin_change};
pub use claim::{
    Alongside, ClaimError, Claims, clear_mark, clear_marks_of, held_by_other, read_marks,
    still_in_the_way,
};
pub use holder::{HeldChange, Holder, HolderRecord, TakenOver};
pub use liveness::{BeatError, DEFAULT_HEARTBEAT, Liveness, MISSED_BEATS, remove_gone_run};
pub use refusal::{
    Blocked, ClaimRefused, InFlightChangeError, InFlightDependencyError, Relation,
    takeover_messages,
};
pub use view::MarkView;
pub use wanted::Wanted;
pub use wire::{EncodeError, MARK_FORMAT, Mark, RUN_FORMAT, RunRecord, read_run};
