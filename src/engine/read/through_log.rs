//! Reading through the image and the write log (docs/architecture.md, "A read"): in one round
//! the image (unless one is held) and the log's newest page; then only the records the log
//! names since the image's watermark (or as pending) that no copy holds. Falls back to the full
//! listing when there is no image, it predates the log or is older than the log's trust, or the
//! log since its watermark is longer than [`log_page_bound`](super::plan::log_page_bound) pages.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::decode::{Decoding, decoded, start_decoding};
use super::fetch::{fetch_image, fetch_records, load_local_blocking};
use super::full::FullRead;
use super::got::{Decoded, From, Got, snapshot_of, take_from_image};
use super::outcome::{Read, ReadStats};
use super::plan::{self, Fallback, Pick};
use super::sources::{Fetched, Sources};
use crate::cut::{Mechanism, cut};
use crate::engine::image::{Held, Image, RANGE_KEYS, load_local, local_may_hold_image};
use crate::engine::layout::{KeyKind, Layout};
use crate::engine::session::error::SessionError;
use crate::engine::session::snapshot::Snapshot;
use crate::engine::write_log::{Clock, SystemClock, time_key};
use crate::store::{DynStore, KeyRange, Page, StoreError};

/// Entries on the write log's first page: more than a compaction lets change since the image
/// ([`refresh_bound`](crate::engine::image::refresh_bound)'s floor) with room for the margin's,
/// few enough that a read with nothing new downloads some 27 KB, not the 270 KB of a full page
/// of old entries.
pub const LOG_FIRST_PAGE: usize = 100;

/// What a read through the write log came to.
// A read is the common answer: boxing it would cost an allocation per read.
#[allow(clippy::large_enum_variant)]
pub(super) enum Through {
    /// The read, made from the image and the records the log names.
    Read(Read),
    /// The log cannot be read through: list the estate.
    Full(FullRead),
}

/// Why a read through the log stopped: it falls back to the full listing, or it failed.
enum Stop {
    Full(Fallback),
    Failed(SessionError),
}

impl std::convert::From<Fallback> for Stop {
    fn from(f: Fallback) -> Self {
        Stop::Full(f)
    }
}

impl std::convert::From<SessionError> for Stop {
    fn from(e: SessionError) -> Self {
        Stop::Failed(e)
    }
}

/// What the first round gave: the image to read through (none: none stored or usable), the
/// log's newest page, and the image's decoding when it started while the page was awaited.
struct Round {
    image: Option<Arc<Image>>,
    page: Result<Page, StoreError>,
    decoding: Option<Decoding>,
}

/// Read through the image and the write log, or say how to make the full listing.
pub(super) async fn read_through_log(
    store: &DynStore,
    layout: &Layout,
    parallel: usize,
    sources: &Sources<'_>,
) -> Result<Through, SessionError> {
    let held = sources.image.clone();
    if cut(Mechanism::LogRead) {
        let held = match (held, sources.cache) {
            (Held::Unknown, Some(cache)) => load_local_blocking(cache, layout).await,
            (held, _) => held,
        };
        return Ok(Through::Full(FullRead {
            fetched: None,
            compact: false,
            held,
        }));
    }
    let mut stats = ReadStats {
        ranges: 1,
        log_pages: 1,
        ..ReadStats::default()
    };
    let (held, fetched, round) = first_round(store, layout, sources, held, &mut stats).await;
    let Some(round) = round else {
        return Ok(Through::Full(FullRead {
            fetched: None,
            compact: false,
            held,
        }));
    };
    match through(store, layout, parallel, sources, round, stats).await {
        Ok(read) => Ok(Through::Read(read)),
        Err(Stop::Failed(e)) => Err(e),
        Err(Stop::Full(Fallback { compact, why })) => {
            tracing::debug!(why, "reading the estate by its full listing");
            Ok(Through::Full(FullRead {
                fetched,
                compact,
                held,
            }))
        }
    }
}

/// The first round: the log's newest page, with the stored image (none held) or the root's
/// copy (read while the page is in flight); what is then known of the image, the stored image
/// when it was fetched, and the round (none: no image is stored, so the log is not read).
async fn first_round(
    store: &DynStore,
    layout: &Layout,
    sources: &Sources<'_>,
    mut held: Held,
    stats: &mut ReadStats,
) -> (Held, Option<Fetched>, Option<Round>) {
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
    let (fetched, round) = match &held {
        Held::Unknown => {
            let ((got, version), page) = tokio::join!(fetch_image(store, layout), answer);
            stats.image_fetched = true;
            let got = got.map(Arc::new);
            let round = Round {
                image: got.clone(),
                page,
                decoding: None,
            };
            (Some((got, version)), Some(round))
        }
        Held::Absent => (None, None),
        Held::Image(image) => {
            // Decoded while the log's page is still to come: a read takes nearly every entry.
            let decoding = Some(start_decoding(layout, image));
            let image = Some(Arc::clone(image));
            let page = answer.await;
            (
                None,
                Some(Round {
                    image,
                    page,
                    decoding,
                }),
            )
        }
    };
    (held, fetched, round)
}

/// The read from the first round's image and page: the records the log names since the
/// watermark, each from where its pick says, the rest from the image.
async fn through(
    store: &DynStore,
    layout: &Layout,
    parallel: usize,
    sources: &Sources<'_>,
    round: Round,
    mut stats: ReadStats,
) -> Result<Read, Stop> {
    let page = round.page.map_err(SessionError::from)?;
    let Some(image) = round.image else {
        return Err(Stop::Full(Fallback {
            compact: false,
            why: "no estate image",
        }));
    };
    let clock: &dyn Clock = sources.clock.unwrap_or(&SystemClock);
    let mark = plan::trusted_mark(layout, &image, &sources.timing, || clock.now())?;
    let boundary = time_key(layout, mark.from);
    let newer = list_newer(store, layout, sources, &image, page, &boundary, &mut stats).await?;
    let named = plan::name_entries(layout, &newer, &mark.pending)?;
    let picks = plan::picks(&named, sources.prior, &image);
    let to_fetch = plan::fetches(&picks, image.len())?;
    let taking = Taking {
        layout,
        prior: sources.prior,
        picks: &picks,
        image: &image,
    };
    let (mut got, fetch) = taking.take(round.decoding, to_fetch, &mut stats).await;
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
    Ok(Read {
        snapshot,
        keep_local: stats.image_fetched,
        image: Held::Image(image),
        stored_image,
        refresh: None,
        stats,
    })
}

/// The keys of the log's entries newer than the image's watermark key `boundary`: the first
/// page's, then on down to it when that page was full of them; or why the read falls back.
async fn list_newer(
    store: &DynStore,
    layout: &Layout,
    sources: &Sources<'_>,
    image: &Image,
    page: Page,
    boundary: &str,
    stats: &mut ReadStats,
) -> Result<Vec<String>, Stop> {
    let (mut newer, list_on) = plan::newer_on_page(page, boundary);
    if !list_on {
        return Ok(newer);
    }
    let bound = plan::log_page_bound(image.len());
    let rest = match newer.last() {
        Some(last) if !cut(Mechanism::LogPages) => {
            list_log_rest(store, &layout.log_prefix(), last, boundary, bound - 1).await?
        }
        _ => LogRest::Longer,
    };
    match rest {
        LogRest::Listed { keys, pages } => {
            stats.log_pages += pages;
            stats.ranges += pages;
            newer.extend(keys);
            Ok(newer)
        }
        LogRest::Longer => {
            let clock: &dyn Clock = sources.clock.unwrap_or(&SystemClock);
            // A new image shortens the log only when the oldest entry seen is older than its watermark would be.
            let shortens = plan::shortens(layout, &newer, &sources.timing, || clock.now());
            Err(Stop::Full(Fallback {
                compact: shortens,
                why: "the write log since the image is longer than the pages a read lists",
            }))
        }
    }
}

/// What a read through the log takes records by: its picks, this run's last read and the image.
struct Taking<'a> {
    layout: &'a Layout,
    prior: Option<&'a Snapshot>,
    picks: &'a BTreeMap<&'a str, Pick>,
    image: &'a Arc<Image>,
}

impl Taking<'_> {
    /// The records the picks take from this run's last read, and every record of the image the
    /// log sends nowhere else; with the keys to fetch (`to_fetch` of them picked).
    async fn take(
        &self,
        decoding: Option<Decoding>,
        to_fetch: usize,
        stats: &mut ReadStats,
    ) -> (Vec<Got>, Vec<(String, KeyKind)>) {
        let mut got: Vec<Got> = Vec::with_capacity(self.image.len() + to_fetch);
        let mut fetch: Vec<(String, KeyKind)> = Vec::new();
        for (key, p) in self.picks {
            let Some(kind) = self.layout.classify(key) else {
                continue;
            };
            match p {
                Pick::Prior => {
                    if let Some(entry) = self.prior.and_then(|s| s.records.get(*key)) {
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
        let decoding = decoding.unwrap_or_else(|| start_decoding(self.layout, self.image));
        for (wanted, item) in decoded(decoding, self.layout, self.image).await {
            // A record the log names is taken from where its pick says.
            if !matches!(
                self.picks.get(wanted.key.as_str()),
                None | Some(Pick::Image)
            ) {
                continue;
            }
            if let Some((wanted, _)) = take_from_image(&mut got, stats, wanted, item) {
                fetch.push((wanted.key, wanted.kind));
            }
        }
        (got, fetch)
    }
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
