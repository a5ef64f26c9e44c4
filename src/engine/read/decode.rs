//! Decoding a read's records: one record's bytes, and an image's entries split over the
//! machine's cores (off the async threads when there are many).

use std::sync::Arc;

use super::got::{Decoded, From, FromImage, Got, snapshot_of};
use crate::cut::{Mechanism, cut};
use crate::engine::cores::over_cores;
use crate::engine::image::{Image, ImageEntry};
use crate::engine::layout::{KeyKind, Layout};
use crate::engine::record::{EstateMeta, Record};
use crate::engine::session::error::SessionError;
use crate::engine::session::snapshot::{BaseEntry, Snapshot};
use crate::store::Version;

/// Decode one record's bytes as fetched (or cached), computing its content digest.
fn decode(
    layout: &Layout,
    key: &str,
    kind: &KeyKind,
    version: Version,
    bytes: &[u8],
) -> Result<Decoded, SessionError> {
    Ok(match kind {
        KeyKind::Estate => Decoded::Estate(EstateMeta::decode(key, bytes, layout)?, version),
        _ => Decoded::Record(BaseEntry::decode(key, version, bytes, layout)?),
    })
}

/// The record `key` of `kind` read as `bytes` at `version`, decoded, its bytes kept as `from` says
/// (the cache's or the store's).
pub(super) fn got_of_bytes(
    layout: &Layout,
    key: String,
    kind: &KeyKind,
    version: Version,
    bytes: Vec<u8>,
    from: fn(Vec<u8>) -> From,
) -> Result<Got, SessionError> {
    let item = decode(layout, &key, kind, version, &bytes)?;
    Ok(Got {
        key,
        item,
        from: from(bytes),
    })
}

/// Take the image entry in slot `index`: a resource record its head describes stays undecoded
/// until a write looks into it; any other is decoded (in final form, its digest as the image holds it).
fn decode_entry(
    layout: &Layout,
    kind: &KeyKind,
    image: &Arc<Image>,
    index: usize,
    e: ImageEntry,
) -> Result<Decoded, SessionError> {
    Ok(match kind {
        KeyKind::Estate => Decoded::Estate(
            EstateMeta::decode(e.key, e.bytes, layout)?,
            e.version.clone(),
        ),
        _ => match BaseEntry::in_image(image, index, e.version.clone(), e.digest.to_string()) {
            Some(entry) if !cut(Mechanism::LazyRecords) => Decoded::Record(entry),
            _ => Decoded::Record(BaseEntry::new(
                e.version.clone(),
                e.digest.to_string(),
                Record::decode_final(e.key, e.bytes, layout, e.rank.cloned())?,
            )),
        },
    })
}

/// Decode `wanted` from `image`, split over the machine's cores; one result per wanted record, in order.
fn decode_entries(
    layout: &Layout,
    image: &Arc<Image>,
    wanted: &[FromImage],
) -> Vec<Result<Decoded, SessionError>> {
    let one = |w: &FromImage| match image.entry_by_index(w.index) {
        Some(e) => decode_entry(layout, &w.kind, image, w.index, e),
        None => Err(unreadable(&w.key, "the image holds no such entry")),
    };
    over_cores(wanted, 256, |_, chunk| {
        chunk.iter().map(one).collect::<Vec<_>>()
    })
    .into_iter()
    .flat_map(|part| {
        part.unwrap_or_else(|chunk| {
            chunk
                .iter()
                .map(|w| Err(unreadable(&w.key, "decoding it from the image failed")))
                .collect()
        })
    })
    .collect()
}

/// A record the image could not give, as a corrupt record named by its key.
pub(super) fn unreadable(key: &str, reason: &str) -> SessionError {
    SessionError::Corrupt(crate::engine::record::CorruptRecord {
        key: key.to_string(),
        reason: reason.to_string(),
    })
}

/// [`decode_entries`] off the async threads; each wanted record with its result.
pub(super) async fn decode_entries_blocking(
    layout: &Layout,
    image: &Arc<Image>,
    wanted: Vec<FromImage>,
) -> Vec<(FromImage, Result<Decoded, SessionError>)> {
    let (layout, image) = (layout.clone(), Arc::clone(image));
    let wanted = Arc::new(wanted);
    let task = {
        let wanted = Arc::clone(&wanted);
        tokio::task::spawn_blocking(move || decode_entries(&layout, &image, &wanted))
    };
    let results = task.await;
    let wanted = Arc::try_unwrap(wanted).unwrap_or_else(|w| (*w).clone());
    match results {
        Ok(results) => wanted.into_iter().zip(results).collect(),
        // The decoding task died: those records are fetched instead.
        Err(_) => wanted
            .into_iter()
            .map(|w| {
                let e = unreadable(&w.key, "decoding it from the image failed");
                (w, Err(e))
            })
            .collect(),
    }
}

/// Every record an image holds, decoded as a read decodes them (the CPU part of a read, for `make bench`).
pub fn snapshot_of_image(layout: &Layout, image: &Arc<Image>) -> Result<Snapshot, SessionError> {
    let mut got = Vec::with_capacity(image.len());
    for (FromImage { key, .. }, item) in decode_image(layout, image) {
        got.push(Got {
            key,
            item: item?,
            from: From::Image,
        });
    }
    Ok(snapshot_of(got))
}

/// Every state record `image` holds (its key, kind and slot) with its decoding, split over the
/// machine's cores, in the image's order.
fn decode_image(
    layout: &Layout,
    image: &Arc<Image>,
) -> Vec<(FromImage, Result<Decoded, SessionError>)> {
    let slots: Vec<usize> = (0..image.len()).collect();
    over_cores(&slots, DECODE_HERE, |_, chunk| {
        chunk
            .iter()
            .filter_map(|&i| image_record(layout, image, i, true))
            .collect::<Vec<_>>()
    })
    .into_iter()
    .flat_map(|part| {
        // A chunk whose thread died: its records are fetched instead.
        part.unwrap_or_else(|chunk| {
            chunk
                .iter()
                .filter_map(|&i| image_record(layout, image, i, false))
                .collect()
        })
    })
    .collect()
}

/// The state record in slot `index` of `image` with its decoding (when `decode`; else as not
/// decoded, to be fetched); none when the slot holds no state record.
fn image_record(
    layout: &Layout,
    image: &Arc<Image>,
    index: usize,
    decode: bool,
) -> Option<(FromImage, Result<Decoded, SessionError>)> {
    let e = image.entry_by_index(index)?;
    let kind = layout.classify(e.key)?;
    let item = if decode {
        decode_entry(layout, &kind, image, index, e)
    } else {
        Err(unreadable(e.key, "decoding it from the image failed"))
    };
    let key = e.key.to_string();
    Some((FromImage { key, kind, index }, item))
}

/// Entries below which an image's records are decoded on one thread, where the read is: a
/// thread's start costs more than they take.
const DECODE_HERE: usize = 4096;

/// The decoding of every record an image holds ([`decode_image`]).
pub(super) enum Decoding {
    /// Done where the read is (a small image).
    Done(Vec<(FromImage, Result<Decoded, SessionError>)>),
    /// Going on off the async threads, while the read waits for the write log.
    Started(tokio::task::JoinHandle<Vec<(FromImage, Result<Decoded, SessionError>)>>),
}

/// Start decoding every record `image` holds.
pub(super) fn start_decoding(layout: &Layout, image: &Arc<Image>) -> Decoding {
    if image.len() < DECODE_HERE {
        return Decoding::Done(decode_image(layout, image));
    }
    let (layout, image) = (layout.clone(), Arc::clone(image));
    Decoding::Started(tokio::task::spawn_blocking(move || {
        decode_image(&layout, &image)
    }))
}

/// What `decoding` of `image` gave; when its task died, each record it holds as not decoded
/// (to be fetched).
pub(super) async fn decoded(
    decoding: Decoding,
    layout: &Layout,
    image: &Arc<Image>,
) -> Vec<(FromImage, Result<Decoded, SessionError>)> {
    let task = match decoding {
        Decoding::Done(decoded) => return decoded,
        Decoding::Started(task) => task,
    };
    match task.await {
        Ok(decoded) => decoded,
        Err(_) => (0..image.len())
            .filter_map(|i| image_record(layout, image, i, false))
            .collect(),
    }
}
