//! The session's read of a few records by key, as the store holds them now: a saved plan's check of its own changes before its apply.

use std::collections::{BTreeMap, BTreeSet};

use futures::{StreamExt, stream};

use super::error::SessionError;
use super::handle::Session;
use super::snapshot::{BaseEntry, Snapshot};
use crate::cut::{Mechanism, cut};

/// The most records [`Session::records_now`] reads one by one; more are read with the whole estate.
pub const FEW_RECORDS: usize = 32;

impl Session {
    /// The records `keys` as the store holds them now (a key with no record is left out): each
    /// fetched by itself when they are few ([`FEW_RECORDS`]), leaving the view as it was; else
    /// the whole estate is read again, and the view is that read.
    pub async fn records_now(&self, keys: &BTreeSet<String>) -> Result<Snapshot, SessionError> {
        if keys.len() > FEW_RECORDS || cut(Mechanism::KeyedCheck) {
            self.refresh().await?;
            return Ok(self.snapshot().await);
        }
        let fetched: Vec<_> = stream::iter(keys)
            .map(|key| async move { (key, self.store.get(key).await) })
            .buffer_unordered(self.parallel)
            .collect()
            .await;
        let mut records = BTreeMap::new();
        for (key, got) in fetched {
            let Some(stored) = got? else {
                continue;
            };
            let entry = BaseEntry::decode(key, stored.version, &stored.bytes, &self.layout)?;
            records.insert(key.clone(), entry);
        }
        Ok(Snapshot {
            estate: None,
            records,
        })
    }
}
