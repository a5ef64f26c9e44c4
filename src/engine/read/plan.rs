//! The read's decisions, apart from its I/O (as `write_log.rs` keeps the log's): given what was
//! listed and fetched, where each record is taken from, when the write log can be read through,
//! and when a new image is due. Nothing here calls the store.

use std::collections::BTreeMap;
use std::time::SystemTime;

use super::got::{Decoded, From, Got};
use crate::cut::{Mechanism, cut};
use crate::engine::image::{Held, Image, LogMark, RANGE_KEYS, refresh_bound};
use crate::engine::layout::{KeyKind, Layout};
use crate::engine::session::snapshot::Snapshot;
use crate::engine::write_log::{Fate, LogEntry, Seen, Timing, fate, holds};
use crate::store::{Listed, Page, Version};

/// One state record a listing gave: its key, its kind and its version.
pub(super) type Wanted = (String, KeyKind, Version);

/// Why a read makes the full listing, and whether it then writes a new image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Fallback {
    /// Whether the read then writes a new image (the image is too old, or its log too long).
    pub(super) compact: bool,
    /// What the debug line says.
    pub(super) why: &'static str,
}

/// The most pages of the write log a read lists, whatever the estate's size.
const MAX_LOG_PAGES: usize = 10;

/// How many pages of the write log a read of an image of `records` entries lists before it falls
/// back to the full listing: the full listing costs `ceil(records / 1000) + 2` requests in two
/// round trips (and then a compaction shortens the log for every later reader), the log one
/// request per page, each after the last; so at least 2, at most as many requests as the full
/// listing makes, and never more than [`MAX_LOG_PAGES`] round trips in a row.
pub(super) fn log_page_bound(records: usize) -> usize {
    (records.div_ceil(RANGE_KEYS) + 1).clamp(2, MAX_LOG_PAGES)
}

/// The image's write log mark when the log can be read through from it (`now`: the reader's
/// clock), else why not.
pub(super) fn trusted_mark<'a>(
    layout: &Layout,
    image: &'a Image,
    timing: &Timing,
    now: impl FnOnce() -> SystemTime,
) -> Result<&'a LogMark, Fallback> {
    let Some(mark) = image.log() else {
        return Err(Fallback {
            compact: true,
            why: "the image predates the write log",
        });
    };
    if !(timing.trusts(mark.from, now()) || cut(Mechanism::LogTrust)) {
        return Err(Fallback {
            compact: true,
            why: "the image is older than the write log's trust",
        });
    }
    if image.entry_of(&layout.estate_key()).is_none() {
        return Err(Fallback {
            compact: true,
            why: "the image holds no estate record",
        });
    }
    Ok(mark)
}

/// The keys of `page`'s entries newer than the watermark's key `boundary` (newer entries sort
/// before it), and whether to list on down to it (a full page, all newer).
pub(super) fn newer_on_page(page: Page, boundary: &str) -> (Vec<String>, bool) {
    let (more, listed) = (page.next.is_some(), page.items.len());
    let newer: Vec<String> = page
        .items
        .into_iter()
        .map(|i| i.key)
        .filter(|k| k.as_str() < boundary)
        .collect();
    let list_on = more && newer.len() == listed;
    (newer, list_on)
}

/// Whether a new image shortens a log longer than a read lists: the oldest entry seen (the
/// last of `newer`) is older than its watermark would be (`now`: the reader's clock).
pub(super) fn shortens(
    layout: &Layout,
    newer: &[String],
    timing: &Timing,
    now: impl FnOnce() -> SystemTime,
) -> bool {
    newer
        .last()
        .and_then(|k| LogEntry::parse(layout, k).ok())
        .is_some_and(|e| e.at() < timing.log_from(now()))
}

/// The entries the log names since the watermark (`newer`) and as pending (`pending`, by
/// name), by the state record each wrote; an entry this program does not read: fall back.
pub(super) fn name_entries(
    layout: &Layout,
    newer: &[String],
    pending: &[String],
) -> Result<BTreeMap<String, Vec<LogEntry>>, Fallback> {
    let pending: Vec<String> = pending
        .iter()
        .map(|name| format!("{}{name}", layout.log_prefix()))
        .collect();
    let mut named: BTreeMap<String, Vec<LogEntry>> = BTreeMap::new();
    for key in newer.iter().chain(&pending) {
        match LogEntry::parse(layout, key) {
            Ok(e) => named.entry(e.record_key(layout)).or_default().push(e),
            Err(e) => {
                tracing::warn!(error = %e, "a key in the write log this program does not read");
                return Err(Fallback {
                    compact: true,
                    why: "an unreadable write log entry",
                });
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
    Ok(named)
}

/// Where a record the write log names is taken from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pick {
    /// This run's last read holds every write the log names.
    Prior,
    /// The image holds every write the log names.
    Image,
    /// Every write the log names is a delete that landed.
    Gone,
    /// The store.
    Fetch,
}

/// Where to take the record `key`, whose writes the log names as `entries`, from.
pub(super) fn pick(
    key: &str,
    entries: &[LogEntry],
    prior: Option<&Snapshot>,
    image: &Image,
) -> Pick {
    let all = |seen: Seen<'_>| entries.iter().all(|e| holds(e, seen));
    if let Some(prior) = prior {
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
}

/// Each record the log names, with where it is taken from.
pub(super) fn picks<'a>(
    named: &'a BTreeMap<String, Vec<LogEntry>>,
    prior: Option<&Snapshot>,
    image: &Image,
) -> BTreeMap<&'a str, Pick> {
    named
        .iter()
        .map(|(k, entries)| (k.as_str(), pick(k, entries, prior, image)))
        .collect()
}

/// How many records `picks` fetch, unless more changed since an image of `records` entries
/// than the bound (then fall back, and write a new image).
pub(super) fn fetches(picks: &BTreeMap<&str, Pick>, records: usize) -> Result<usize, Fallback> {
    let to_fetch = picks.values().filter(|p| matches!(p, Pick::Fetch)).count();
    if to_fetch > refresh_bound(records) {
        return Err(Fallback {
            compact: true,
            why: "more records changed since the image than the bound",
        });
    }
    Ok(to_fetch)
}

/// The state records of a listing (a warning for a key this layout does not write), and the
/// stored image's version when it was listed.
pub(super) fn sort_listing(layout: &Layout, listed: Vec<Listed>) -> (Vec<Wanted>, Option<Version>) {
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
    (wanted, stored_image)
}

/// The keys a listing is split at: the image's, else those of this run's last read.
pub(super) fn known_keys(layout: &Layout, held: &Held, prior: Option<&Snapshot>) -> Vec<String> {
    match (held.image(), prior) {
        (Some(img), _) => img.keys().map(str::to_string).collect(),
        (None, Some(prior)) => prior
            .estate
            .as_ref()
            .map(|_| layout.estate_key().into_string())
            .into_iter()
            .chain(prior.records.keys().cloned())
            .collect(),
        (None, None) => Vec::new(),
    }
}

/// Whether this run's last read holds `key` at the listed version `v`.
pub(super) fn in_prior(prior: Option<&Snapshot>, key: &str, kind: &KeyKind, v: &Version) -> bool {
    match (prior, kind) {
        (Some(p), KeyKind::Estate) => p.estate.as_ref().is_some_and(|(_, pv)| pv.token == v.token),
        (Some(p), _) => p
            .records
            .get(key)
            .is_some_and(|e| e.version.token == v.token),
        (None, _) => false,
    }
}

/// Whether the image held is the stored one, at the version listed.
pub(super) fn held_is_stored(held: &Held, stored_image: Option<&Version>) -> bool {
    held.image()
        .and_then(|i| i.stored())
        .zip(stored_image)
        .is_some_and(|(a, b)| a.token == b.token)
}

/// Whether to fetch the stored image before taking the records: one is stored, it is not the
/// one held (nor just fetched), and more of `wanted` than `bound` are in neither this run's
/// last read nor the image held.
pub(super) fn stored_image_due(
    wanted: &[Wanted],
    prior: Option<&Snapshot>,
    held: &Held,
    stored_image: Option<&Version>,
    image_fetched: bool,
    bound: usize,
) -> bool {
    if stored_image.is_none() || held_is_stored(held, stored_image) || image_fetched {
        return false;
    }
    let missing = wanted
        .iter()
        .filter(|(k, kind, v)| {
            !in_prior(prior, k, kind, v) && held.image().is_none_or(|i| i.entry_at(k, v).is_none())
        })
        .count();
    missing > bound
}

/// How many records of `got` are outside the stored image: all when none is stored (or it is
/// unusable: `unusable` is its version), else those it did not give; none (so no new image)
/// when the stored one is not the one held.
pub(super) fn outside(
    got: &[Got],
    held: &Held,
    stored_image: Option<&Version>,
    unusable: Option<&Version>,
) -> usize {
    let stored_unusable = unusable
        .zip(stored_image)
        .is_some_and(|(a, b)| a.token == b.token);
    if stored_image.is_none() || stored_unusable {
        return got.len();
    }
    if !held_is_stored(held, stored_image) {
        return 0;
    }
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
}

/// Whether a full read writes a new image: more records outside the stored one than `bound`,
/// or a compaction is due and there is something to hold.
pub(super) fn refresh_due(outside: usize, bound: usize, compact: bool, got: usize) -> bool {
    outside > bound || (compact && got > 0)
}

/// The names of the write log entries `listed` (since the pending lifetime) whose write the
/// records in `got` do not hold and may still land, as of `listing_started`.
pub(super) fn pending_of(
    layout: &Layout,
    listed: Vec<Listed>,
    got: &[Got],
    listing_started: SystemTime,
    timing: &Timing,
) -> Vec<String> {
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
    pending
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::engine::image::ImageEntry;
    use crate::engine::layout::EstateName;
    use crate::engine::operation::Operation;

    fn layout() -> Layout {
        Layout::new(EstateName::parse("e").unwrap())
    }

    fn listed(key: &str) -> Listed {
        Listed {
            key: key.to_string(),
            version: Version::new("\"v\""),
        }
    }

    /// An image of `keys` (each at version `"v"`, carrying log entry `log`), with `mark`.
    fn image(l: &Layout, keys: &[String], log: Option<&str>, mark: Option<&LogMark>) -> Image {
        let v = Version::new("\"v\"");
        let entries = keys.iter().map(|k| ImageEntry {
            rank: None,
            key: k,
            version: &v,
            digest: "d",
            bytes: b"{}",
            log,
        });
        Image::decode(l, Image::encode(l, "run", mark, entries)).unwrap()
    }

    fn entry(l: &Layout, op: Operation, record_key: &str) -> LogEntry {
        LogEntry::new(
            l,
            UNIX_EPOCH + Duration::from_secs(9),
            "run",
            1,
            op,
            record_key,
        )
        .unwrap()
    }

    #[test]
    fn the_log_is_listed_for_two_pages_at_least_and_ten_at_most() {
        assert_eq!(log_page_bound(0), 2);
        assert_eq!(log_page_bound(1000), 2);
        assert_eq!(log_page_bound(5000), 6);
        assert_eq!(log_page_bound(1_000_000), MAX_LOG_PAGES);
    }

    #[test]
    fn an_image_without_a_mark_or_an_estate_record_is_not_read_through() {
        let l = layout();
        let (timing, now) = (Timing::default(), UNIX_EPOCH + Duration::from_secs(10));
        let old = image(&l, &[l.estate_key().into_string()], None, None);
        let why = trusted_mark(&l, &old, &timing, || now).map(|_| ());
        assert_eq!(
            why.map_err(|f| f.why),
            Err("the image predates the write log")
        );
        let mark = LogMark {
            from: now,
            pending: vec![],
        };
        let headless = image(
            &l,
            &[l.resource_key("x.a").into_string()],
            None,
            Some(&mark),
        );
        let why = trusted_mark(&l, &headless, &timing, || now).map(|_| ());
        assert_eq!(
            why.map_err(|f| f.why),
            Err("the image holds no estate record")
        );
        let good = image(&l, &[l.estate_key().into_string()], None, Some(&mark));
        assert_eq!(trusted_mark(&l, &good, &timing, || now), Ok(&mark));
    }

    #[test]
    fn a_page_is_listed_on_only_when_full_of_newer_entries() {
        let page = |keys: &[&str], next: bool| Page {
            items: keys.iter().map(|k| listed(k)).collect(),
            next: next.then(|| "t".to_string()),
        };
        assert_eq!(
            newer_on_page(page(&["a", "b"], true), "c"),
            (vec!["a".to_string(), "b".to_string()], true)
        );
        assert_eq!(
            newer_on_page(page(&["a", "c"], true), "c"),
            (vec!["a".to_string()], false)
        );
        assert_eq!(
            newer_on_page(page(&["a", "b"], false), "c"),
            (vec!["a".to_string(), "b".to_string()], false)
        );
    }

    #[test]
    fn entries_are_named_by_record_and_an_unreadable_one_falls_back() {
        let l = layout();
        let a = l.resource_key("x.a").into_string();
        let e = entry(&l, Operation::Update, &a);
        let named = name_entries(&l, &[e.key(&l).into_string()], &[e.name()]).unwrap();
        assert_eq!(named.len(), 1);
        assert_eq!(
            named[&a].len(),
            2,
            "the entry since the watermark and as pending"
        );
        let bad = format!("{}junk", l.log_prefix());
        assert_eq!(
            name_entries(&l, &[bad], &[]).map_err(|f| (f.compact, f.why)),
            Err((true, "an unreadable write log entry"))
        );
    }

    #[test]
    fn a_record_is_taken_where_every_write_the_log_names_is_held() {
        let l = layout();
        let (a, b) = (
            l.resource_key("x.a").into_string(),
            l.resource_key("x.b").into_string(),
        );
        let update = entry(&l, Operation::Update, &a);
        let carried = update.name();
        let held = image(&l, std::slice::from_ref(&a), Some(&carried), None);
        assert_eq!(
            pick(&a, std::slice::from_ref(&update), None, &held),
            Pick::Image
        );
        let other = image(&l, std::slice::from_ref(&a), Some("another"), None);
        assert_eq!(pick(&a, &[update], None, &other), Pick::Fetch);
        let delete = entry(&l, Operation::Delete, &b);
        assert_eq!(
            pick(&b, std::slice::from_ref(&delete), None, &held),
            Pick::Gone
        );
        assert_eq!(pick(&a, &[delete], None, &held), Pick::Fetch);
        let keys: Vec<String> = (0..51).map(|i| format!("k{i}")).collect();
        let picked = |n: usize| -> BTreeMap<&str, Pick> {
            keys[..n]
                .iter()
                .map(|k| (k.as_str(), Pick::Fetch))
                .collect()
        };
        assert_eq!(fetches(&picked(50), 10), Ok(50));
        assert_eq!(
            fetches(&picked(51), 10).map_err(|f| f.compact),
            Err(true),
            "more changed than the bound: a full read that compacts"
        );
    }

    #[test]
    fn a_listing_keeps_state_records_and_notes_the_stored_image() {
        let l = layout();
        let keys = [
            l.estate_key(),
            l.resource_key("x.a"),
            l.output_key("o"),
            l.image_key(),
        ];
        let (wanted, stored) = sort_listing(&l, keys.iter().map(|k| listed(k)).collect());
        assert_eq!(wanted.len(), 3);
        assert_eq!(stored, Some(Version::new("\"v\"")));
        assert!(refresh_due(51, 50, false, 0));
        assert!(refresh_due(0, 50, true, 1));
        assert!(!refresh_due(0, 50, true, 0));
        assert_eq!(known_keys(&l, &Held::Absent, None), Vec::<String>::new());
    }
}
