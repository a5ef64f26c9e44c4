//! The end of an estate: its meta record deleted once it holds no records (a workspace deleted).

use super::error::SessionError;
use super::handle::Session;
use crate::store::WriteOutcome;

/// What deleting an estate did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EstateDeleted {
    /// Its meta record is gone: deleted now, or there was none.
    Deleted,
    /// It still holds this many records: nothing was deleted.
    HoldsRecords(usize),
    /// Another run wrote its meta record after this run read it: nothing was deleted.
    Changed,
}

impl Session {
    /// Read the estate again and delete its meta record, conditional on the version read, when
    /// it holds no records.
    pub async fn delete_estate(&self) -> Result<EstateDeleted, SessionError> {
        self.refresh().await?;
        let snapshot = self.snapshot().await;
        if !snapshot.records.is_empty() {
            return Ok(EstateDeleted::HoldsRecords(snapshot.records.len()));
        }
        let Some((_, version)) = snapshot.estate else {
            return Ok(EstateDeleted::Deleted);
        };
        let key = self.layout().estate_key();
        Ok(match self.store().delete(&key, &version).await? {
            WriteOutcome::Written(()) => EstateDeleted::Deleted,
            WriteOutcome::Conflict(c) if c.found.is_none() => EstateDeleted::Deleted,
            WriteOutcome::Conflict(_) => EstateDeleted::Changed,
        })
    }
}
