//! The decisions an image informs, apart from any I/O: how a listing of the estate is split at
//! the keys it holds, and how many records outside it make it stale.

use crate::engine::layout::Layout;
use crate::store::{KeyRange, RangeStart};

/// Keys per listing range (the page size every kind serves).
pub const RANGE_KEYS: usize = 1000;
/// A read rewrites the image when more records than this were not in it at their version...
pub const REFRESH_MIN: usize = 50;
/// ...and more than this share of the records (in percent).
pub const REFRESH_PERCENT: usize = 5;

/// How many records a read may find outside the image before it writes a new one:
/// more than [`REFRESH_MIN`] and more than [`REFRESH_PERCENT`] of `records`.
pub fn refresh_bound(records: usize) -> usize {
    REFRESH_MIN.max(records * REFRESH_PERCENT / 100)
}

/// One listing to make: the keys under `prefix` inside `range`, in pages of about `limit`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangePlan {
    /// The prefix listed.
    pub prefix: String,
    /// The range within it.
    pub range: KeyRange,
    /// Keys expected, with room for some created since: the page size asked for.
    pub limit: usize,
}

/// The listings of an estate's state keys: each state segment split at every
/// `RANGE_KEYS`-th key `known` holds (sorted keys, e.g. an image's), so they can run at once.
///
/// Any split is correct, however old `known` is: the ranges tile each segment, and a
/// range that grew is paged to its end. Without known keys, or on a kind that cannot
/// start a listing at a key, the estate's prefix is listed in plain pages (as before
/// images); so it is when the known keys fit in one page, which one request then lists.
pub fn plan_ranges<'a>(
    layout: &Layout,
    known: impl IntoIterator<Item = &'a str>,
    start: RangeStart,
) -> Vec<RangePlan> {
    let known: Vec<&str> = known.into_iter().collect();
    if known.len() + known.len() / 8 + 16 <= RANGE_KEYS {
        return vec![RangePlan {
            prefix: layout.prefix(),
            // Everything but the write log, which sorts last.
            range: KeyRange::new(None, Some(layout.log_prefix())),
            limit: RANGE_KEYS,
        }];
    }
    let segments = layout.state_segments();
    let mut keys: Vec<Vec<&str>> = vec![Vec::new(); segments.len()];
    if start == RangeStart::Server {
        for key in known {
            if let Some(i) = segments
                .iter()
                .position(|(p, r)| key.starts_with(p.as_str()) && r.contains(key))
            {
                keys[i].push(key);
            }
        }
    }
    let mut plans = Vec::new();
    for ((prefix, segment), keys) in segments.into_iter().zip(keys) {
        plans.extend(plan_segment(prefix, segment, &keys));
    }
    plans
}

/// The listings of the resources after `after` (the last key of a first page already listed),
/// split at the known keys past it.
pub fn plan_resources_after<'a>(
    layout: &Layout,
    known: impl IntoIterator<Item = &'a str>,
    after: &str,
) -> Vec<RangePlan> {
    let [_, (prefix, segment)] = layout.state_segments();
    let range = KeyRange::new(Some(after.to_string()), segment.before);
    let keys: Vec<&str> = known
        .into_iter()
        .filter(|k| k.starts_with(prefix.as_str()) && range.contains(k))
        .collect();
    plan_segment(prefix, range, &keys)
}

/// One segment's listings: split after every `RANGE_KEYS`-th of its known `keys` (sorted).
fn plan_segment(prefix: String, segment: KeyRange, keys: &[&str]) -> Vec<RangePlan> {
    if keys.is_empty() {
        return vec![RangePlan {
            prefix,
            range: segment,
            limit: RANGE_KEYS,
        }];
    }
    let chunks: Vec<&[&str]> = keys.chunks(RANGE_KEYS).collect();
    let mut after = segment.after.clone();
    let mut plans = Vec::with_capacity(chunks.len());
    for (i, chunk) in chunks.iter().enumerate() {
        let last = chunk.last().map(|k| k.to_string());
        let range = if i + 1 == chunks.len() {
            KeyRange::new(after.clone(), segment.before.clone())
        } else {
            KeyRange::through(after.clone(), last.clone())
        };
        plans.push(RangePlan {
            prefix: prefix.clone(),
            range,
            limit: (chunk.len() + chunk.len() / 8 + 16).min(RANGE_KEYS),
        });
        after = last;
    }
    plans
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::layout::EstateName;

    fn layout(name: &str) -> Layout {
        Layout::new(EstateName::parse(name).unwrap())
    }

    #[test]
    fn ranges_tile_each_segment_and_skip_marks_and_runs() {
        let l = layout("e");
        let keys: Vec<String> = (0..2500)
            .map(|i| l.resource_key(&format!("x.r{i:05}")).into_string())
            .chain([
                l.estate_key().into_string(),
                l.output_key("o").into_string(),
            ])
            .collect();
        let mut sorted = keys.clone();
        sorted.sort();
        let plans = plan_ranges(&l, sorted.iter().map(String::as_str), RangeStart::Server);
        assert_eq!(plans.len(), 1 + 3, "{plans:?}");
        let covering = |key: &str| {
            plans
                .iter()
                .filter(|p| key.starts_with(&p.prefix) && p.range.contains(key))
                .count()
        };
        let others = [
            l.resource_key("x.r00999a").into_string(),
            l.resource_key("zzz").into_string(),
            l.image_key().into_string(),
        ];
        for key in keys.iter().chain(&others) {
            assert_eq!(covering(key), 1, "{key}");
        }
        for key in [l.pending_key("x.r1"), l.run_key("r")] {
            assert_eq!(covering(&key), 0, "{key}");
        }
        let plain = plan_ranges(&l, sorted.iter().map(String::as_str), RangeStart::Filtered);
        assert_eq!(
            plain.len(),
            2,
            "a kind that cannot start at a key lists each segment"
        );
        let few = plan_ranges(
            &l,
            sorted[..100].iter().map(String::as_str),
            RangeStart::Server,
        );
        assert_eq!(few.len(), 1, "what fits in one page is one listing");
        assert_eq!(
            (few[0].prefix.as_str(), &few[0].range),
            (
                l.prefix().as_str(),
                &KeyRange::new(None, Some(l.log_prefix()))
            )
        );
        assert!(!few[0].range.contains(&format!("{}0-x", l.log_prefix())));
    }

    #[test]
    fn the_bound_is_fifty_or_five_percent() {
        assert_eq!(refresh_bound(10), 50);
        assert_eq!(refresh_bound(1000), 50);
        assert_eq!(refresh_bound(10_000), 500);
    }
}
