//! The conditional put every write goes through: it recognises its own earlier try.

use super::error::StoreError;
use super::record_store::{Conflict, Precondition, RecordStore, Version, WriteOutcome};
use super::traced;
use crate::cut::{Mechanism, cut};

/// A conditional put that recognises its own earlier try.
///
/// When the store refuses the write but now holds exactly `bytes` (which carry this run's
/// unique writer stamp), an earlier try of this same write landed and only its answer was
/// lost: that is this run's own write, not a conflict.
pub async fn put_conditional(
    store: &dyn RecordStore,
    key: &str,
    bytes: &[u8],
    precondition: &Precondition,
) -> Result<WriteOutcome<Version>, StoreError> {
    traced::put_conditional(store.kind(), key, bytes, precondition, async {
        match store.put(key, bytes, precondition).await? {
            WriteOutcome::Conflict(conflict) => match store.get(key).await? {
                Some(stored) if stored.bytes == bytes && !cut(Mechanism::OwnWrite) => {
                    traced::own_retry();
                    Ok(WriteOutcome::Written(stored.version))
                }
                found => Ok(WriteOutcome::Conflict(Conflict {
                    expected: conflict.expected,
                    found: found.map(|s| s.version),
                })),
            },
            written => Ok(written),
        }
    })
    .await
}
