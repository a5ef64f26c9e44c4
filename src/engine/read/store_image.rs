//! Storing a new image over the one a read listed, and sweeping the write log after it.

use futures::{StreamExt, stream};

use crate::cut::{Mechanism, cut};
use crate::engine::image::{Image, RANGE_KEYS};
use crate::engine::layout::Layout;
use crate::engine::write_log::{Clock, Timing, time_key};
use crate::store::{DynStore, KeyRange, Precondition, Version, WriteOutcome};

/// Write `bytes` as the estate's image over the stored one a read listed (or where none was),
/// if it is still that one; the version written, or none when another reader was first or the
/// write failed (the image is a cache: nothing else depends on it).
pub async fn put_image(
    store: &DynStore,
    layout: &Layout,
    bytes: &[u8],
    listed: Option<Version>,
) -> Option<Version> {
    let key = layout.image_key();
    let precondition = match listed {
        Some(v) => Precondition::Matches(v),
        None => Precondition::Absent,
    };
    match store.put(&key, bytes, &precondition).await {
        Ok(WriteOutcome::Written(version)) => {
            tracing::debug!(key = %key, bytes = bytes.len(), "wrote a new estate image");
            Some(version)
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

/// The image just written as `bytes` at `version`, read back (none, with a warning, when it does not read).
pub fn written_image(layout: &Layout, bytes: Vec<u8>, version: Version) -> Option<Image> {
    match Image::decode(layout, bytes) {
        Ok(image) => Some(image.stored_as(Some(version))),
        Err(e) => {
            tracing::warn!(key = %layout.image_key(), error = %e, "the estate image just written does not read back");
            None
        }
    }
}

/// Delete up to a page of write log entries older than the retention (each `If-Match` its
/// listed version), `parallel` at once, after a new image: the sweep every kind has (the local
/// store no other). `clock` passed the skew check; a failure leaves the entries for the next sweep.
pub async fn sweep_log(
    store: &DynStore,
    layout: &Layout,
    clock: &dyn Clock,
    timing: &Timing,
    parallel: usize,
) {
    if cut(Mechanism::LogSweep) {
        return;
    }
    let Some(oldest) = clock.now().checked_sub(timing.retention) else {
        return;
    };
    let older = KeyRange::new(Some(time_key(layout, oldest)), None);
    let page = match store
        .list_range_page(&layout.log_prefix(), &older, RANGE_KEYS, None)
        .await
    {
        Ok(page) => page,
        Err(e) => {
            tracing::warn!(error = %e, "could not list the write log's expired entries");
            return;
        }
    };
    let deletes = stream::iter(page.items)
        .map(|item| async move { (store.delete(&item.key, &item.version).await, item.key) })
        .buffer_unordered(parallel)
        .collect::<Vec<_>>()
        .await;
    for (result, key) in deletes {
        if let Err(e) = result {
            tracing::warn!(key = %key, error = %e, "could not delete an expired write log entry");
        }
    }
}
