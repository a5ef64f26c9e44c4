//! A default provider's record: its ID, and how it is written.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::record_write::Body;
use crate::engine::layout::Layout;
use crate::engine::record::Writer;
use crate::engine::write_log::LogEntry;

/// Format tag of a default provider record.
pub const PROVIDER_FORMAT: &str = "choudoufu-live/provider/v1";

/// A default provider's record: its ID is a v5 UUID of its address and configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderRecord {
    /// Always [`PROVIDER_FORMAT`].
    pub format: String,
    /// The estate.
    pub estate: String,
    /// The provider configuration address.
    pub address: String,
    /// v5 UUID of address and configuration.
    pub id: String,
    /// The configuration.
    pub config: Value,
    /// Who wrote it.
    pub writer: Writer,
}

/// The ID of a default provider: the same for every run with the same address and configuration.
pub fn provider_id(address: &str, config: &Value) -> String {
    let canon =
        serde_json::to_string(&crate::engine::digest::canonical(config)).unwrap_or_default();
    uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_URL,
        format!("choudoufu-live:provider:{address}:{canon}").as_bytes(),
    )
    .to_string()
}

impl Body for ProviderRecord {
    fn stamp(&mut self, entry: &LogEntry) {
        self.writer.log = Some(entry.name());
    }

    fn encode(&self) -> Vec<u8> {
        // Strings and JSON values (whose maps have string keys) only: serialising cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    fn own(&self, _key: &str, bytes: &[u8], _layout: &Layout) -> Option<ProviderRecord> {
        let stored: ProviderRecord = serde_json::from_slice(bytes).ok()?;
        (stored.writer.run_id == self.writer.run_id
            && stored.address == self.address
            && stored.id == self.id
            && stored.config == self.config)
            .then_some(stored)
    }
}
