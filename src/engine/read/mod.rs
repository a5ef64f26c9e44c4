//! Reading an estate: list its state keys in parallel ranges (split at the keys of the image
//! in hand), then take each record, only at the version listed, from this run's last read,
//! the estate image, the read cache, or the store, in that order; or, when the image's write
//! log allows, take only the records the log names since the image.
//!
//! The image in hand is this session's, else the root's local copy, else the stored image
//! (one GET before the listing). A read that found more records outside the stored image
//! than [`refresh_bound`](crate::engine::image::refresh_bound) says builds a new image for the
//! session to store.
//!
//! By job: `plan` the decisions (where each record is taken from, when the log can be read
//! through, when a new image is due), apart from the I/O; `estate` the read's entry points;
//! `through_log` the read through the image and the write log; `full` the full listing;
//! `fetch` what is taken from the store and the root's folder; `decode` decoding over the
//! cores; `compact` a new image and its log mark; `store_image` storing it and sweeping the
//! log; `sources`, `outcome` and `got` what a read takes, gives and holds on the way.

mod compact;
mod decode;
mod estate;
mod fetch;
mod full;
mod got;
mod outcome;
mod plan;
mod sources;
mod store_image;
mod through_log;

pub use decode::snapshot_of_image;
pub use estate::{read_estate, read_snapshot, read_snapshot_cached};
pub use fetch::fetch_image;
pub use outcome::{Read, ReadStats};
pub use sources::Sources;
pub use store_image::{put_image, sweep_log, written_image};
pub use through_log::LOG_FIRST_PAGE;
