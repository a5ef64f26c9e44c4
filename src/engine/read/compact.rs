//! Compaction: a new image of every record a full read got, with its write log mark (the
//! watermark, and the entries whose writes may still land).

use super::got::{Decoded, From, Got};
use super::plan::pending_of;
use crate::engine::image::{Image, ImageEntry, LogMark, RANGE_KEYS};
use crate::engine::layout::Layout;
use crate::engine::record::Record;
use crate::engine::session::error::SessionError;
use crate::engine::state::InstanceRank;
use crate::engine::write_log::{Timing, time_key};
use crate::store::{self, DynStore, KeyRange};

/// A new image's write log mark: the watermark below `listing_started` (the reader's clock
/// just before it listed the records in `got`), and every entry since the pending lifetime
/// whose write those records do not hold and may still land.
pub(super) async fn log_mark(
    store: &DynStore,
    layout: &Layout,
    got: &[Got],
    listing_started: std::time::SystemTime,
    timing: &Timing,
) -> Result<LogMark, SessionError> {
    let oldest = listing_started
        .checked_sub(timing.pending_lifetime())
        .unwrap_or(std::time::UNIX_EPOCH);
    let window = KeyRange::new(None, Some(time_key(layout, oldest)));
    let listed =
        store::list_range(store.as_ref(), &layout.log_prefix(), &window, RANGE_KEYS).await?;
    Ok(LogMark {
        from: timing.log_from(listing_started),
        pending: pending_of(layout, listed, got, listing_started, timing),
    })
}

/// The bytes of a new image of every record read.
pub(super) fn image_of(
    layout: &Layout,
    run_id: &str,
    got: &[Got],
    image: Option<&Image>,
    mark: &LogMark,
) -> Vec<u8> {
    // Records in final form: an image entry as it is, any other record encoded again (what
    // the store holds was written so, but the image promises it).
    let encoded: Vec<Option<Vec<u8>>> = got
        .iter()
        .map(|g| match (&g.from, &g.item) {
            (From::Prior, Decoded::Estate(meta, _)) => Some(meta.encode()),
            (From::Image, _) | (_, Decoded::Estate(..)) => None,
            (_, Decoded::Record(entry)) => match entry.image_bytes() {
                Some(bytes) => Some(bytes.to_vec()),
                // One that no longer decodes is left out: a read fetches it from the store.
                None => entry.record().ok().map(Record::encode),
            },
        })
        .collect();
    let ranks: Vec<Option<InstanceRank>> = got
        .iter()
        .map(|g| match &g.item {
            Decoded::Record(e) => e.rank(),
            Decoded::Estate(..) => None,
        })
        .collect();
    let entries = got
        .iter()
        .zip(&encoded)
        .zip(&ranks)
        .filter_map(|((g, enc), rank)| {
            let (version, digest, log) = match &g.item {
                Decoded::Estate(_, v) => (v, "", None),
                Decoded::Record(e) => (&e.version, e.digest.as_str(), e.log()),
            };
            let bytes: &[u8] = match (&g.from, enc) {
                (_, Some(b)) => b,
                (From::Cache(b) | From::Store(b), None) => b,
                (From::Image, None) => image?.entry_at(&g.key, version)?.bytes,
                (From::Prior, None) => return None,
            };
            Some(ImageEntry {
                rank: rank.as_ref(),
                key: &g.key,
                version,
                digest,
                bytes,
                log,
            })
        });
    Image::encode(layout, run_id, Some(mark), entries)
}
