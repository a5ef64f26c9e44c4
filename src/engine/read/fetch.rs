//! What a read takes from the store and the root's folder: the stored image, the listings of
//! the state keys, the records themselves, and the root's copy of the image.

use std::sync::Arc;

use futures::{StreamExt, stream};

use super::decode::got_of_bytes;
use super::got::{From, Got};
use super::outcome::ReadStats;
use super::sources::Fetched;
use crate::engine::image::{Held, Image, RANGE_KEYS, RangePlan, load_local, plan_resources_after};
use crate::engine::layout::{KeyKind, Layout};
use crate::engine::read_cache::ReadCache;
use crate::engine::session::error::SessionError;
use crate::store::{self, DynStore, Listed, Streamed, Version};

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
pub(super) async fn list_plans(
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
pub(super) async fn list_cold(
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

/// GET `keys` (up to `parallel` at once), keep each found one in the read cache and decode it into `got`; a key found empty is left out.
pub(super) async fn fetch_records(
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
        got.push(got_of_bytes(
            layout,
            key,
            &kind,
            stored.version,
            stored.bytes,
            From::Store,
        )?);
        stats.fetched += 1;
    }
    Ok(())
}

/// The root's copy of the image, read off the runtime's threads (none known when that fails).
pub(super) async fn load_local_blocking(cache: &ReadCache, layout: &Layout) -> Held {
    let (cache, layout) = (cache.clone(), layout.clone());
    tokio::task::spawn_blocking(move || load_local(&cache, &layout))
        .await
        .unwrap_or_default()
}
