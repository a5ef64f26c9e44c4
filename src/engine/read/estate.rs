//! Reading an estate: through its image and write log when it can, else by its full listing.

use super::full::read_full;
use super::outcome::Read;
use super::sources::Sources;
use super::through_log::{Through, read_through_log};
use crate::engine::layout::Layout;
use crate::engine::read_cache::ReadCache;
use crate::engine::session::error::SessionError;
use crate::engine::session::snapshot::Snapshot;
use crate::store::DynStore;

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

/// Read the estate: the snapshot, the image to hold, and a new image if the stored one is stale.
pub async fn read_estate(
    store: &DynStore,
    layout: &Layout,
    parallel: usize,
    run_id: &str,
    sources: Sources<'_>,
) -> Result<Read, SessionError> {
    match read_through_log(store, layout, parallel, &sources).await? {
        Through::Read(read) => Ok(read),
        Through::Full(start) => read_full(store, layout, parallel, run_id, &sources, start).await,
    }
}
