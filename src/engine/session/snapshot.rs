//! What a session knows of the estate: the records it read, and the base a write compares them against.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::engine::record::{EstateMeta, Record};
use crate::store::Version;

/// One record as the session read it.
#[derive(Clone, Debug)]
pub struct BaseEntry {
    /// The version read.
    pub version: Version,
    /// Digest of its content.
    pub digest: String,
    /// The record.
    pub record: Record,
}

/// What a session knows of the estate: the meta record and every record, by key.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// The estate's meta record and its version, once it exists.
    pub estate: Option<(EstateMeta, Version)>,
    /// Every record by key.
    pub records: BTreeMap<String, BaseEntry>,
}

impl Snapshot {
    /// The write base this snapshot gives: each record's version and digest.
    pub fn refs(&self) -> BTreeMap<String, BaseRef> {
        self.records
            .iter()
            .map(|(k, e)| (k.clone(), e.base_ref()))
            .collect()
    }
}

impl BaseEntry {
    /// What a write compares this record against.
    pub fn base_ref(&self) -> BaseRef {
        BaseRef {
            address: self.record.address().to_string(),
            version: self.version.clone(),
            digest: self.digest.clone(),
        }
    }
}

/// What a write compares a record against: the version and content digest this run's view holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseRef {
    /// The record's address (an output's name for an output record).
    pub address: String,
    /// The version this run's view holds.
    pub version: Version,
    /// The digest of the content this run's view holds.
    pub digest: String,
}
