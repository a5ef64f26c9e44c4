//! Reading an estate: list it, fetch every record (from the read cache when its listed version is there), decode.

use std::sync::Arc;

use futures::{StreamExt, stream};

use super::{BaseEntry, SessionError, Snapshot};
use crate::engine::layout::{KeyKind, Layout};
use crate::engine::read_cache::ReadCache;
use crate::engine::record::{EstateMeta, Record};
use crate::store::{self, DynStore};

/// Read every record of an estate, `parallel` gets at a time.
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
    let listed = store::list_all(store.as_ref(), &layout.prefix()).await?;
    let mut wanted = Vec::new();
    for item in listed {
        match layout.classify(&item.key) {
            Some(KeyKind::Unknown) | None => {
                tracing::warn!(key = %item.key, "ignoring a key this layout does not write");
            }
            Some(kind @ (KeyKind::Estate | KeyKind::Resource | KeyKind::Output)) => {
                wanted.push((item.key, kind, item.version))
            }
            Some(_) => {} // marks, runs and provider records are not state
        }
    }
    let fetched: Vec<Result<_, SessionError>> = stream::iter(wanted)
        .map(|(key, kind, listed)| {
            let store = Arc::clone(store);
            async move {
                if let Some(hit) = cache.and_then(|c| c.get(&key, &listed)) {
                    return Ok((key, kind, Some(hit)));
                }
                let stored = store.get(&key).await?;
                if let (Some(c), Some(s)) = (cache, &stored) {
                    c.put(&key, &s.version, &s.bytes);
                }
                Ok((key, kind, stored))
            }
        })
        .buffer_unordered(parallel.max(1))
        .collect()
        .await;
    let mut snapshot = Snapshot::default();
    crate::telemetry::metrics().records_read(
        fetched
            .iter()
            .filter(|r| matches!(r, Ok((_, _, Some(_)))))
            .count(),
    );
    for result in fetched {
        let (key, kind, stored) = result?;
        let Some(stored) = stored else { continue };
        match kind {
            KeyKind::Estate => {
                let meta = EstateMeta::decode(&key, &stored.bytes, layout)?;
                snapshot.estate = Some((meta, stored.version));
            }
            _ => {
                let record = Record::decode(&key, &stored.bytes, layout)?;
                snapshot.records.insert(
                    key,
                    BaseEntry {
                        version: stored.version,
                        digest: record.content_digest(),
                        record,
                    },
                );
            }
        }
    }
    Ok(snapshot)
}
