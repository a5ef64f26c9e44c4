//! The values an image hands out: one record as it holds it, a resource record as its head
//! describes it, and what it says of the write log.

use std::time::SystemTime;

use crate::engine::state::{InstanceRank, ResourceView};
use crate::store::Version;

/// What an image says of the write log: its watermark and the entries still pending.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogMark {
    /// Every write log entry made after the compaction's listing is newer than this.
    pub from: SystemTime,
    /// The names of the entries whose writes may still land (the image may not hold them).
    pub pending: Vec<String>,
}

/// One record as an image holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageEntry<'a> {
    /// Where a resource record's instance sorts within its resource (none for other records).
    pub rank: Option<&'a InstanceRank>,
    /// The record's key.
    pub key: &'a str,
    /// The version the record had.
    pub version: &'a Version,
    /// The record's content digest.
    pub digest: &'a str,
    /// The record's bytes in final form (as `Record::encode` writes them).
    pub bytes: &'a [u8],
    /// The name of the write log entry its writer stamp carries.
    pub log: Option<&'a str>,
}

/// A resource record as its image entry's head describes it: what a read serves without decoding the record.
#[derive(Clone, Debug)]
pub struct Described<'a> {
    /// The instance address.
    pub address: &'a str,
    /// Its resource.
    pub resource: ResourceView<'a>,
    /// Its writer's terraform version.
    pub terraform_version: Option<&'a str>,
    /// Its instance's text in final form (compact JSON, as the served document holds it).
    pub instance: &'a [u8],
    /// Where the instance sorts within its resource.
    pub rank: &'a InstanceRank,
    /// The name of the write log entry its writer stamp carries.
    pub log: Option<&'a str>,
}
