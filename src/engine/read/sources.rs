//! What a read may take records from besides the store, and what it knows of the image.

use std::sync::Arc;

use crate::engine::image::{Held, Image};
use crate::engine::read_cache::ReadCache;
use crate::engine::session::snapshot::Snapshot;
use crate::engine::write_log::{Clock, Timing};
use crate::store::Version;

/// A stored image as fetched (none: none stored, or unusable), and its version.
pub(super) type Fetched = (Option<Arc<Image>>, Option<Version>);

/// Where a read may take records from besides the store.
#[derive(Clone, Debug, Default)]
pub struct Sources<'a> {
    /// The root's read cache (and its local copy of the image).
    pub cache: Option<&'a ReadCache>,
    /// This run's last read, if it read before (then the stored image is fetched only when
    /// the listing shows it would save more than the bound).
    pub prior: Option<&'a Snapshot>,
    /// What this run knows of the image from its last read.
    pub image: Held,
    /// The reader's clock (none: this machine's), which judges the image's watermark.
    pub clock: Option<&'a dyn Clock>,
    /// The write log's figures.
    pub timing: Timing,
}
