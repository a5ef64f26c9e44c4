//! Reading an estate by its full listing: list its state keys in parallel ranges (split at the
//! keys of the image in hand), then take each record, only at the version listed, from this
//! run's last read, the estate image, the read cache, or the store, in that order. A read that
//! found more records outside the stored image than the bound builds a new one to store.

use std::sync::Arc;

use super::compact::{image_of, log_mark};
use super::decode::{decode_entries_blocking, got_of_bytes};
use super::fetch::{fetch_image, fetch_records, list_cold, list_plans};
use super::got::{Decoded, From, FromImage, Got, snapshot_of, take_from_image};
use super::outcome::{Read, ReadStats};
use super::plan::{self, Wanted};
use super::sources::{Fetched, Sources};
use crate::engine::image::{Held, plan_ranges, refresh_bound};
use crate::engine::layout::{KeyKind, Layout};
use crate::engine::read_cache::ReadCache;
use crate::engine::session::error::SessionError;
use crate::engine::session::snapshot::Snapshot;
use crate::engine::write_log::{Clock, SystemClock};
use crate::store::{DynStore, Listed, Version};

/// How a full read starts: the stored image when it was already fetched, whether a new image is
/// due (the image is too old, or its log too long), and what is known of the image (the one
/// held, or the root's copy).
pub(super) struct FullRead {
    pub(super) fetched: Option<Fetched>,
    pub(super) compact: bool,
    pub(super) held: Held,
}

/// The listing of a full read: the keys listed, what is then known of the image, and the stored
/// image's version when it was fetched and could not be used.
struct Listing {
    listed: Vec<Listed>,
    held: Held,
    unusable: Option<Version>,
}

/// Read the estate by its full listing, from `start`.
pub(super) async fn read_full(
    store: &DynStore,
    layout: &Layout,
    parallel: usize,
    run_id: &str,
    sources: &Sources<'_>,
    start: FullRead,
) -> Result<Read, SessionError> {
    let mut stats = ReadStats::default();
    let clock: &dyn Clock = sources.clock.unwrap_or(&SystemClock);
    // Before the listing: every write log entry made after it is newer than the new image's watermark.
    let listing_started = clock.now();
    let Listing {
        listed,
        mut held,
        mut unusable,
    } = list(
        store,
        layout,
        parallel,
        sources.prior,
        start.fetched,
        start.held,
        &mut stats,
    )
    .await?;
    let (wanted, stored_image) = plan::sort_listing(layout, listed);
    stats.listed = wanted.len();
    let bound = refresh_bound(wanted.len());

    // The image in hand is not the stored one and misses many records: take the stored one.
    if plan::stored_image_due(
        &wanted,
        sources.prior,
        &held,
        stored_image.as_ref(),
        stats.image_fetched,
        bound,
    ) {
        let (got, version) = fetch_image(store, layout).await;
        stats.image_fetched = true;
        match got {
            Some(got) => held = Held::Image(Arc::new(got)),
            None => unusable = version,
        }
    }

    let got = take(store, layout, parallel, sources, &held, wanted, &mut stats).await?;
    crate::telemetry::metrics().records_read(got.len());

    let outside = plan::outside(&got, &held, stored_image.as_ref(), unusable.as_ref());
    let refresh = if plan::refresh_due(outside, bound, start.compact, got.len()) {
        let mark = log_mark(store, layout, &got, listing_started, &sources.timing).await?;
        Some(image_of(
            layout,
            run_id,
            &got,
            held.image().map(|i| &**i),
            &mark,
        ))
    } else {
        None
    };

    let snapshot = snapshot_of(got);
    tracing::debug!(
        listed = stats.listed,
        ranges = stats.ranges,
        from_prior = stats.from_prior,
        from_image = stats.from_image,
        from_cache = stats.from_cache,
        fetched = stats.fetched,
        image_fetched = stats.image_fetched,
        image_due = refresh.is_some(),
        "read the estate"
    );
    Ok(Read {
        snapshot,
        keep_local: stats.image_fetched,
        image: held,
        stored_image,
        refresh,
        stats,
    })
}

/// List the estate's state keys: cold, with the stored image in the same round as the
/// listings that need no split; else split at the keys the image (or this run's last read) holds.
async fn list(
    store: &DynStore,
    layout: &Layout,
    parallel: usize,
    prior: Option<&Snapshot>,
    fetched: Option<Fetched>,
    held: Held,
    stats: &mut ReadStats,
) -> Result<Listing, SessionError> {
    if let Held::Unknown = held {
        let ((got, version), listed) = list_cold(store, layout, parallel, fetched, stats).await?;
        stats.image_fetched = true;
        return Ok(match got {
            Some(image) => Listing {
                listed,
                held: Held::Image(image),
                unusable: None,
            },
            None => Listing {
                listed,
                held: Held::Absent,
                unusable: version,
            },
        });
    }
    let known = plan::known_keys(layout, &held, prior);
    let plans = plan_ranges(
        layout,
        known.iter().map(String::as_str),
        store.range_start(),
    );
    stats.ranges = plans.len();
    let listed = list_plans(store, plans, parallel).await?;
    Ok(Listing {
        listed,
        held,
        unusable: None,
    })
}

/// Each record `wanted` from this run's last read, the image, the cache, else the store.
async fn take(
    store: &DynStore,
    layout: &Layout,
    parallel: usize,
    sources: &Sources<'_>,
    held: &Held,
    wanted: Vec<Wanted>,
    stats: &mut ReadStats,
) -> Result<Vec<Got>, SessionError> {
    let mut got: Vec<Got> = Vec::with_capacity(wanted.len());
    let (from_image, mut rest) = take_prior(sources.prior, held, wanted, &mut got, stats);
    if let Some(image) = held.image().filter(|_| !from_image.is_empty()) {
        let decoded = decode_entries_blocking(layout, image, from_image).await;
        for (wanted, item) in decoded {
            if let Some((FromImage { key, kind, index }, e)) =
                take_from_image(&mut got, stats, wanted, item)
            {
                match image.entry_by_index(index) {
                    Some(entry) => rest.push((key, kind, entry.version.clone())),
                    // The slot was found in this image: never dropped from the read unsaid.
                    None => return Err(e),
                }
            }
        }
    }
    let to_fetch = take_cached(layout, sources.cache, rest, &mut got, stats)?;
    // A record gone since the listing is not part of this read.
    fetch_records(
        store,
        layout,
        parallel,
        sources.cache,
        to_fetch,
        &mut got,
        stats,
    )
    .await?;
    Ok(got)
}

/// Take into `got` each record of `wanted` this run's last read holds at its listed version;
/// the rest as the image's slots to decode, and the records it does not hold.
fn take_prior(
    prior: Option<&Snapshot>,
    held: &Held,
    wanted: Vec<Wanted>,
    got: &mut Vec<Got>,
    stats: &mut ReadStats,
) -> (Vec<FromImage>, Vec<Wanted>) {
    let mut from_image = Vec::with_capacity(wanted.len());
    let mut rest = Vec::new();
    for (key, kind, version) in wanted {
        if plan::in_prior(prior, &key, &kind, &version) {
            let item = prior.map(|p| match kind {
                KeyKind::Estate => p.estate.clone().map(|(m, v)| Decoded::Estate(m, v)),
                _ => p.records.get(&key).cloned().map(Decoded::Record),
            });
            if let Some(Some(item)) = item {
                stats.from_prior += 1;
                got.push(Got {
                    key,
                    item,
                    from: From::Prior,
                });
                continue;
            }
        }
        if let Some(index) = held.image().and_then(|i| i.index_at(&key, &version)) {
            from_image.push(FromImage { key, kind, index });
        } else {
            rest.push((key, kind, version));
        }
    }
    (from_image, rest)
}

/// Take into `got` each record of `rest` the read cache holds at its listed version; the keys
/// of the others, to fetch.
fn take_cached(
    layout: &Layout,
    cache: Option<&ReadCache>,
    rest: Vec<Wanted>,
    got: &mut Vec<Got>,
    stats: &mut ReadStats,
) -> Result<Vec<(String, KeyKind)>, SessionError> {
    let mut to_fetch = Vec::new();
    for (key, kind, version) in rest {
        if let Some(hit) = cache.and_then(|c| c.get(&key, &version)) {
            got.push(got_of_bytes(
                layout,
                key,
                &kind,
                hit.version,
                hit.bytes,
                From::Cache,
            )?);
            stats.from_cache += 1;
            continue;
        }
        to_fetch.push((key, kind));
    }
    Ok(to_fetch)
}
