//! The session's read: the estate read into its view (through [`crate::engine::read`]), and a
//! new image stored when the read says one is due.

use std::sync::Arc;

use super::error::SessionError;
use super::handle::Session;
use crate::engine::image::{Held, Image, save_local};
use crate::engine::read::{Sources, put_image, read_estate, sweep_log, written_image};
use crate::store::Version;

impl Session {
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
    /// that one and this session may write; then sweep the write log. The image as stored, or
    /// none when another reader was first or the write failed (the image is a cache: nothing
    /// else depends on it).
    async fn store_image(&self, bytes: Vec<u8>, listed: Option<Version>) -> Option<Image> {
        if let Err(e) = self.check_guard().await {
            tracing::warn!(key = %self.layout.image_key(), error = %e, "not writing the estate image");
            return None;
        }
        if let Err(e) = self.check_clock().await {
            tracing::warn!(key = %self.layout.image_key(), error = %e, "not writing the estate image");
            return None;
        }
        let version = put_image(&self.store, &self.layout, &bytes, listed).await?;
        sweep_log(
            &self.store,
            &self.layout,
            self.log.clock().as_ref(),
            self.log.timing(),
            self.parallel,
        )
        .await;
        written_image(&self.layout, bytes, version)
    }
}
