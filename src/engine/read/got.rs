//! The records a read got, each with where it came from, and the snapshot they make.

use super::outcome::ReadStats;
use crate::engine::layout::KeyKind;
use crate::engine::record::EstateMeta;
use crate::engine::session::error::SessionError;
use crate::engine::session::snapshot::{BaseEntry, Snapshot};
use crate::store::Version;

/// Where one record of a read came from.
pub(super) enum From {
    Prior,
    Image,
    Cache(Vec<u8>),
    Store(Vec<u8>),
}

/// One state record read: its key, what it holds, and where it came from.
pub(super) struct Got {
    pub(super) key: String,
    pub(super) item: Decoded,
    pub(super) from: From,
}

/// One state record decoded: the estate's, or a resource's or output's.
// Nearly every value is a record: boxing it would cost an allocation per record read.
#[allow(clippy::large_enum_variant)]
pub(super) enum Decoded {
    Estate(EstateMeta, Version),
    Record(BaseEntry),
}

/// A record read from the image: its key, its kind and its slot there.
#[derive(Clone)]
pub(super) struct FromImage {
    pub(super) key: String,
    pub(super) kind: KeyKind,
    pub(super) index: usize,
}

/// Take a record the image gave into `got`; one that did not decode is handed back with its
/// error (a warning said so), for the read to fetch.
pub(super) fn take_from_image(
    got: &mut Vec<Got>,
    stats: &mut ReadStats,
    wanted: FromImage,
    item: Result<Decoded, SessionError>,
) -> Option<(FromImage, SessionError)> {
    match item {
        Ok(item) => {
            stats.from_image += 1;
            got.push(Got {
                key: wanted.key,
                item,
                from: From::Image,
            });
            None
        }
        Err(e) => {
            tracing::warn!(key = %wanted.key, error = %e, "ignoring the estate image's entry: fetching the record");
            Some((wanted, e))
        }
    }
}

/// The snapshot of what a read got (sorted first, so the map is built in one pass).
pub(super) fn snapshot_of(mut got: Vec<Got>) -> Snapshot {
    got.sort_unstable_by(|a, b| a.key.cmp(&b.key));
    let mut estate = None;
    let records = got
        .into_iter()
        .filter_map(|g| match g.item {
            Decoded::Estate(meta, version) => {
                estate = Some((meta, version));
                None
            }
            Decoded::Record(entry) => Some((g.key, entry)),
        })
        .collect();
    Snapshot { estate, records }
}
