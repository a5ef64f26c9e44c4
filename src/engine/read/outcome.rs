//! What a read gives: the records, the image to hold, a new image when one is due, and where each record came from.

use crate::engine::image::Held;
use crate::engine::session::snapshot::Snapshot;
use crate::store::Version;

/// Where each record of a read came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// State records listed.
    pub listed: usize,
    /// Listing requests' ranges.
    pub ranges: usize,
    /// Taken from this run's last read.
    pub from_prior: usize,
    /// Taken from the image.
    pub from_image: usize,
    /// Taken from the read cache.
    pub from_cache: usize,
    /// Fetched from the store.
    pub fetched: usize,
    /// Whether the stored image was fetched.
    pub image_fetched: bool,
    /// Pages of the write log a read through it listed (0: the read made the full listing).
    pub log_pages: usize,
}

/// What a read gives: the snapshot, the image to hold, and a new image to store if one is due.
#[derive(Debug)]
pub struct Read {
    /// The records read.
    pub snapshot: Snapshot,
    /// What to hold of the image for the next read.
    pub image: Held,
    /// Whether that is news for the root's local copy (the stored image was fetched).
    pub keep_local: bool,
    /// The stored image's version as listed (none: no image is stored).
    pub stored_image: Option<Version>,
    /// A new image's bytes, when the stored one missed more records than the bound.
    pub refresh: Option<Vec<u8>>,
    /// Where the records came from.
    pub stats: ReadStats,
}
