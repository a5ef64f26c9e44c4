//! The session's side of the write log: its clock, checked once against the store's before
//! it writes (an image, for now; every record write once the log is written), and refused by
//! name when too far off.

use thiserror::Error;

use super::handle::Session;
use crate::cut::{Mechanism, cut};
use crate::engine::write_log::{ClockSkewError, check_skew};
use crate::store::StoreError;

/// Why a session's clock check did not pass.
#[derive(Debug, Error)]
pub enum ClockCheckError {
    /// The store could not tell its time: the check is made again next time.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// This clock is too far from the store's.
    #[error(transparent)]
    Skew(#[from] ClockSkewError),
}

impl Session {
    /// Compare this session's clock with the store's, once (a check that could not be made is
    /// made again next time): a clock further off than the skew limit is refused by name.
    pub async fn check_clock(&self) -> Result<(), ClockCheckError> {
        if cut(Mechanism::ClockSkew) {
            return Ok(());
        }
        self.clock_checked
            .get_or_try_init(|| async {
                let key = self.layout.estate_key();
                let sent = self.clock.now();
                let time = self.store.store_time(&key).await?;
                let answered = self.clock.now();
                let limit = self.timing.skew_limit();
                let skew = check_skew(&self.store.describe(), sent, answered, time, limit)?;
                tracing::debug!(
                    skew_ms = skew.as_millis() as u64,
                    "this clock is close enough to the store's"
                );
                Ok::<(), ClockCheckError>(())
            })
            .await?;
        Ok(())
    }
}
