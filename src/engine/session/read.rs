//! Reading an estate: list its state keys in parallel ranges (split at the keys of the image
//! in hand), then take each record, only at the version listed, from this run's last read,
//! the estate image, the read cache, or the store, in that order.
//!
//! The image in hand is this session's, else the root's local copy, else the stored image
//! (one GET before the listing). A read that found more records outside the stored image
//! than [`refresh_bound`] says builds a new image for the session to store.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::{StreamExt, stream};

use super::error::SessionError;
use super::handle::Session;
use super::snapshot::{BaseEntry, Snapshot};
use crate::cut::{Mechanism, cut};
use crate::engine::cores::over_cores;
use crate::engine::image::{
    Held, Image, ImageEntry, LogMark, RANGE_KEYS, RangePlan, load_local, local_may_hold_image,
    plan_ranges, plan_resources_after, refresh_bound, save_local,
};
use crate::engine::layout::{KeyKind, Layout};
use crate::engine::read_cache::ReadCache;
use crate::engine::record::{EstateMeta, Record};
use crate::engine::state::InstanceRank;
use crate::engine::write_log::{
    Clock, Fate, LogEntry, Seen, SystemClock, Timing, fate, holds, time_key,
};
use crate::store::{
    self, DynStore, KeyRange, Listed, Precondition, Streamed, Version, WriteOutcome,
};

/// A stored image as fetched (none: none stored, or unusable), and its version.
type Fetched = (Option<Arc<Image>>, Option<Version>);

/// Read every record of an estate through its stored image, `parallel` store calls at a time.
pub async fn read_snapshot(
    store: &DynStore,
    layout: &Layout,
    parallel: usize,
) -> Result<Snapshot, SessionError> {
    read_snapshot_cached(store, layout, parallel, None).await
}

/// Read every record of an estate; with a cache, fetch only records whose listed version is not cached.
pub async fn read_snapshot_cached(
    store: &DynStore,
    layout: &Layout,
    parallel: usize,
    cache: Option<&ReadCache>,
) -> Result<Snapshot, SessionError> {
    let sources = Sources {
        cache,
        ..Sources::default()
    };
    Ok(read_estate(store, layout, parallel, "", sources)
        .await?
        .snapshot)
}

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

/// Where one record of a read came from.
enum From {
    Prior,
    Image,
    Cache(Vec<u8>),
    Store(Vec<u8>),
}

/// One state record read: its key, what it holds, and where it came from.
struct Got {
    key: String,
    item: Decoded,
    from: From,
}

// Nearly every value is a record: boxing it would cost an allocation per record read.
#[allow(clippy::large_enum_variant)]
enum Decoded {
    Estate(EstateMeta, Version),
    Record(BaseEntry),
}

/// The stored image, or none (a corrupt or foreign one is ignored with a warning); and its version.
/// It is decoded as its bytes arrive, on a blocking thread.
pub async fn fetch_image(store: &DynStore, layout: &Layout) -> (Option<Image>, Option<Version>) {
    let key = layout.image_key();
    let could_not = |e: &dyn std::fmt::Display| {
        tracing::warn!(key = %key, error = %e, "could not read the estate image: reading every record from the store");
        (None, None)
    };
    let Streamed { version, chunks } = match store.get_streamed(&key).await {
        Ok(None) => return (None, None),
        Ok(Some(streamed)) => streamed,
        Err(e) => return could_not(&e),
    };
    let (runtime, decoding) = (tokio::runtime::Handle::current(), layout.clone());
    let decoded = tokio::task::spawn_blocking(move || {
        let mut chunks = chunks;
        Image::decode_streamed(&decoding, || runtime.block_on(chunks.next()))
    })
    .await;
    match decoded {
        Ok(Ok(Ok(image))) => (Some(image.stored_as(Some(version.clone()))), Some(version)),
        Ok(Ok(Err(e))) => {
            tracing::warn!(key = %key, error = %e, "ignoring the estate image, which is a cache only: reading every record from the store");
            (None, Some(version))
        }
        Ok(Err(e)) => could_not(&e),
        Err(e) => could_not(&e),
    }
}

/// List every state key in `plans` at once; keys in byte order.
async fn list_plans(
    store: &DynStore,
    plans: Vec<RangePlan>,
    parallel: usize,
) -> Result<Vec<Listed>, SessionError> {
    let pages: Vec<Result<Vec<Listed>, store::StoreError>> = stream::iter(plans)
        .map(|p| {
            let store = Arc::clone(store);
            async move { store::list_range(store.as_ref(), &p.prefix, &p.range, p.limit).await }
        })
        .buffered(parallel.max(1))
        .collect()
        .await;
    let mut listed = Vec::new();
    for page in pages {
        listed.extend(page?);
    }
    // The ranges are disjoint and listed in order; sort anyway, so any kind's order is fine.
    listed.sort_by(|a, b| a.key.cmp(&b.key));
    listed.dedup_by(|a, b| a.key == b.key);
    Ok(listed)
}

/// Keys per page of a cold read's first listing of the head (`_estate`, `d/`, `o/`), whose size it does not know yet.
const COLD_HEAD_KEYS: usize = 100;

/// A cold read's listing: in one round, the stored image, the head and the first page of the
/// resources; then, when there are more, the rest of the resources in ranges split at the
/// image's keys (one more round), or in plain pages without an image.
async fn list_cold(
    store: &DynStore,
    layout: &Layout,
    parallel: usize,
    fetched: Option<Fetched>,
    stats: &mut ReadStats,
) -> Result<(Fetched, Vec<Listed>), SessionError> {
    let [(head_prefix, head_range), (res_prefix, res_range)] = layout.state_segments();
    let image = async {
        match fetched {
            Some(f) => f,
            None => {
                let (image, version) = fetch_image(store, layout).await;
                (image.map(Arc::new), version)
            }
        }
    };
    let (image, head, first) = tokio::join!(
        image,
        store::list_range(store.as_ref(), &head_prefix, &head_range, COLD_HEAD_KEYS),
        store.list_range_page(&res_prefix, &res_range, RANGE_KEYS, None),
    );
    let (mut listed, first) = (head?, first?);
    stats.ranges = 2;
    let last = first.items.last().map(|l| l.key.clone());
    let more = first.next.is_some();
    listed.extend(first.items);
    if more {
        let known: Vec<&str> = image
            .0
            .as_ref()
            .map(|i| i.keys().collect())
            .unwrap_or_default();
        let plans = match &last {
            Some(after) => plan_resources_after(layout, known, after),
            // A page with a next page but no key (a kind that filters): list the resources again.
            None => plan_resources_after(layout, known, &res_prefix),
        };
        stats.ranges += plans.len();
        listed.extend(list_plans(store, plans, parallel).await?);
    }
    listed.sort_by(|a, b| a.key.cmp(&b.key));
    listed.dedup_by(|a, b| a.key == b.key);
    Ok((image, listed))
}

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
        _ => {
            let record = Record::decode(key, bytes, layout)?;
            Decoded::Record(BaseEntry::new(version, record.content_digest(), record))
        }
    })
}

/// GET `keys` (up to `parallel` at once), keep each found one in the read cache and decode it into `got`; a key found empty is left out.
async fn fetch_records(
    store: &DynStore,
    layout: &Layout,
    parallel: usize,
    cache: Option<&ReadCache>,
    keys: Vec<(String, KeyKind)>,
    got: &mut Vec<Got>,
    stats: &mut ReadStats,
) -> Result<(), SessionError> {
    let fetched: Vec<Result<_, SessionError>> = stream::iter(keys)
        .map(|(key, kind)| {
            let store = Arc::clone(store);
            async move {
                let stored = store.get(&key).await?;
                Ok((key, kind, stored))
            }
        })
        .buffer_unordered(parallel.max(1))
        .collect()
        .await;
    for result in fetched {
        let (key, kind, stored) = result?;
        let Some(stored) = stored else { continue };
        if let Some(c) = cache {
            c.put(&key, &stored.version, &stored.bytes);
        }
        let item = decode(layout, &key, &kind, stored.version, &stored.bytes)?;
        stats.fetched += 1;
        got.push(Got {
            key,
            item,
            from: From::Store(stored.bytes),
        });
    }
    Ok(())
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

/// Read the estate: the snapshot, the image to hold, and a new image if the stored one is stale.
pub async fn read_estate(
    store: &DynStore,
    layout: &Layout,
    parallel: usize,
    run_id: &str,
    sources: Sources<'_>,
) -> Result<Read, SessionError> {
    let mut stats = ReadStats::default();
    let clock: &dyn Clock = sources.clock.unwrap_or(&SystemClock);
    let (fetched, compact, mut held) =
        match read_through_log(store, layout, parallel, &sources).await? {
            Through::Read(read) => return Ok(read),
            Through::Full {
                fetched,
                compact,
                held,
            } => (fetched, compact, held),
        };
    // Before the listing: every write log entry made after it is newer than the new image's watermark.
    let listing_started = clock.now();
    // The stored image's version when it was fetched and could not be used.
    let mut unusable = None;
    let listed = if let Held::Unknown = held {
        // Cold: the stored image comes in the same round as the listings that need no split.
        let ((got, version), listed) =
            list_cold(store, layout, parallel, fetched, &mut stats).await?;
        stats.image_fetched = true;
        held = match got {
            Some(image) => Held::Image(image),
            None => {
                unusable = version;
                Held::Absent
            }
        };
        listed
    } else {
        // The listing, split at the keys the image (or this run's last read) holds.
        let known: Vec<String> = match (held.image(), sources.prior) {
            (Some(img), _) => img.keys().map(str::to_string).collect(),
            (None, Some(prior)) => prior
                .estate
                .as_ref()
                .map(|_| layout.estate_key())
                .into_iter()
                .chain(prior.records.keys().cloned())
                .collect(),
            (None, None) => Vec::new(),
        };
        let plans = plan_ranges(
            layout,
            known.iter().map(String::as_str),
            store.range_start(),
        );
        stats.ranges = plans.len();
        list_plans(store, plans, parallel).await?
    };

    let mut stored_image = None;
    let mut wanted = Vec::new();
    for item in listed {
        match layout.classify(&item.key) {
            Some(kind @ (KeyKind::Estate | KeyKind::Resource | KeyKind::Output)) => {
                wanted.push((item.key, kind, item.version))
            }
            Some(KeyKind::Image) => stored_image = Some(item.version),
            Some(KeyKind::Unknown) | None => {
                tracing::warn!(key = %item.key, "ignoring a key this layout does not write");
            }
            Some(_) => {} // provider records are not state
        }
    }
    stats.listed = wanted.len();
    let bound = refresh_bound(wanted.len());

    let in_prior = |key: &str, kind: &KeyKind, v: &Version| match (sources.prior, kind) {
        (Some(p), KeyKind::Estate) => p.estate.as_ref().is_some_and(|(_, pv)| pv.token == v.token),
        (Some(p), _) => p
            .records
            .get(key)
            .is_some_and(|e| e.version.token == v.token),
        (None, _) => false,
    };
    let held_is_stored = |held: &Held| {
        held.image()
            .and_then(|i| i.stored())
            .zip(stored_image.as_ref())
            .is_some_and(|(a, b)| a.token == b.token)
    };

    // The image in hand is not the stored one and misses many records: take the stored one.
    if stored_image.is_some() && !held_is_stored(&held) && !stats.image_fetched {
        let missing = wanted
            .iter()
            .filter(|(k, kind, v)| {
                !in_prior(k, kind, v) && held.image().is_none_or(|i| i.entry_at(k, v).is_none())
            })
            .count();
        if missing > bound {
            let (got, version) = fetch_image(store, layout).await;
            stats.image_fetched = true;
            match got {
                Some(got) => held = Held::Image(Arc::new(got)),
                None => unusable = version,
            }
        }
    }

    // Each record from this run's last read, the image, the cache, else the store.
    let mut got: Vec<Got> = Vec::with_capacity(wanted.len());
    let mut from_image = Vec::with_capacity(wanted.len());
    let mut rest = Vec::new();
    for (key, kind, version) in wanted {
        if in_prior(&key, &kind, &version) {
            let prior = sources.prior.map(|p| match kind {
                KeyKind::Estate => p.estate.clone().map(|(m, v)| Decoded::Estate(m, v)),
                _ => p.records.get(&key).cloned().map(Decoded::Record),
            });
            if let Some(Some(item)) = prior {
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
    if let Some(image) = held.image().filter(|_| !from_image.is_empty()) {
        let decoded = decode_entries_blocking(layout, image, from_image).await;
        for (FromImage { key, kind, index }, item) in decoded {
            match item {
                Ok(item) => {
                    stats.from_image += 1;
                    got.push(Got {
                        key,
                        item,
                        from: From::Image,
                    });
                }
                Err(e) => {
                    tracing::warn!(key = %key, error = %e, "ignoring the estate image's entry: fetching the record");
                    match image.entry_by_index(index) {
                        Some(entry) => rest.push((key, kind, entry.version.clone())),
                        // The slot was found in this image: never dropped from the read unsaid.
                        None => return Err(e),
                    }
                }
            }
        }
    }
    let mut to_fetch = Vec::new();
    for (key, kind, version) in rest {
        if let Some(hit) = sources.cache.and_then(|c| c.get(&key, &version)) {
            let item = decode(layout, &key, &kind, hit.version, &hit.bytes)?;
            stats.from_cache += 1;
            got.push(Got {
                key,
                item,
                from: From::Cache(hit.bytes),
            });
            continue;
        }
        to_fetch.push((key, kind));
    }
    // A record gone since the listing is not part of this read.
    fetch_records(
        store,
        layout,
        parallel,
        sources.cache,
        to_fetch,
        &mut got,
        &mut stats,
    )
    .await?;
    crate::telemetry::metrics().records_read(got.len());

    // Outside the stored image: everything when none is stored (or it is unusable), else what
    // it did not give; unknown (so no new image) when the stored one is not the one in hand.
    let stored_unusable = unusable
        .as_ref()
        .zip(stored_image.as_ref())
        .is_some_and(|(a, b)| a.token == b.token);
    let outside = if stored_image.is_none() || stored_unusable {
        got.len()
    } else if held_is_stored(&held) {
        // A record this run's last read gave is outside only if the image lacks it at that
        // version: else a read after this run's own writes would rewrite the whole image.
        let in_image = |g: &Got| match (&g.from, &g.item) {
            (From::Image, _) => true,
            (From::Prior, _) if cut(Mechanism::ImagePrior) => false,
            (From::Prior, Decoded::Record(e)) => held
                .image()
                .is_some_and(|i| i.entry_at(&g.key, &e.version).is_some()),
            (From::Prior, Decoded::Estate(_, v)) => held
                .image()
                .is_some_and(|i| i.entry_at(&g.key, v).is_some()),
            _ => false,
        };
        got.iter().filter(|g| !in_image(g)).count()
    } else {
        0
    };
    let refresh = if outside > bound || (compact && !got.is_empty()) {
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

/// What a read through the write log came to.
// A read is the common answer: boxing it would cost an allocation per read.
#[allow(clippy::large_enum_variant)]
enum Through {
    /// The read, made from the image and the records the log names.
    Read(Read),
    /// The log cannot be read through: list the estate (with the stored image, when it was
    /// fetched), and write a new image when `compact` (the image is too old, or its log too long).
    Full {
        fetched: Option<Fetched>,
        compact: bool,
        /// What is known of the image: the one held, or the root's copy.
        held: Held,
    },
}

/// The root's copy of the image, read off the runtime's threads (none known when that fails).
async fn load_local_blocking(cache: &ReadCache, layout: &Layout) -> Held {
    let (cache, layout) = (cache.clone(), layout.clone());
    tokio::task::spawn_blocking(move || load_local(&cache, &layout))
        .await
        .unwrap_or_default()
}

/// The most pages of the write log a read lists, whatever the estate's size.
const MAX_LOG_PAGES: usize = 10;

/// Entries on the write log's first page: more than a compaction lets change since the image
/// ([`refresh_bound`]'s floor) with room for the margin's, few enough that a read with nothing
/// new downloads some 27 KB, not the 270 KB of a full page of old entries.
pub const LOG_FIRST_PAGE: usize = 100;

/// How many pages of the write log a read of an image of `records` entries lists before it falls
/// back to the full listing: the full listing costs `ceil(records / 1000) + 2` requests in two
/// round trips (and then a compaction shortens the log for every later reader), the log one
/// request per page, each after the last; so at least 2, at most as many requests as the full
/// listing makes, and never more than [`MAX_LOG_PAGES`] round trips in a row.
fn log_page_bound(records: usize) -> usize {
    (records.div_ceil(RANGE_KEYS) + 1).clamp(2, MAX_LOG_PAGES)
}

/// What the write log holds after a read's first page.
enum LogRest {
    /// The entries after that page down to the watermark, in `pages` pages.
    Listed { keys: Vec<String>, pages: usize },
    /// More than the pages a read lists.
    Longer,
}

/// The write log after a full first page whose last key is `after`, down to the watermark's key
/// `boundary` (each kind's own start-after, then its pages), at most `pages` pages.
async fn list_log_rest(
    store: &DynStore,
    prefix: &str,
    after: &str,
    boundary: &str,
    pages: usize,
) -> Result<LogRest, SessionError> {
    let range = KeyRange::new(Some(after.to_string()), Some(boundary.to_string()));
    let mut keys = Vec::new();
    let mut token = None;
    for listed in 1..=pages {
        let page = store
            .list_range_page(prefix, &range, RANGE_KEYS, token)
            .await?;
        keys.extend(page.items.into_iter().map(|i| i.key));
        match page.next {
            None => {
                return Ok(LogRest::Listed {
                    keys,
                    pages: listed,
                });
            }
            Some(next) => token = Some(next),
        }
    }
    Ok(LogRest::Longer)
}

/// Where a record the write log names is taken from.
enum Pick {
    /// This run's last read holds every write the log names.
    Prior,
    /// The image holds every write the log names.
    Image,
    /// Every write the log names is a delete that landed.
    Gone,
    /// The store.
    Fetch,
}

/// Read through the image and the write log (docs/architecture.md, "A read"): in one round the
/// image (unless one is held) and the log's newest page; then only the records the log names
/// since the image's watermark (or as pending) that no copy holds. Falls back to the full
/// listing when there is no image, it predates the log or is older than the log's trust, or the
/// log since its watermark is longer than [`log_page_bound`] pages.
async fn read_through_log(
    store: &DynStore,
    layout: &Layout,
    parallel: usize,
    sources: &Sources<'_>,
) -> Result<Through, SessionError> {
    let mut held = sources.image.clone();
    if cut(Mechanism::LogRead) {
        if let (Held::Unknown, Some(cache)) = (&held, sources.cache) {
            held = load_local_blocking(cache, layout).await;
        }
        return Ok(Through::Full {
            fetched: None,
            compact: false,
            held,
        });
    }
    let clock: &dyn Clock = sources.clock.unwrap_or(&SystemClock);
    let timing = &sources.timing;
    let mut stats = ReadStats {
        ranges: 1,
        log_pages: 1,
        ..ReadStats::default()
    };
    let (log_prefix, whole) = (layout.log_prefix(), KeyRange::default());
    let first = if cut(Mechanism::LogFirstPage) {
        RANGE_KEYS
    } else {
        LOG_FIRST_PAGE
    };
    let mut page = std::pin::pin!(store.list_range_page(&log_prefix, &whole, first, None));
    let mut listed = None;
    // The root's copy is read while the log's first page is in flight, when it holds an image
    // (one that says none is stored is read first: then the log is not listed at all).
    if let (Held::Unknown, Some(cache)) = (&held, sources.cache)
        && !local_may_hold_image(cache, layout)
    {
        held = load_local(cache, layout);
    } else if let (Held::Unknown, Some(cache)) = (&held, sources.cache) {
        let load = std::pin::pin!(load_local_blocking(cache, layout));
        held = match futures::future::select(load, page.as_mut()).await {
            futures::future::Either::Left((local, _)) => local,
            futures::future::Either::Right((answer, load)) => {
                listed = Some(answer);
                load.await
            }
        };
    }
    // The page's answer: the one that came while the copy was read, or the one still to come.
    let answer = async {
        match listed.take() {
            Some(answer) => answer,
            None => page.as_mut().await,
        }
    };
    let mut decoding = None;
    let (image, fetched, page) = match &held {
        Held::Unknown => {
            let ((got, version), page) = tokio::join!(fetch_image(store, layout), answer);
            stats.image_fetched = true;
            let got = got.map(Arc::new);
            (got.clone(), Some((got, version)), page)
        }
        Held::Absent => {
            return Ok(Through::Full {
                fetched: None,
                compact: false,
                held,
            });
        }
        Held::Image(image) => {
            // Decoded while the log's page is still to come: a read takes nearly every entry.
            decoding = Some(start_decoding(layout, image));
            (Some(Arc::clone(image)), None, answer.await)
        }
    };
    let full = |fetched: Option<Fetched>, compact: bool, why: &str| {
        tracing::debug!(why, "reading the estate by its full listing");
        Ok(Through::Full {
            fetched,
            compact,
            held: held.clone(),
        })
    };
    let page = page?;
    let Some(image) = image else {
        return full(fetched, false, "no estate image");
    };
    let Some(mark) = image.log() else {
        return full(fetched, true, "the image predates the write log");
    };
    if !(timing.trusts(mark.from, clock.now()) || cut(Mechanism::LogTrust)) {
        return full(
            fetched,
            true,
            "the image is older than the write log's trust",
        );
    }
    if image.entry_of(&layout.estate_key()).is_none() {
        return full(fetched, true, "the image holds no estate record");
    }
    // Entries newer than the watermark sort before its key (newest first).
    let boundary = time_key(layout, mark.from);
    let (more, listed) = (page.next.is_some(), page.items.len());
    let mut newer: Vec<String> = page
        .items
        .into_iter()
        .map(|i| i.key)
        .filter(|k| *k < boundary)
        .collect();
    // A full page of entries all newer than the watermark: list on down to it.
    if more && newer.len() == listed {
        let bound = log_page_bound(image.len());
        let rest = match newer.last() {
            Some(last) if !cut(Mechanism::LogPages) => {
                list_log_rest(store, &log_prefix, last, &boundary, bound - 1).await?
            }
            _ => LogRest::Longer,
        };
        match rest {
            LogRest::Listed { keys, pages } => {
                stats.log_pages += pages;
                stats.ranges += pages;
                newer.extend(keys);
            }
            LogRest::Longer => {
                // A new image shortens the log only when the oldest entry seen is older than its watermark would be.
                let shortens = newer
                    .last()
                    .and_then(|k| LogEntry::parse(layout, k).ok())
                    .is_some_and(|e| e.at() < timing.log_from(clock.now()));
                return full(
                    fetched,
                    shortens,
                    "the write log since the image is longer than the pages a read lists",
                );
            }
        }
    }
    let pending: Vec<String> = mark
        .pending
        .iter()
        .map(|name| format!("{}{name}", layout.log_prefix()))
        .collect();
    let mut named: BTreeMap<String, Vec<LogEntry>> = BTreeMap::new();
    for key in newer.iter().chain(&pending) {
        match LogEntry::parse(layout, key) {
            Ok(e) => named.entry(e.record_key(layout)).or_default().push(e),
            Err(e) => {
                tracing::warn!(error = %e, "a key in the write log this program does not read");
                return full(fetched, true, "an unreadable write log entry");
            }
        }
    }
    // Provider records are not state.
    named.retain(|k, _| {
        matches!(
            layout.classify(k),
            Some(KeyKind::Resource | KeyKind::Output)
        )
    });
    let pick = |key: &str, entries: &[LogEntry]| {
        let all = |seen: Seen<'_>| entries.iter().all(|e| holds(e, seen));
        if let Some(prior) = sources.prior {
            let seen = match prior.records.get(key) {
                Some(r) => Seen::Present { carries: r.log() },
                None => Seen::Absent,
            };
            if all(seen) {
                return if prior.records.contains_key(key) {
                    Pick::Prior
                } else {
                    Pick::Gone
                };
            }
        }
        match image.entry_of(key) {
            Some(e) if all(Seen::Present { carries: e.log }) => Pick::Image,
            None if all(Seen::Absent) => Pick::Gone,
            _ => Pick::Fetch,
        }
    };
    let mut picks: BTreeMap<&str, Pick> = named
        .iter()
        .map(|(k, entries)| (k.as_str(), pick(k, entries)))
        .collect();
    let to_fetch = picks.values().filter(|p| matches!(p, Pick::Fetch)).count();
    if to_fetch > refresh_bound(image.len()) {
        return full(
            fetched,
            true,
            "more records changed since the image than the bound",
        );
    }
    let mut got: Vec<Got> = Vec::with_capacity(image.len() + to_fetch);
    let mut fetch: Vec<(String, KeyKind)> = Vec::new();
    for (key, p) in &mut picks {
        let Some(kind) = layout.classify(key) else {
            continue;
        };
        match p {
            Pick::Prior => {
                if let Some(entry) = sources.prior.and_then(|s| s.records.get(*key)) {
                    stats.from_prior += 1;
                    got.push(Got {
                        key: key.to_string(),
                        item: Decoded::Record(entry.clone()),
                        from: From::Prior,
                    });
                }
            }
            Pick::Fetch => fetch.push((key.to_string(), kind)),
            Pick::Image | Pick::Gone => {}
        }
    }
    let decoding = decoding.unwrap_or_else(|| start_decoding(layout, &image));
    for (FromImage { key, kind, .. }, item) in decoded(decoding, layout, &image).await {
        // A record the log names is taken from where its pick says.
        if !matches!(picks.get(key.as_str()), None | Some(Pick::Image)) {
            continue;
        }
        match item {
            Ok(item) => {
                stats.from_image += 1;
                got.push(Got {
                    key,
                    item,
                    from: From::Image,
                });
            }
            Err(e) => {
                tracing::warn!(key = %key, error = %e, "ignoring the estate image's entry: fetching the record");
                fetch.push((key, kind));
            }
        }
    }
    // A record deleted since the image is not part of this read.
    fetch_records(
        store,
        layout,
        parallel,
        sources.cache,
        fetch,
        &mut got,
        &mut stats,
    )
    .await?;
    crate::telemetry::metrics().records_read(got.len());
    stats.listed = got.len();
    let snapshot = snapshot_of(got);
    tracing::debug!(
        entries = named.len(),
        from_prior = stats.from_prior,
        from_image = stats.from_image,
        fetched = stats.fetched,
        image_fetched = stats.image_fetched,
        "read the estate through its image and write log"
    );
    let stored_image = image.stored().cloned();
    Ok(Through::Read(Read {
        snapshot,
        keep_local: stats.image_fetched,
        image: Held::Image(image),
        stored_image,
        refresh: None,
        stats,
    }))
}

/// A new image's write log mark: the watermark below `listing_started` (the reader's clock
/// just before it listed the records in `got`), and every entry since the pending lifetime
/// whose write those records do not hold and may still land.
async fn log_mark(
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
    let by_key: BTreeMap<&str, &Got> = got.iter().map(|g| (g.key.as_str(), g)).collect();
    let mut pending = Vec::new();
    for item in listed {
        let entry = match LogEntry::parse(layout, &item.key) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(error = %e, "a key in the write log this program does not read");
                continue;
            }
        };
        let record_key = entry.record_key(layout);
        if !matches!(
            layout.classify(&record_key),
            Some(KeyKind::Resource | KeyKind::Output)
        ) {
            continue;
        }
        let seen = match by_key.get(record_key.as_str()).map(|g| &g.item) {
            Some(Decoded::Record(e)) => Seen::Present { carries: e.log() },
            Some(Decoded::Estate(..)) | None => Seen::Absent,
        };
        if fate(&entry, seen, listing_started, timing) == Fate::Pending
            && !cut(Mechanism::LogPending)
        {
            pending.push(entry.name());
        }
    }
    Ok(LogMark {
        from: timing.log_from(listing_started),
        pending,
    })
}

/// The snapshot of what a read got (sorted first, so the map is built in one pass).
fn snapshot_of(mut got: Vec<Got>) -> Snapshot {
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

/// A record read from the image: its key, its kind and its slot there.
#[derive(Clone)]
struct FromImage {
    key: String,
    kind: KeyKind,
    index: usize,
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

fn unreadable(key: &str, reason: &str) -> SessionError {
    SessionError::Corrupt(crate::engine::record::CorruptRecord {
        key: key.to_string(),
        reason: reason.to_string(),
    })
}

/// [`decode_entries`] off the async threads; each wanted record with its result.
async fn decode_entries_blocking(
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
enum Decoding {
    /// Done where the read is (a small image).
    Done(Vec<(FromImage, Result<Decoded, SessionError>)>),
    /// Going on off the async threads, while the read waits for the write log.
    Started(tokio::task::JoinHandle<Vec<(FromImage, Result<Decoded, SessionError>)>>),
}

/// Start decoding every record `image` holds.
fn start_decoding(layout: &Layout, image: &Arc<Image>) -> Decoding {
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
async fn decoded(
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

/// The bytes of a new image of every record read.
fn image_of(
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

impl Session {
    /// Delete up to a page of write log entries older than the retention (each `If-Match` its
    /// listed version), after a new image: the sweep every kind has (the local store no other).
    /// Its clock passed the skew check; a failure leaves the entries for the next sweep.
    async fn sweep_log(&self) {
        if cut(Mechanism::LogSweep) {
            return;
        }
        let timing = self.log.timing();
        let Some(oldest) = self.log.clock().now().checked_sub(timing.retention) else {
            return;
        };
        let older = KeyRange::new(Some(time_key(&self.layout, oldest)), None);
        let page = match self
            .store
            .list_range_page(&self.layout.log_prefix(), &older, RANGE_KEYS, None)
            .await
        {
            Ok(page) => page,
            Err(e) => {
                tracing::warn!(error = %e, "could not list the write log's expired entries");
                return;
            }
        };
        let deletes = stream::iter(page.items)
            .map(
                |item| async move { (self.store.delete(&item.key, &item.version).await, item.key) },
            )
            .buffer_unordered(self.parallel)
            .collect::<Vec<_>>()
            .await;
        for (result, key) in deletes {
            if let Err(e) = result {
                tracing::warn!(key = %key, error = %e, "could not delete an expired write log entry");
            }
        }
    }

    /// Read the estate into the view (under its lock, so nothing sees a half-made read), then
    /// store a new image if one is due; the count of records read.
    pub(super) async fn read_view(&self) -> Result<usize, SessionError> {
        let mut view = self.view.lock().await;
        let sources = Sources {
            cache: self.cache.as_ref(),
            prior: view.read_before.then_some(&view.snapshot),
            image: view.image.clone(),
            clock: Some(self.log.clock().as_ref()),
            timing: *self.log.timing(),
        };
        let read = read_estate(
            &self.store,
            &self.layout,
            self.parallel,
            &self.run.run_id,
            sources,
        )
        .await?;
        let mut image = read.image;
        let mut keep = read.keep_local;
        if let Some(bytes) = read.refresh
            && let Some(stored) = self.store_image(bytes, read.stored_image).await
        {
            image = Held::Image(Arc::new(stored));
            keep = true;
        }
        if let (true, Some(cache)) = (keep, &self.cache) {
            save_local(cache, &self.layout, &image);
        }
        view.image = image;
        view.read_before = true;
        let records = read.snapshot.records.len();
        if view.pin.is_none() {
            view.base_from_read();
        }
        view.snapshot = read.snapshot;
        Ok(records)
    }

    /// Write a new image over the stored one this read listed (or where none was), if it is still
    /// that one; the image as stored, or none when another reader was first or the write failed
    /// (the image is a cache: nothing else depends on it).
    async fn store_image(&self, bytes: Vec<u8>, listed: Option<Version>) -> Option<Image> {
        let key = self.layout.image_key();
        if let Err(e) = self.check_guard().await {
            tracing::warn!(key = %key, error = %e, "not writing the estate image");
            return None;
        }
        if let Err(e) = self.check_clock().await {
            tracing::warn!(key = %key, error = %e, "not writing the estate image");
            return None;
        }
        let precondition = match listed {
            Some(v) => Precondition::Matches(v),
            None => Precondition::Absent,
        };
        match self.store.put(&key, &bytes, &precondition).await {
            Ok(WriteOutcome::Written(version)) => {
                tracing::debug!(key = %key, bytes = bytes.len(), "wrote a new estate image");
                self.sweep_log().await;
                match Image::decode(&self.layout, bytes) {
                    Ok(image) => Some(image.stored_as(Some(version))),
                    Err(e) => {
                        tracing::warn!(key = %key, error = %e, "the estate image just written does not read back");
                        None
                    }
                }
            }
            Ok(WriteOutcome::Conflict(_)) => {
                tracing::debug!(key = %key, "another reader wrote the estate image first");
                None
            }
            Err(e) => {
                tracing::warn!(key = %key, error = %e, "could not write the estate image (a cache only: nothing else was affected)");
                None
            }
        }
    }
}
