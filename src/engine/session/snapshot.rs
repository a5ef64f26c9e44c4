//! What a session knows of the estate: the records it read, and the base a write compares them against.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};

use crate::engine::image::Image;
use crate::engine::layout::Layout;
use crate::engine::record::{CorruptRecord, EstateMeta, Record, RecordKind};
use crate::engine::state::{Instance, InstanceRank, Item, ResourceMeta, ResourceView};
use crate::store::Version;

/// One record as the session read it.
#[derive(Clone, Debug)]
pub struct BaseEntry {
    /// The version read.
    pub version: Version,
    /// Digest of its content.
    pub digest: String,
    /// The record, or where an image holds it.
    body: Body,
}

/// A record decoded, or a resource record an image holds, decoded only when looked into.
#[derive(Clone)]
///
/// Boxed, so an entry is a few words: a snapshot of an image's 10,000 records moves and drops
/// entries of some 100 bytes where an inline record made each 500.
enum Body {
    Decoded(Box<Record>),
    InImage {
        image: Arc<Image>,
        index: usize,
        record: OnceLock<Box<Result<Record, CorruptRecord>>>,
    },
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Body::Decoded(r) => f.debug_tuple("Decoded").field(r).finish(),
            Body::InImage { index, .. } => f.debug_struct("InImage").field("index", index).finish(),
        }
    }
}

/// What a served document takes from one record: a resource's instance, or an output.
#[derive(Clone, Debug)]
pub enum Part<'a> {
    /// One resource instance object.
    Resource {
        /// Its resource.
        resource: ResourceView<'a>,
        /// Its instance.
        instance: PartInstance<'a>,
    },
    /// One root output.
    Output {
        /// The output's name.
        name: &'a str,
        /// The output object.
        output: &'a serde_json::Value,
    },
}

/// A document's instance: a decoded one, or its text in final form with its rank.
#[derive(Clone, Debug)]
pub enum PartInstance<'a> {
    /// Decoded (or kept as text by its record).
    Instance(&'a Instance),
    /// Its compact JSON text, as an image holds it, and where it sorts.
    Text(&'a [u8], &'a InstanceRank),
}

impl<'a> Part<'a> {
    /// The part an item gives.
    pub fn of_item(item: &'a Item) -> Part<'a> {
        match item {
            Item::Resource { meta, instance, .. } => Part::Resource {
                resource: meta.view(),
                instance: PartInstance::Instance(instance),
            },
            Item::Output { name, output } => Part::Output { name, output },
        }
    }
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
    /// A record read at `version`, whose content digest is `digest`.
    pub fn new(version: Version, digest: String, record: Record) -> BaseEntry {
        BaseEntry {
            version,
            digest,
            body: Body::Decoded(Box::new(record)),
        }
    }

    /// The record `key` read at `version` as `bytes`, decoded, with its content digest.
    pub fn decode(
        key: &str,
        version: Version,
        bytes: &[u8],
        layout: &Layout,
    ) -> Result<BaseEntry, CorruptRecord> {
        let record = Record::decode(key, bytes, layout)?;
        Ok(BaseEntry::new(version, record.content_digest(), record))
    }

    /// The resource record in slot `index` of `image`, read at `version`, undecoded (none: the
    /// image does not describe it, see [`Image::described`]; an image never changes, so one it
    /// describes stays described).
    pub fn in_image(
        image: &Arc<Image>,
        index: usize,
        version: Version,
        digest: String,
    ) -> Option<BaseEntry> {
        if !image.describes(index) {
            return None;
        }
        Some(BaseEntry {
            version,
            digest,
            body: Body::InImage {
                image: Arc::clone(image),
                index,
                record: OnceLock::new(),
            },
        })
    }

    /// The record (decoded from its image the first time it is asked for).
    pub fn record(&self) -> Result<&Record, CorruptRecord> {
        match &self.body {
            Body::Decoded(r) => Ok(r),
            Body::InImage {
                image,
                index,
                record,
            } => {
                let decoded: &Result<Record, CorruptRecord> = record.get_or_init(|| {
                    let entry = image.entry_by_index(*index);
                    Box::new(match entry {
                        Some(e) => {
                            Record::decode_final(e.key, e.bytes, image.layout(), e.rank.cloned())
                        }
                        None => Err(CorruptRecord {
                            key: String::new(),
                            reason: "the image holds no such entry".into(),
                        }),
                    })
                });
                decoded.as_ref().map_err(Clone::clone)
            }
        }
    }

    /// The record's bytes in final form as its image holds them (none: not read from an image).
    pub fn image_bytes(&self) -> Option<&[u8]> {
        match &self.body {
            Body::InImage { image, index, .. } => image.entry_by_index(*index).map(|e| e.bytes),
            Body::Decoded(_) => None,
        }
    }

    /// The instance address, or the output's name.
    pub fn address(&self) -> &str {
        match &self.body {
            Body::Decoded(r) => r.address(),
            Body::InImage { image, index, .. } => {
                image.described_address(*index).unwrap_or_default()
            }
        }
    }

    /// What the record holds.
    pub fn kind(&self) -> RecordKind {
        match &self.body {
            Body::Decoded(r) => r.kind(),
            Body::InImage { .. } => RecordKind::Resource,
        }
    }

    /// The name of the write log entry its writer stamp carries.
    pub fn log(&self) -> Option<&str> {
        match &self.body {
            Body::Decoded(r) => r.writer.log.as_deref(),
            Body::InImage { image, index, .. } => image.log_at(*index),
        }
    }

    /// The terraform version its writer stamp names.
    pub fn terraform_version(&self) -> Option<&str> {
        match &self.body {
            Body::Decoded(r) => r.writer.terraform_version.as_deref(),
            Body::InImage { image, index, .. } => {
                image.described_terraform_version(*index).flatten()
            }
        }
    }

    /// Where a resource record's instance sorts within its resource (none for an output).
    pub fn rank(&self) -> Option<InstanceRank> {
        match &self.body {
            Body::Decoded(r) => match &r.item {
                Item::Resource { instance, .. } => Some(instance.rank()),
                Item::Output { .. } => None,
            },
            Body::InImage { image, index, .. } => image.rank_at(*index).cloned(),
        }
    }

    /// The resource of a resource record (none for an output, or one that no longer decodes).
    pub fn resource(&self) -> Option<ResourceView<'_>> {
        let described = match &self.body {
            Body::InImage { image, index, .. } => image.described(*index),
            Body::Decoded(_) => None,
        };
        match described {
            Some(d) => Some(d.resource),
            None => self.record().ok()?.resource().map(ResourceMeta::view),
        }
    }

    /// What the served document takes from it.
    pub fn part(&self) -> Option<Part<'_>> {
        match &self.body {
            Body::Decoded(r) => Some(Part::of_item(&r.item)),
            Body::InImage { image, index, .. } => match image.described(*index) {
                Some(d) => Some(Part::Resource {
                    resource: d.resource,
                    instance: PartInstance::Text(d.instance, d.rank),
                }),
                None => self.record().ok().map(|r| Part::of_item(&r.item)),
            },
        }
    }

    /// What a write compares this record against.
    pub fn base_ref(&self) -> BaseRef {
        BaseRef {
            address: self.address().to_string(),
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
