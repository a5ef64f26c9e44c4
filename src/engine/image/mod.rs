//! The estate image: one object under the estate's prefix holding every state record's bytes
//! with the version each had. A cache, never the truth: an entry is used only when its
//! version equals the one the listing gives, and an image that is corrupt or not this
//! estate's is ignored with a warning.
//!
//! Format (`choudoufu-live/image/v2`), written by [`Image::encode`]:
//!
//! ```text
//! choudoufu-live/image/v2\n
//! {"estate":"prod","run_id":"…","written_at":"…","entries":N,"body_crc32":C}\n
//! then N entries, in key order, each:
//! {"key":"tofu-records/prod/r/…","version":{"token":"…"},"digest":"…","rank":[1,0,"",""],"res":[[s,e],…],"bytes":LEN}\n<LEN record bytes>\n
//! ```
//!
//! `body_crc32` (CRC-32 of everything after the header line) refuses a truncated or damaged
//! image whole. Record bytes are in final form (as `Record::encode` writes them, so each
//! instance's text is what the served document holds and is copied there unparsed), `rank`
//! is where a resource's instance sorts among its resource's instances, and `digest` is the
//! record's content digest, so an entry used needs no second digest. `res`, on a resource
//! record's head, is its summary ([`Summary`](crate::engine::record::Summary)): where its texts and instance lie in its bytes,
//! so a read serves it without decoding it. An image of another
//! format (v1 held SHA-256 and record bytes as stored) is ignored with a warning.
//!
//! Stored (`choudoufu-live/image/v4-lz4`, `pack.rs`), the same text is LZ4-compressed in blocks
//! behind a line of their own, each with a CRC-32 (which covers the text, so a packed text's
//! `body_crc32` is not checked again). The root's copy keeps the text itself; a stored text and
//! an image in one block (`v3-lz4`, older writers') still read. The text is read by `text.rs`,
//! each entry head by `head.rs`.

use std::borrow::Cow;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::cut::{Mechanism, cut};
use crate::engine::digest::sha256_hex;
use crate::engine::layout::{KeyKind, Layout};
use crate::engine::private_dir;
use crate::engine::read_cache::ReadCache;
use crate::engine::record::summary_of_final;
use crate::engine::state::{InstanceRank, ResourceView};
use crate::store::private_file::{self, Durability};
use crate::store::{KeyRange, RangeStart, Version};
use head::EntryHead;
pub use pack::{STORED_FORMAT, STORED_FORMAT_V3};
use pack::{Unpacked, pack, unpack, unpack_streamed};
use text::{Header, Slot, Text, find_entries, framed, head_lines, line, read_heads, text_of};
pub use text::{IMAGE_FORMAT, ImageError, MAX_IMAGE_BYTES};

mod head;
mod pack;
mod text;

/// Keys per listing range (the page size every kind serves).
pub const RANGE_KEYS: usize = 1000;
/// A read rewrites the image when more records than this were not in it at their version...
pub const REFRESH_MIN: usize = 50;
/// ...and more than this share of the records (in percent).
pub const REFRESH_PERCENT: usize = 5;

/// How many records a read may find outside the image before it writes a new one:
/// more than [`REFRESH_MIN`] and more than [`REFRESH_PERCENT`] of `records`.
pub fn refresh_bound(records: usize) -> usize {
    REFRESH_MIN.max(records * REFRESH_PERCENT / 100)
}

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

/// A decoded estate image: entries in key order over the image's own bytes.
#[derive(Clone, Debug)]
pub struct Image {
    layout: Layout,
    /// Its text, checked as UTF-8 once when decoded.
    data: String,
    slots: Vec<Slot>,
    stored: Option<Version>,
    log: Option<LogMark>,
}

/// An image's text, where its entries start, and where each ends (after its newline).
struct Written {
    text: Vec<u8>,
    body: usize,
    ends: Vec<usize>,
}

impl Image {
    /// Read an image of `layout`'s estate (stored packed, or its text), checking its format,
    /// estate, checksum and every entry's key.
    pub fn decode(layout: &Layout, data: Vec<u8>) -> Result<Image, ImageError> {
        Self::unpacked(layout, unpack(layout, data)?)
    }

    /// Read an image of `layout`'s estate as [`Image::decode`] does, as its stored bytes arrive
    /// from `next` (which blocks for each chunk), or the error `next` gave.
    pub fn decode_streamed<E>(
        layout: &Layout,
        next: impl FnMut() -> Option<Result<Vec<u8>, E>>,
    ) -> Result<Result<Image, ImageError>, E> {
        Ok(unpack_streamed(layout, next)?.and_then(|u| Self::unpacked(layout, u)))
    }

    /// Read the image of `layout`'s estate that `unpacked` is the text of.
    fn unpacked(layout: &Layout, unpacked: Unpacked) -> Result<Image, ImageError> {
        let (data, checked, found) = match unpacked {
            Unpacked::Text(text) => (text, false, None),
            Unpacked::Block(text) => (text, true, None),
            Unpacked::Blocks { text, body, slots } => (text, true, Some((body, slots))),
        };
        if data.len() > MAX_IMAGE_BYTES {
            return Err(ImageError::Format(format!(
                "{} bytes is larger than any image",
                data.len()
            )));
        }
        let (header, body) = head_lines(layout, &data)?;
        // A packed text was checked by its blocks' checksums: its body needs no second one.
        if !checked && crc32fast::hash(&data[body..]) != header.body_crc32 {
            return Err(ImageError::Checksum);
        }
        // A packed block's entries were found and their heads read as it was unpacked. Any
        // other text's entries are found (a head ends with its record's length), then its
        // heads read over the machine's cores; then the order is checked.
        let (data, slots) = match found {
            Some((head_block, slots)) if head_block == body => (text_of(data)?, slots),
            Some(_) => {
                return Err(ImageError::Format(
                    "its first block is not its two head lines".into(),
                ));
            }
            None => {
                let spans = find_entries(&data[body..], body)?;
                let data = text_of(data)?;
                let slots = read_heads(layout, &data, &spans)?;
                (data, slots)
            }
        };
        for (index, pair) in slots.windows(2).enumerate() {
            if pair[0].key.bytes(&data) >= pair[1].key.bytes(&data) {
                return Err(ImageError::Entry {
                    index: index + 1,
                    reason: format!("{} is out of key order", pair[1].key.get(&data)),
                });
            }
        }
        if slots.len() != header.entries {
            return Err(ImageError::Format(format!(
                "the header names {} entries, the body holds {}",
                header.entries,
                slots.len()
            )));
        }
        let log = header.log_from.map(|nanos| LogMark {
            from: UNIX_EPOCH + Duration::from_nanos(nanos),
            pending: header.pending,
        });
        Ok(Image {
            layout: layout.clone(),
            data,
            slots,
            stored: None,
            log,
        })
    }

    /// The stored bytes of an image of `entries` (in any order), written by `run_id`, with its
    /// write log mark: its text, packed.
    pub fn encode<'a>(
        layout: &Layout,
        run_id: &str,
        log: Option<&LogMark>,
        entries: impl IntoIterator<Item = ImageEntry<'a>>,
    ) -> Vec<u8> {
        let written = Self::encode_text(layout, run_id, log, entries);
        if cut(Mechanism::ImagePack) {
            return written.text;
        }
        pack(&written.text, written.body, &written.ends)
    }

    /// The text of an image of `entries` (in any order), written by `run_id`, with its write log
    /// mark, and where its entries start and end.
    fn encode_text<'a>(
        layout: &Layout,
        run_id: &str,
        log: Option<&LogMark>,
        entries: impl IntoIterator<Item = ImageEntry<'a>>,
    ) -> Written {
        let mut entries: Vec<ImageEntry<'a>> = entries.into_iter().collect();
        entries.sort_by(|a, b| a.key.cmp(b.key));
        entries.dedup_by(|a, b| a.key == b.key);
        let mut body = Vec::with_capacity(entries.iter().map(|e| e.bytes.len() + 160).sum());
        let mut ends = Vec::with_capacity(entries.len());
        for e in &entries {
            let resource = e.rank.is_some() && layout.classify(e.key) == Some(KeyKind::Resource);
            let head = EntryHead {
                key: e.key,
                version: e.version,
                digest: e.digest,
                rank: e.rank,
                log: e.log,
                res: resource.then(|| summary_of_final(e.bytes)).flatten(),
                bytes: e.bytes.len(),
            };
            // An entry head has string keys only: serialising cannot fail.
            let _ = serde_json::to_writer(&mut body, &head);
            body.push(b'\n');
            body.extend_from_slice(e.bytes);
            body.push(b'\n');
            ends.push(body.len());
        }
        let header = Header {
            estate: layout.estate().to_string(),
            run_id: run_id.to_string(),
            written_at: crate::engine::program::now_rfc3339(),
            entries: entries.len(),
            body_crc32: crc32fast::hash(&body),
            log_from: log.map(|m| {
                m.from
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            }),
            pending: log.map(|m| m.pending.clone()).unwrap_or_default(),
        };
        let text = framed(IMAGE_FORMAT, &header, &body);
        // Each entry's end, in the text.
        let body = text.len() - body.len();
        ends.iter_mut().for_each(|end| *end += body);
        Written { text, body, ends }
    }

    /// The same image, noted as the store's object at `version`.
    pub fn stored_as(mut self, version: Option<Version>) -> Self {
        self.stored = version;
        self
    }

    /// The version of the store object this image is, if it came from (or went to) the store.
    pub fn stored(&self) -> Option<&Version> {
        self.stored.as_ref()
    }

    /// The image's text (unpacked).
    pub fn bytes(&self) -> &[u8] {
        self.data.as_bytes()
    }

    /// How many records it holds.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    fn entry<'a>(&'a self, slot: &'a Slot) -> ImageEntry<'a> {
        ImageEntry {
            key: slot.key.get(&self.data),
            version: &slot.version,
            digest: slot.digest.get(&self.data),
            rank: slot.rank.as_ref(),
            bytes: self
                .data
                .as_bytes()
                .get(slot.start..slot.end)
                .unwrap_or_default(),
            log: slot.log.as_ref().map(|l| l.get(&self.data)),
        }
    }

    /// The index of `key`'s slot.
    fn index_of(&self, key: &str) -> Option<usize> {
        self.slots
            .binary_search_by(|s| s.key.bytes(&self.data).cmp(key.as_bytes()))
            .ok()
    }

    /// The slot of `key`.
    fn slot_of(&self, key: &str) -> Option<&Slot> {
        self.slots.get(self.index_of(key)?)
    }

    /// The estate layout it was read for.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The entry in slot `index` (see [`Image::index_at`]).
    pub fn entry_by_index(&self, index: usize) -> Option<ImageEntry<'_>> {
        self.slots.get(index).map(|s| self.entry(s))
    }

    /// The resource record in slot `index` as its head describes it (none: not a resource record, or a head written without a summary).
    pub fn described(&self, index: usize) -> Option<Described<'_>> {
        let slot = self.slots.get(index)?;
        let res = slot.res.as_ref()?;
        fn borrowed<'b>(t: &'b Text, data: &'b str) -> Cow<'b, str> {
            Cow::Borrowed(t.get(data))
        }
        let text = |t| borrowed(t, &self.data);
        Some(Described {
            address: res.address.get(&self.data),
            resource: ResourceView {
                module: res.module.as_ref().map(text),
                mode: text(&res.mode),
                type_name: text(&res.type_name),
                name: text(&res.name),
                each: res.each.as_ref().map(text),
                provider: text(&res.provider),
            },
            terraform_version: res.terraform_version.as_ref().map(|t| t.get(&self.data)),
            instance: self.data.as_bytes().get(res.instance.clone())?,
            rank: slot.rank.as_ref()?,
            log: slot.log.as_ref().map(|l| l.get(&self.data)),
        })
    }

    /// Whether its head describes the resource record in slot `index` (see [`Image::described`]).
    pub fn describes(&self, index: usize) -> bool {
        self.slots.get(index).is_some_and(|s| s.res.is_some())
    }

    /// The instance address of the resource record its head describes in slot `index`.
    pub fn described_address(&self, index: usize) -> Option<&str> {
        let res = self.slots.get(index)?.res.as_ref()?;
        Some(res.address.get(&self.data))
    }

    /// The writer's terraform version of the resource record its head describes in slot `index`
    /// (the outer none: not described).
    pub fn described_terraform_version(&self, index: usize) -> Option<Option<&str>> {
        let res = self.slots.get(index)?.res.as_ref()?;
        Some(res.terraform_version.as_ref().map(|t| t.get(&self.data)))
    }

    /// The write log entry name the record in slot `index` carries.
    pub fn log_at(&self, index: usize) -> Option<&str> {
        self.slots
            .get(index)?
            .log
            .as_ref()
            .map(|l| l.get(&self.data))
    }

    /// Where the resource instance in slot `index` sorts within its resource.
    pub fn rank_at(&self, index: usize) -> Option<&InstanceRank> {
        self.slots.get(index)?.rank.as_ref()
    }

    /// What it says of the write log (none: written by an older program).
    pub fn log(&self) -> Option<&LogMark> {
        self.log.as_ref()
    }

    /// The entry for `key`, at whatever version it holds.
    pub fn entry_of(&self, key: &str) -> Option<ImageEntry<'_>> {
        self.slot_of(key).map(|slot| self.entry(slot))
    }

    /// Every entry, in key order.
    pub fn entries(&self) -> impl Iterator<Item = ImageEntry<'_>> {
        self.slots.iter().map(|s| self.entry(s))
    }

    /// The keys it holds, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.slots.iter().map(|s| s.key.get(&self.data))
    }

    /// The entry for `key`, only when it holds the version the listing gave: never another.
    pub fn entry_at(&self, key: &str, listed: &Version) -> Option<ImageEntry<'_>> {
        self.entry_by_index(self.index_at(key, listed)?)
    }

    /// The slot of `key`, only when it holds the version the listing gave (see [`Image::entry_at`]).
    pub fn index_at(&self, key: &str, listed: &Version) -> Option<usize> {
        let at = self.index_of(key)?;
        (self.slots[at].version.token == listed.token || cut(Mechanism::ImageVersion)).then_some(at)
    }
}

/// What a reader knows of the stored image before it lists.
#[derive(Clone, Debug, Default)]
pub enum Held {
    /// Nothing: the first read fetches the stored image.
    #[default]
    Unknown,
    /// The last look found none stored (or one unusable): the listing shows whether one appeared.
    Absent,
    /// An image: the one stored at its [`Image::stored`] version, or an older one kept locally.
    Image(Arc<Image>),
}

impl Held {
    /// The image, if one is held.
    pub fn image(&self) -> Option<&Arc<Image>> {
        match self {
            Held::Image(i) => Some(i),
            _ => None,
        }
    }
}

/// One listing to make: the keys under `prefix` inside `range`, in pages of about `limit`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangePlan {
    /// The prefix listed.
    pub prefix: String,
    /// The range within it.
    pub range: KeyRange,
    /// Keys expected, with room for some created since: the page size asked for.
    pub limit: usize,
}

/// The listings of an estate's state keys: each state segment split at every
/// `RANGE_KEYS`-th key `known` holds (sorted keys, e.g. an image's), so they can run at once.
///
/// Any split is correct, however old `known` is: the ranges tile each segment, and a
/// range that grew is paged to its end. Without known keys, or on a kind that cannot
/// start a listing at a key, the estate's prefix is listed in plain pages (as before
/// images); so it is when the known keys fit in one page, which one request then lists.
pub fn plan_ranges<'a>(
    layout: &Layout,
    known: impl IntoIterator<Item = &'a str>,
    start: RangeStart,
) -> Vec<RangePlan> {
    let known: Vec<&str> = known.into_iter().collect();
    if known.len() + known.len() / 8 + 16 <= RANGE_KEYS {
        return vec![RangePlan {
            prefix: layout.prefix(),
            // Everything but the write log, which sorts last.
            range: KeyRange::new(None, Some(layout.log_prefix())),
            limit: RANGE_KEYS,
        }];
    }
    let segments = layout.state_segments();
    let mut keys: Vec<Vec<&str>> = vec![Vec::new(); segments.len()];
    if start == RangeStart::Server {
        for key in known {
            if let Some(i) = segments
                .iter()
                .position(|(p, r)| key.starts_with(p.as_str()) && r.contains(key))
            {
                keys[i].push(key);
            }
        }
    }
    let mut plans = Vec::new();
    for ((prefix, segment), keys) in segments.into_iter().zip(keys) {
        plans.extend(plan_segment(prefix, segment, &keys));
    }
    plans
}

/// The listings of the resources after `after` (the last key of a first page already listed),
/// split at the known keys past it.
pub fn plan_resources_after<'a>(
    layout: &Layout,
    known: impl IntoIterator<Item = &'a str>,
    after: &str,
) -> Vec<RangePlan> {
    let [_, (prefix, segment)] = layout.state_segments();
    let range = KeyRange::new(Some(after.to_string()), segment.before);
    let keys: Vec<&str> = known
        .into_iter()
        .filter(|k| k.starts_with(prefix.as_str()) && range.contains(k))
        .collect();
    plan_segment(prefix, range, &keys)
}

/// One segment's listings: split after every `RANGE_KEYS`-th of its known `keys` (sorted).
fn plan_segment(prefix: String, segment: KeyRange, keys: &[&str]) -> Vec<RangePlan> {
    if keys.is_empty() {
        return vec![RangePlan {
            prefix,
            range: segment,
            limit: RANGE_KEYS,
        }];
    }
    let chunks: Vec<&[&str]> = keys.chunks(RANGE_KEYS).collect();
    let mut after = segment.after.clone();
    let mut plans = Vec::with_capacity(chunks.len());
    for (i, chunk) in chunks.iter().enumerate() {
        let last = chunk.last().map(|k| k.to_string());
        let range = if i + 1 == chunks.len() {
            KeyRange::new(after.clone(), segment.before.clone())
        } else {
            KeyRange::through(after.clone(), last.clone())
        };
        plans.push(RangePlan {
            prefix: prefix.clone(),
            range,
            limit: (chunk.len() + chunk.len() / 8 + 16).min(RANGE_KEYS),
        });
        after = last;
    }
    plans
}

/// Where a root keeps its copy of the last image it saw of `layout`'s estate.
fn local_path(cache: &ReadCache, layout: &Layout) -> PathBuf {
    cache.dir().join(format!(
        "image-{}",
        &sha256_hex(layout.estate().as_str().as_bytes())[..32]
    ))
}

#[derive(Serialize, Deserialize)]
struct LocalHead {
    /// The stored version of the image that follows.
    stored: Option<Version>,
    /// No image follows: the last look found none stored.
    #[serde(default)]
    absent: bool,
}

/// Whether the root's copy may hold an image, by its size alone (a copy that says only that
/// none is stored is its head line, under a kilobyte).
pub fn local_may_hold_image(cache: &ReadCache, layout: &Layout) -> bool {
    std::fs::metadata(local_path(cache, layout)).is_ok_and(|m| m.len() > 1024)
}

/// What the root's copy says of the estate's image (a copy that cannot be read: a warning, and unknown).
pub fn load_local(cache: &ReadCache, layout: &Layout) -> Held {
    let path = local_path(cache, layout);
    let ignore = |why: &dyn std::fmt::Display| {
        tracing::warn!(path = %path.display(), error = %why, "ignoring the local copy of the estate image");
        Held::Unknown
    };
    let data = match std::fs::read(&path) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Held::Unknown,
        Err(e) => return ignore(&e),
    };
    let Some((head, at)) = line(&data, 0) else {
        return ignore(&"no header");
    };
    let head: LocalHead = match serde_json::from_slice(head) {
        Ok(h) => h,
        Err(e) => return ignore(&e),
    };
    if head.absent {
        return Held::Absent;
    }
    match Image::decode(layout, data[at..].to_vec()) {
        Ok(image) => Held::Image(Arc::new(image.stored_as(head.stored))),
        Err(e) => ignore(&e),
    }
}

/// Keep what is known of the image as the root's copy (private files; a failure only costs a fetch).
pub fn save_local(cache: &ReadCache, layout: &Layout, held: &Held) {
    let (head, image) = match held {
        Held::Unknown => return,
        Held::Absent => (
            LocalHead {
                stored: None,
                absent: true,
            },
            None,
        ),
        Held::Image(i) => (
            LocalHead {
                stored: i.stored.clone(),
                absent: false,
            },
            Some(i),
        ),
    };
    let path = local_path(cache, layout);
    let dir = cache.dir();
    let written = private_dir::create(dir)
        .map_err(|e| e.to_string())
        .and_then(|()| {
            private_file::write_with(&path, Durability::Synced, |f| {
                serde_json::to_writer(&mut *f, &head)?;
                f.write_all(b"\n")?;
                if let Some(image) = image {
                    f.write_all(image.data.as_bytes())?;
                }
                Ok(())
            })
            .map_err(|e| e.to_string())
        });
    if let Err(e) = written {
        tracing::debug!(path = %path.display(), error = %e, "could not keep a local copy of the estate image");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::layout::EstateName;

    fn layout(name: &str) -> Layout {
        Layout::new(EstateName::parse(name).unwrap())
    }

    fn sample(l: &Layout) -> Vec<u8> {
        let (v1, v2) = (Version::new("\"a\""), Version::new("\"b\""));
        let (k1, k2) = (l.resource_key("x.b"), l.resource_key("x.a"));
        Image::encode(
            l,
            "run",
            None,
            [
                ImageEntry {
                    rank: None,
                    key: &k1,
                    version: &v1,
                    digest: "d1",
                    bytes: b"{\"one\":\n1}",
                    log: None,
                },
                ImageEntry {
                    rank: None,
                    key: &k2,
                    version: &v2,
                    digest: "d2",
                    bytes: b"",
                    log: None,
                },
            ],
        )
    }

    #[test]
    fn entries_round_trip_in_key_order_and_only_at_their_version() {
        let l = layout("e");
        let image = Image::decode(&l, sample(&l)).unwrap();
        let keys: Vec<&str> = image.keys().collect();
        assert_eq!(keys, [l.resource_key("x.a"), l.resource_key("x.b")]);
        let one = image
            .entry_at(&l.resource_key("x.b"), &Version::new("\"a\""))
            .unwrap();
        assert_eq!((one.bytes, one.digest), (&b"{\"one\":\n1}"[..], "d1"));
        assert!(
            image
                .entry_at(&l.resource_key("x.b"), &Version::new("\"z\""))
                .is_none()
        );
        assert!(
            image
                .entry_at(&l.resource_key("x.c"), &Version::new("\"a\""))
                .is_none()
        );
    }

    #[test]
    fn an_escaped_text_in_an_entry_head_reads_as_its_value() {
        let l = layout("e");
        // `\/` is `/` escaped: the head's parser unescapes it into a text of its own.
        let body = concat!(
            r#"{"key":"tofu-records\/e/r/x.a","version":{"token":"\"v\""},"digest":"d\u0031","log":"n","bytes":2}"#,
            "\n{}\n",
            r#"{"key":"tofu-records/e/r/x.b","version":{"token":"w"},"digest":"d2","bytes":0}"#,
            "\n\n"
        );
        let header = format!(
            "{{\"estate\":\"e\",\"run_id\":\"r\",\"written_at\":\"t\",\"entries\":2,\"body_crc32\":{}}}",
            crc32fast::hash(body.as_bytes())
        );
        let data = format!("{IMAGE_FORMAT}\n{header}\n{body}").into_bytes();
        let image = Image::decode(&l, data).unwrap();
        let a = image
            .entry_at(&l.resource_key("x.a"), &Version::new("\"v\""))
            .unwrap();
        assert_eq!(
            (a.key, a.digest, a.log, a.bytes),
            (l.resource_key("x.a").as_str(), "d1", Some("n"), &b"{}"[..])
        );
        let b = image.entry_of(&l.resource_key("x.b")).unwrap();
        assert_eq!((b.digest, b.log), ("d2", None));
        let keys: Vec<&str> = image.keys().collect();
        assert_eq!(keys, [l.resource_key("x.a"), l.resource_key("x.b")]);
    }

    #[test]
    fn damaged_truncated_and_foreign_images_are_refused() {
        let l = layout("e");
        let good = sample(&l);
        let mut flipped = good.clone();
        let last = flipped.len() - 3;
        flipped[last] ^= 1;
        assert!(matches!(
            Image::decode(&l, flipped),
            Err(ImageError::Checksum)
        ));
        assert!(Image::decode(&l, good[..good.len() - 5].to_vec()).is_err());
        assert!(matches!(
            Image::decode(&layout("other"), good.clone()),
            Err(ImageError::Foreign { .. })
        ));
        assert!(matches!(
            Image::decode(&l, b"{}".to_vec()),
            Err(ImageError::Format(_))
        ));
        assert!(Image::decode(&l, Vec::new()).is_err());
    }

    /// An image's text framed with a good checksum around `body`.
    fn text_of(body: &str, entries: usize) -> Vec<u8> {
        let header = format!(
            "{{\"estate\":\"e\",\"run_id\":\"r\",\"written_at\":\"t\",\"entries\":{entries},\"body_crc32\":{}}}",
            crc32fast::hash(body.as_bytes())
        );
        format!("{IMAGE_FORMAT}\n{header}\n{body}").into_bytes()
    }

    #[test]
    fn heads_that_misstate_their_length_are_refused_and_many_read_over_the_cores() {
        let l = layout("e");
        let entry = |name: &str, bytes: &str, head_tail: &str| {
            format!(
                r#"{{"key":"tofu-records/e/r/{name}","version":{{"token":"v"}},"digest":"d"{head_tail}}}"#
            ) + "\n"
                + bytes
                + "\n"
        };
        // The length is not the head's last field, or is not a number: not read as an image.
        for tail in [r#","bytes":2,"log":"n""#, r#","bytes":"2""#, ""] {
            let data = text_of(&entry("x.a", "{}", tail), 1);
            assert!(
                matches!(
                    Image::decode(&l, data),
                    Err(ImageError::Entry { index: 0, .. })
                ),
                "{tail}"
            );
        }
        // Two `bytes` fields that disagree: the one the entry was found by is not the head's.
        let data = text_of(&entry("x.a", "{}", r#","bytes":9,"bytes":2"#), 1);
        assert!(Image::decode(&l, data).is_err());
        // Enough entries to be read over the cores: the same as one by one, errors included.
        let names: Vec<String> = (0..3000).map(|i| format!("x.r{i:05}")).collect();
        let body: String = names
            .iter()
            .map(|n| entry(n, "{}", r#","bytes":2"#))
            .collect();
        let image = Image::decode(&l, text_of(&body, names.len())).unwrap();
        assert_eq!(image.len(), 3000);
        for n in &names {
            let e = image.entry_at(&l.resource_key(n), &Version::new("v"));
            assert_eq!(e.map(|e| e.bytes), Some(&b"{}"[..]), "{n}");
        }
        let mut swapped = names.clone();
        swapped.swap(2000, 2001);
        let body: String = swapped
            .iter()
            .map(|n| entry(n, "{}", r#","bytes":2"#))
            .collect();
        assert!(matches!(
            Image::decode(&l, text_of(&body, names.len())),
            Err(ImageError::Entry { index: 2001, .. })
        ));
        let mut foreign = body.clone();
        foreign.push_str(&entry("x", "{}", r#","bytes":2"#).replace("/r/x", "/p/x"));
        assert!(Image::decode(&l, text_of(&foreign, names.len() + 1)).is_err());
    }

    #[test]
    fn summaries_are_read_where_they_point_and_refused_where_no_text_lies() {
        let l = layout("e");
        let record = r#"{"kind":"resource","address":"x.a","resource":{"mode":"managed","type":"x","name":"a","provider":"provider[\"p\"]"},"instance":{"n":1},"writer":{"terraform_version":"1.2"}}"#;
        let summary = crate::engine::record::summary_of_final(record.as_bytes()).unwrap();
        let at = |t: &str| record.find(t).unwrap();
        let head = |res: &str| {
            format!(
                r#"{{"key":"tofu-records/e/r/x.a","version":{{"token":"v"}},"digest":"d","rank":[0,0,"",""],"res":{res},"bytes":{}}}"#,
                record.len()
            ) + "\n"
                + record
                + "\n"
        };
        let good = serde_json::to_string(&summary).unwrap();
        let image = Image::decode(&l, text_of(&head(&good), 1)).unwrap();
        let d = image.described(0).unwrap();
        assert_eq!(d.address, "x.a");
        assert_eq!(
            d.resource.provider, "provider[\"p\"]",
            "an escaped text is unescaped"
        );
        assert_eq!(
            (d.resource.module.as_deref(), d.terraform_version),
            (None, Some("1.2"))
        );
        assert_eq!(d.instance, br#"{"n":1}"#);
        // A text pointing at no string, past the record, or at another address; an instance
        // that is no object: the image is refused whole, by its entry.
        let with = |i: usize, span: [usize; 2]| {
            let mut spans = summary.0;
            spans[i] = span;
            spans
        };
        let bad = [
            with(2, [at("kind"), at("kind") + 2]),
            with(4, [record.len() - 1, record.len() + 8]),
            with(0, [at("managed"), at("managed") + 7]),
            with(8, [at("1}"), at("1}") + 2]),
            // From the instance's brace to the writer's: an object at each end, no JSON between.
            with(8, [at("{\"n\""), at("\"1.2\"}") + 6]),
            with(6, [at("p\\\""), at("p\\\"") + 3]),
        ];
        for spans in bad {
            let res = serde_json::to_string(&crate::engine::record::Summary(spans)).unwrap();
            assert!(
                matches!(
                    Image::decode(&l, text_of(&head(&res), 1)),
                    Err(ImageError::Entry { index: 0, .. })
                ),
                "{res}"
            );
        }
    }

    #[test]
    fn a_packed_image_reads_as_its_text_and_a_bad_block_is_refused() {
        let l = layout("e");
        let packed = sample(&l);
        assert!(packed.starts_with(format!("{STORED_FORMAT}\n").as_bytes()));
        let image = Image::decode(&l, packed.clone()).unwrap();
        let text = image.bytes().to_vec();
        assert!(text.starts_with(format!("{IMAGE_FORMAT}\n").as_bytes()));
        // The root's copy keeps the text, and an earlier writer packed it in one block: both read the same.
        for other in [text.clone(), pack::pack_v3(&text)] {
            let again = Image::decode(&l, other).unwrap();
            assert_eq!(
                again.keys().collect::<Vec<_>>(),
                image.keys().collect::<Vec<_>>()
            );
        }
        // A block that is no LZ4 block, behind a good checksum: refused by name, no panic.
        let junk = b"\xff\xff\xff\xff not lz4";
        let bad = framed(
            STORED_FORMAT_V3,
            &pack::Packed {
                text_bytes: 64,
                crc32: crc32fast::hash(junk),
            },
            junk,
        );
        assert!(
            matches!(Image::decode(&l, bad), Err(ImageError::Format(m)) if m.contains("decompress"))
        );
        // A length past any image is refused before anything is allocated for it.
        let block = lz4_flex::block::compress(&text);
        let huge = framed(
            STORED_FORMAT_V3,
            &pack::Packed {
                text_bytes: MAX_IMAGE_BYTES + 1,
                crc32: crc32fast::hash(&block),
            },
            &block,
        );
        assert!(
            matches!(Image::decode(&l, huge), Err(ImageError::Format(m)) if m.contains("larger"))
        );
    }

    /// The stored image of `n` resource records (keys in order), each holding `record`.
    fn alike(l: &Layout, n: usize, record: &[u8]) -> Vec<u8> {
        let keys: Vec<String> = (0..n)
            .map(|i| l.resource_key(&format!("x.r{i:02}")))
            .collect();
        let v = Version::new("\"v\"");
        let entries = keys.iter().map(|k| ImageEntry {
            rank: None,
            key: k,
            version: &v,
            digest: "d",
            bytes: record,
            log: None,
        });
        Image::encode(l, "run", None, entries)
    }

    /// `v4-lz4` bytes of `blocks` (each a text, packed as it is), under a packing line that
    /// states `text_bytes` and each block's lengths and checksum.
    fn blocks_of(blocks: &[&[u8]], text_bytes: usize) -> Vec<u8> {
        let packed: Vec<Vec<u8>> = blocks
            .iter()
            .map(|b| lz4_flex::block::compress(b))
            .collect();
        let line = serde_json::json!({
            "text_bytes": text_bytes,
            "blocks": blocks.iter().zip(&packed).map(|(b, p)| serde_json::json!({
                "text": b.len(), "packed": p.len(), "crc32": crc32fast::hash(p)
            })).collect::<Vec<_>>(),
        });
        let mut out = format!("{STORED_FORMAT}\n{line}\n").into_bytes();
        out.extend(packed.concat());
        out
    }

    #[test]
    fn an_image_past_a_block_is_packed_in_blocks_of_whole_entries_each_checked() {
        let l = layout("e");
        let record = vec![b'x'; 300_000];
        let stored = alike(&l, 10, &record);
        let image = Image::decode(&l, stored.clone()).unwrap();
        assert_eq!(image.len(), 10);
        assert!(image.entries().all(|e| e.bytes == record.as_slice()));
        // The head lines, then 3 MB of entries in blocks of at least 1 MiB: 4 entries, 4, 2.
        let (tag, at) = line(&stored, 0).unwrap();
        assert_eq!(tag, STORED_FORMAT.as_bytes());
        let (head, _) = line(&stored, at).unwrap();
        let packing: serde_json::Value = serde_json::from_slice(head).unwrap();
        assert_eq!(packing["blocks"].as_array().unwrap().len(), 4);
        // Its text in the same blocks reads as the same image.
        let text = image.bytes();
        let (_, body) = line(text, line(text, 0).unwrap().1).unwrap();
        let per = (text.len() - body) / 10;
        let at = |i: usize| body + per * i;
        let cut = [
            &text[..body],
            &text[body..at(4)],
            &text[at(4)..at(8)],
            &text[at(8)..],
        ];
        assert_eq!(
            Image::decode(&l, blocks_of(&cut, text.len()))
                .unwrap()
                .len(),
            10
        );
        // Each damage is refused by name, never a panic.
        let mut flipped = stored.clone();
        let last = flipped.len() - 3;
        flipped[last] ^= 1;
        assert!(matches!(
            Image::decode(&l, flipped),
            Err(ImageError::Checksum)
        ));
        let refused = |bytes: Vec<u8>, says: &str| match Image::decode(&l, bytes) {
            Err(ImageError::Format(m)) => assert!(m.contains(says), "{m}"),
            other => panic!("{:?}", other.map(|i| i.len())),
        };
        refused(stored[..stored.len() - 5].to_vec(), "add up");
        refused(blocks_of(&cut, text.len() + 1), "add up");
        // A block that ends inside an entry, and a first block that is not the head lines.
        let mid = at(4) + 7;
        refused(
            blocks_of(&[&text[..body], &text[body..mid], &text[mid..]], text.len()),
            "block 1",
        );
        refused(
            blocks_of(&[&text[..at(1)], &text[at(1)..]], text.len()),
            "first block",
        );
        refused(blocks_of(&[], 0), "no blocks");
        // A block that unpacks to less than it states.
        let (first, short) = (
            lz4_flex::block::compress(&text[..body]),
            lz4_flex::block::compress(&text[body..at(4)]),
        );
        let wrong = serde_json::json!({"text_bytes": at(4) + 1, "blocks": [
            {"text": body, "packed": first.len(), "crc32": crc32fast::hash(&first)},
            {"text": at(4) - body + 1, "packed": short.len(), "crc32": crc32fast::hash(&short)},
        ]});
        let mut lying = format!("{STORED_FORMAT}\n{wrong}\n").into_bytes();
        lying.extend(first);
        lying.extend(&short);
        refused(lying, "block 1");
    }

    #[test]
    fn an_image_read_as_it_arrives_is_the_image_read_whole_in_any_chunks() {
        let l = layout("e");
        let record = vec![b'y'; 150_000];
        let stored = alike(&l, 20, &record);
        let whole = Image::decode(&l, stored.clone()).unwrap();
        let text = whole.bytes().to_vec();
        // In blocks, in one block (an earlier writer's) and as its text, cut anywhere.
        for bytes in [stored.clone(), pack::pack_v3(&text), text.clone()] {
            for size in [1, 7, 64, 4096, 100_000, bytes.len()] {
                let mut chunks = bytes.chunks(size).map(|c| Ok::<_, String>(c.to_vec()));
                let image = Image::decode_streamed(&l, || chunks.next())
                    .unwrap()
                    .unwrap();
                assert_eq!(image.bytes(), whole.bytes());
                assert_eq!(
                    image.keys().collect::<Vec<_>>(),
                    whole.keys().collect::<Vec<_>>()
                );
            }
        }
        // The source's error, at any point, is the read's, never an image.
        for at in [0, 30, stored.len() / 2, stored.len() - 1] {
            let mut chunks = [Ok(stored[..at].to_vec()), Err("reset".to_string())].into_iter();
            assert_eq!(
                Image::decode_streamed(&l, || chunks.next()).map(|i| i.is_ok()),
                Err("reset".to_string())
            );
        }
        // A packing line that never ends is refused before it is all read.
        let mut sent = 0;
        let refused = Image::decode_streamed(&l, || {
            sent += 1;
            (sent < 1000).then(|| match sent {
                1 => Ok::<_, String>(format!("{STORED_FORMAT}\n{{").into_bytes()),
                _ => Ok(vec![b' '; 1 << 20]),
            })
        });
        assert!(
            matches!(&refused, Ok(Err(ImageError::Format(m))) if m.contains("no packing line")),
            "{:?}",
            refused.map(|r| r.map(|i| i.len()))
        );
        assert!(sent < 10, "{sent} chunks read");
        // Bytes after the last block, or too few, refuse the image.
        for bytes in [
            [stored.as_slice(), b"x"].concat(),
            stored[..stored.len() - 1].to_vec(),
        ] {
            let mut chunks = bytes.chunks(1000).map(|c| Ok::<_, String>(c.to_vec()));
            assert!(matches!(
                Image::decode_streamed(&l, || chunks.next()),
                Ok(Err(ImageError::Format(m))) if m.contains("add up")
            ));
        }
    }

    #[test]
    fn ranges_tile_each_segment_and_skip_marks_and_runs() {
        let l = layout("e");
        let keys: Vec<String> = (0..2500)
            .map(|i| l.resource_key(&format!("x.r{i:05}")))
            .chain([l.estate_key(), l.output_key("o")])
            .collect();
        let mut sorted = keys.clone();
        sorted.sort();
        let plans = plan_ranges(&l, sorted.iter().map(String::as_str), RangeStart::Server);
        assert_eq!(plans.len(), 1 + 3, "{plans:?}");
        let covering = |key: &str| {
            plans
                .iter()
                .filter(|p| key.starts_with(&p.prefix) && p.range.contains(key))
                .count()
        };
        let new = l.resource_key("x.r00999a");
        for key in keys
            .iter()
            .chain([&new, &l.resource_key("zzz"), &l.image_key()])
        {
            assert_eq!(covering(key), 1, "{key}");
        }
        for key in [l.pending_key("x.r1"), l.run_key("r")] {
            assert_eq!(covering(&key), 0, "{key}");
        }
        let plain = plan_ranges(&l, sorted.iter().map(String::as_str), RangeStart::Filtered);
        assert_eq!(
            plain.len(),
            2,
            "a kind that cannot start at a key lists each segment"
        );
        let few = plan_ranges(
            &l,
            sorted[..100].iter().map(String::as_str),
            RangeStart::Server,
        );
        assert_eq!(few.len(), 1, "what fits in one page is one listing");
        assert_eq!(
            (few[0].prefix.as_str(), &few[0].range),
            (
                l.prefix().as_str(),
                &KeyRange::new(None, Some(l.log_prefix()))
            )
        );
        assert!(!few[0].range.contains(&format!("{}0-x", l.log_prefix())));
    }

    #[test]
    fn the_bound_is_fifty_or_five_percent() {
        assert_eq!(refresh_bound(10), 50);
        assert_eq!(refresh_bound(1000), 50);
        assert_eq!(refresh_bound(10_000), 500);
    }
}
