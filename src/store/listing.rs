//! Listings followed to their end: every key under a prefix, or inside one key range.

use super::error::StoreError;
use super::record_store::{KeyRange, Listed, RecordStore};

/// Every key and version under `prefix`, following pages to the end.
pub async fn list_all(store: &dyn RecordStore, prefix: &str) -> Result<Vec<Listed>, StoreError> {
    let mut out = Vec::new();
    let mut token = None;
    loop {
        let page = store.list_page(prefix, token).await?;
        out.extend(page.items);
        match page.next {
            Some(t) => token = Some(t),
            None => return Ok(out),
        }
    }
}

/// Every key and version under `prefix` inside `range`, following pages of about `limit` keys.
pub async fn list_range(
    store: &dyn RecordStore,
    prefix: &str,
    range: &KeyRange,
    limit: usize,
) -> Result<Vec<Listed>, StoreError> {
    let mut out = Vec::new();
    let mut token = None;
    loop {
        let page = store.list_range_page(prefix, range, limit, token).await?;
        out.extend(page.items);
        match page.next {
            Some(t) => token = Some(t),
            None => return Ok(out),
        }
    }
}
