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
//! record's head, is its summary ([`Summary`]): where its texts and instance lie in its bytes,
//! so a read serves it without decoding it. An image of another
//! format (v1 held SHA-256 and record bytes as stored) is ignored with a warning.
//!
//! Stored (`choudoufu-live/image/v3-lz4`), the same text is LZ4-compressed behind a line of its
//! own: `choudoufu-live/image/v3-lz4\n{"text_bytes":N,"crc32":C}\n<LZ4 block>`, `crc32` over the
//! block (which covers the text, so a packed text's `body_crc32` is not checked again). The
//! root's copy keeps the text itself; a stored text (an older writer's) still reads. Entry
//! heads are read by `head.rs`.

use std::borrow::Cow;
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::cut::{Mechanism, cut};
use crate::engine::cores::over_cores;
use crate::engine::digest::sha256_hex;
use crate::engine::layout::{KeyKind, Layout};
use crate::engine::read_cache::ReadCache;
use crate::engine::record::{Summary, resource_belongs_at, summary_of_final};
use crate::engine::state::{InstanceRank, ResourceView};
use crate::store::private_file::{self, Durability};
use crate::store::{KeyRange, RangeStart, Version};
use head::{EntryHead, read_head};

mod head;

/// The format tag on an image's first line.
pub const IMAGE_FORMAT: &str = "choudoufu-live/image/v2";
/// The format tag of a stored image: its text, LZ4-compressed.
pub const STORED_FORMAT: &str = "choudoufu-live/image/v3-lz4";
/// Largest image this program reads.
pub const MAX_IMAGE_BYTES: usize = 1024 * 1024 * 1024;
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

/// Why an image was not used (it is then ignored, with a warning).
#[derive(Debug, Error)]
pub enum ImageError {
    /// Not an image of this format.
    #[error("not an estate image of format {IMAGE_FORMAT}: {0}")]
    Format(String),
    /// An image of another estate.
    #[error("the image is estate {found:?}'s, not {expected:?}'s")]
    Foreign {
        /// The estate it names.
        found: String,
        /// The estate it lies under.
        expected: String,
    },
    /// The body does not match its checksum: truncated or damaged.
    #[error("the image's checksum does not match its body (truncated or damaged)")]
    Checksum,
    /// An entry that cannot be read or does not belong in this estate's image.
    #[error("entry {index}: {reason}")]
    Entry {
        /// Its position.
        index: usize,
        /// What is wrong.
        reason: String,
    },
}

/// The line before a stored image's compressed text.
#[derive(Serialize, Deserialize)]
struct Packed {
    /// The text's length.
    text_bytes: usize,
    /// CRC-32 of the compressed block that follows.
    crc32: u32,
}

#[derive(Serialize, Deserialize)]
struct Header {
    estate: String,
    run_id: String,
    written_at: String,
    entries: usize,
    body_crc32: u32,
    /// The watermark, in nanoseconds since 1970 (none: an older writer's image).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    log_from: Option<u64>,
    /// The write log entries whose writes may still land.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pending: Vec<String>,
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

/// A text of an entry's head: where it lies in the image's bytes, or, when the head escaped it, its own.
#[derive(Clone, Debug)]
enum Text {
    /// `data[start..end]` (the head's parser read it there as a string: on char boundaries).
    At { start: usize, end: usize },
    /// Unescaped (from a head, or a record's escaped string), shared by the slots that hold the same.
    Own(Arc<str>),
}

impl Text {
    /// `text`, as a place in `data` when it lies there.
    fn of(text: Cow<'_, str>, data: &str) -> Text {
        match text {
            Cow::Borrowed(b) => {
                let start = (b.as_ptr() as usize).wrapping_sub(data.as_ptr() as usize);
                let end = start.saturating_add(b.len());
                match data.get(start..end) {
                    Some(there) if there.as_ptr() == b.as_ptr() => Text::At { start, end },
                    _ => Text::Own(Arc::from(b)),
                }
            }
            Cow::Owned(o) => Text::Own(Arc::from(o)),
        }
    }

    /// The text, read from `data` (the bytes it was found in).
    fn get<'a>(&'a self, data: &'a str) -> &'a str {
        match self {
            // The image's text was checked as UTF-8 once, when it was decoded.
            Text::At { start, end } => data.get(*start..*end).unwrap_or_default(),
            Text::Own(own) => own,
        }
    }

    /// Its bytes, for ordering (byte order is a string's order).
    fn bytes<'a>(&'a self, data: &'a str) -> &'a [u8] {
        match self {
            Text::At { start, end } => data.as_bytes().get(*start..*end).unwrap_or_default(),
            Text::Own(own) => own.as_bytes(),
        }
    }
}

/// One entry of a decoded image: its head's values (texts in the image's bytes) and where its record lies.
#[derive(Clone, Debug)]
struct Slot {
    key: Text,
    version: Version,
    digest: Text,
    rank: Option<InstanceRank>,
    log: Option<Text>,
    res: Option<SlotSummary>,
    start: usize,
    end: usize,
}

/// A resource record's [`Summary`] as a slot keeps it: texts in the image's bytes, and where its instance lies there.
#[derive(Clone, Debug)]
struct SlotSummary {
    address: Text,
    module: Option<Text>,
    mode: Text,
    type_name: Text,
    name: Text,
    each: Option<Text>,
    provider: Text,
    terraform_version: Option<Text>,
    instance: std::ops::Range<usize>,
}

impl SlotSummary {
    /// `summary` of the record at `start..end` of `data`: each text inside the record between
    /// quotes with no escape in it, the instance an object inside the record, the address one
    /// that belongs at `key`.
    fn of(
        summary: Summary,
        last: &mut Option<(std::ops::Range<usize>, Arc<str>)>,
        data: &str,
        (start, end): (usize, usize),
        key: &str,
        layout: &Layout,
    ) -> Result<SlotSummary, String> {
        let bytes = data.as_bytes();
        // `[from, to)` of the record, as a range of `data`, when it lies inside the record.
        let place = |[from, to]: [usize; 2]| -> Option<std::ops::Range<usize>> {
            let range = start.checked_add(from)?..start.checked_add(to)?;
            (from <= to && range.end <= end).then_some(range)
        };
        // A text at `span` (`[0, 0]`: none, where `optional`).
        let mut text = |span: [usize; 2], optional: bool| -> Result<Option<Text>, String> {
            if optional && span == [0, 0] {
                return Ok(None);
            }
            let range = place(span).ok_or("its summary places a text outside its record")?;
            let quoted = range.start > start
                && range.end < end
                && bytes[range.start - 1] == b'"'
                && bytes[range.end] == b'"';
            let nowhere = || String::from("its summary places a text where no string lies");
            if !quoted {
                return Err(nowhere());
            }
            let plain = bytes[range.clone()]
                .iter()
                .all(|&b| b != b'"' && b != b'\\' && b >= 0x20);
            match data.get(range.clone()) {
                Some(_) if plain => Ok(Some(Text::At {
                    start: range.start,
                    end: range.end,
                })),
                // Escaped (a provider address is, with its quotes): the string, read once for
                // the records in a row that hold the same.
                Some(raw) => {
                    if let Some((at, text)) = last.as_ref()
                        && data.get(at.clone()) == Some(raw)
                    {
                        return Ok(Some(Text::Own(Arc::clone(text))));
                    }
                    let text: Arc<str> =
                        serde_json::from_str::<String>(&data[range.start - 1..range.end + 1])
                            .map_err(|_| nowhere())?
                            .into();
                    *last = Some((range, Arc::clone(&text)));
                    Ok(Some(Text::Own(text)))
                }
                None => Err(nowhere()),
            }
        };
        let [
            address,
            module,
            mode,
            type_name,
            name,
            each,
            provider,
            version,
            instance,
        ] = summary.0;
        let instance = place(instance)
            .filter(|r| r.start < r.end && bytes[r.start] == b'{' && bytes[r.end - 1] == b'}')
            .ok_or("its summary places the instance outside its record")?;
        // Served as it is, so it must be JSON (as a decoded record's instance is checked to be).
        data.get(instance.clone())
            .and_then(|text| serde_json::from_str::<serde::de::IgnoredAny>(text).ok())
            .ok_or("its summary's instance is not JSON")?;
        let missing = || String::from("its summary lacks a text every resource has");
        let mut needed = |span| text(span, false)?.ok_or_else(missing);
        let address = needed(address)?;
        let named = address.get(data);
        if !resource_belongs_at(named, key, layout) {
            return Err(format!(
                "its summary names {named:?}, which does not belong at its key"
            ));
        }
        let (mode, type_name, name, provider) = (
            needed(mode)?,
            needed(type_name)?,
            needed(name)?,
            needed(provider)?,
        );
        Ok(SlotSummary {
            address,
            mode,
            type_name,
            name,
            provider,
            module: text(module, true)?,
            each: text(each, true)?,
            terraform_version: text(version, true)?,
            instance,
        })
    }
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

fn line(data: &[u8], from: usize) -> Option<(&[u8], usize)> {
    let rest = data.get(from..)?;
    let n = memchr::memchr(b'\n', rest)?;
    Some((&rest[..n], from + n + 1))
}

/// An image's text, and whether it came packed (its block's checksum then covered it).
struct Unpacked {
    text: Vec<u8>,
    packed: bool,
}

/// The text of a stored image (its compressed block checked and unpacked), or `data` itself
/// when it is not packed (an older writer's image, or the root's copy).
fn unpack(data: Vec<u8>) -> Result<Unpacked, ImageError> {
    let Some(rest) = data
        .strip_prefix(STORED_FORMAT.as_bytes())
        .and_then(|r| r.strip_prefix(b"\n"))
    else {
        return Ok(Unpacked {
            text: data,
            packed: false,
        });
    };
    let at = data.len() - rest.len();
    let (head, block) =
        line(&data, at).ok_or_else(|| ImageError::Format("no packing line".into()))?;
    let packed: Packed = serde_json::from_slice(head)
        .map_err(|e| ImageError::Format(format!("unreadable packing line: {e}")))?;
    if crc32fast::hash(&data[block..]) != packed.crc32 {
        return Err(ImageError::Checksum);
    }
    if packed.text_bytes > MAX_IMAGE_BYTES {
        return Err(ImageError::Format(format!(
            "{} bytes is larger than any image",
            packed.text_bytes
        )));
    }
    let text = lz4_flex::block::decompress(&data[block..], packed.text_bytes)
        .map_err(|e| ImageError::Format(format!("its block does not decompress: {e}")))?;
    Ok(Unpacked { text, packed: true })
}

/// A stored image of `text`: the packing line and its LZ4 block.
fn pack(text: &[u8]) -> Vec<u8> {
    let block = lz4_flex::block::compress(text);
    let packed = Packed {
        text_bytes: text.len(),
        crc32: crc32fast::hash(&block),
    };
    framed(STORED_FORMAT, &packed, &block)
}

/// `tag`'s line, `head` as a JSON line, then `body`: the frame of an image's text and of its packing.
fn framed(tag: &str, head: &impl Serialize, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 256);
    out.extend_from_slice(tag.as_bytes());
    out.push(b'\n');
    // Numbers and strings (Packed, Header): serialising cannot fail.
    let _ = serde_json::to_writer(&mut out, head);
    out.push(b'\n');
    out.extend_from_slice(body);
    out
}

/// Where one entry lies in an image's text: its head line and its record.
struct Span {
    head: std::ops::Range<usize>,
    start: usize,
    end: usize,
}

/// The record length a head line ends with (`..."bytes":N}`, the field written last).
fn tail_length(head: &[u8]) -> Option<usize> {
    let rest = head.strip_suffix(b"}")?;
    let colon = rest.iter().rposition(|&b| b == b':')?;
    rest[..colon].strip_suffix(b"\"bytes\"")?;
    let digits = &rest[colon + 1..];
    if digits.is_empty() || digits.len() > 12 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// Read the heads of `spans` (split over the machine's cores when there are many), each a
/// state record of `layout`'s estate whose length is the one its span was found by.
fn read_heads(layout: &Layout, data: &str, spans: &[Span]) -> Result<Vec<Slot>, ImageError> {
    let read = |first: usize, chunk: &[Span]| -> Result<Vec<Slot>, ImageError> {
        let mut last = None;
        // Sized first: a slot is some 350 bytes, and a growing vector copies them all again.
        let mut slots = Vec::with_capacity(chunk.len());
        for (i, span) in chunk.iter().enumerate() {
            let bad = |reason: String| ImageError::Entry {
                index: first + i,
                reason,
            };
            // A head lies between two newlines: its range is on char boundaries.
            let head = read_head(data.get(span.head.clone()).unwrap_or_default())
                .map_err(|e| bad(format!("unreadable: {e}")))?;
            if head.bytes != span.end - span.start {
                return Err(bad("its head names two lengths".into()));
            }
            let kind = layout.classify(&head.key);
            match kind {
                Some(KeyKind::Estate | KeyKind::Resource | KeyKind::Output) => {}
                _ => {
                    return Err(bad(format!(
                        "{} is no state record of this estate",
                        head.key
                    )));
                }
            }
            let res = match (head.res, &head.rank) {
                (None, _) => None,
                (Some(summary), Some(_)) if kind == Some(KeyKind::Resource) => Some(
                    SlotSummary::of(
                        summary,
                        &mut last,
                        data,
                        (span.start, span.end),
                        &head.key,
                        layout,
                    )
                    .map_err(bad)?,
                ),
                (Some(_), _) => {
                    return Err(bad(
                        "it summarises a record that is no resource instance with a rank".into(),
                    ));
                }
            };
            slots.push(Slot {
                res,
                key: Text::of(head.key, data),
                version: head.version,
                digest: Text::of(head.digest, data),
                rank: head.rank,
                log: head.log.map(|l| Text::of(l, data)),
                start: span.start,
                end: span.end,
            });
        }
        Ok(slots)
    };
    let mut slots: Vec<Slot> = Vec::new();
    for part in over_cores(spans, 1024, read) {
        let part =
            part.map_err(|_| ImageError::Format("reading its entry heads failed".into()))??;
        if slots.is_empty() {
            // The first part's vector is kept: only the later parts are copied.
            slots = part;
            slots.reserve(spans.len().saturating_sub(slots.len()));
        } else {
            slots.extend(part);
        }
    }
    Ok(slots)
}

impl Image {
    /// Read an image of `layout`'s estate (stored packed, or its text), checking its format,
    /// estate, checksum and every entry's key.
    pub fn decode(layout: &Layout, data: Vec<u8>) -> Result<Image, ImageError> {
        let Unpacked { text: data, packed } = unpack(data)?;
        if data.len() > MAX_IMAGE_BYTES {
            return Err(ImageError::Format(format!(
                "{} bytes is larger than any image",
                data.len()
            )));
        }
        let (tag, at) =
            line(&data, 0).ok_or_else(|| ImageError::Format("no format line".into()))?;
        if tag != IMAGE_FORMAT.as_bytes() {
            return Err(ImageError::Format(format!(
                "its first line is {:?}",
                String::from_utf8_lossy(&tag[..tag.len().min(64)])
            )));
        }
        let (head, body) = line(&data, at).ok_or_else(|| ImageError::Format("no header".into()))?;
        let header: Header = serde_json::from_slice(head)
            .map_err(|e| ImageError::Format(format!("unreadable header: {e}")))?;
        if header.estate != layout.estate().as_str() {
            return Err(ImageError::Foreign {
                found: header.estate,
                expected: layout.estate().to_string(),
            });
        }
        // A packed text was checked whole as its block: its body needs no second checksum.
        if !packed && crc32fast::hash(&data[body..]) != header.body_crc32 {
            return Err(ImageError::Checksum);
        }
        // Find every entry first (a head ends with its record's length), then read the heads
        // over the machine's cores, then check the order.
        let mut spans: Vec<Span> = Vec::with_capacity(header.entries.min(1 << 20));
        let mut at = body;
        while at < data.len() {
            let index = spans.len();
            let bad = |reason: String| ImageError::Entry { index, reason };
            let (head, start) = line(&data, at).ok_or_else(|| bad("no entry line".into()))?;
            let bytes = tail_length(head)
                .ok_or_else(|| bad("its head does not end with its record's length".into()))?;
            let end = start
                .checked_add(bytes)
                .filter(|&end| end < data.len() && data[end] == b'\n')
                .ok_or_else(|| bad(format!("its {bytes} bytes run past the image")))?;
            spans.push(Span {
                head: at..start - 1,
                start,
                end,
            });
            at = end + 1;
        }
        // Checked once here, so the heads parse as text and their strings are read in place.
        let data = String::from_utf8(data)
            .map_err(|e| ImageError::Format(format!("its text is not UTF-8: {e}")))?;
        let slots = read_heads(layout, &data, &spans)?;
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
        if cut(Mechanism::ImagePack) {
            return Self::encode_text(layout, run_id, log, entries);
        }
        pack(&Self::encode_text(layout, run_id, log, entries))
    }

    /// The text of an image of `entries` (in any order), written by `run_id`, with its write log mark.
    fn encode_text<'a>(
        layout: &Layout,
        run_id: &str,
        log: Option<&LogMark>,
        entries: impl IntoIterator<Item = ImageEntry<'a>>,
    ) -> Vec<u8> {
        let mut entries: Vec<ImageEntry<'a>> = entries.into_iter().collect();
        entries.sort_by(|a, b| a.key.cmp(b.key));
        entries.dedup_by(|a, b| a.key == b.key);
        let mut body = Vec::with_capacity(entries.iter().map(|e| e.bytes.len() + 160).sum());
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
        framed(IMAGE_FORMAT, &header, &body)
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
    let written = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
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
        // The root's copy keeps the text: it reads the same.
        let again = Image::decode(&l, text.clone()).unwrap();
        assert_eq!(
            again.keys().collect::<Vec<_>>(),
            image.keys().collect::<Vec<_>>()
        );
        // A block that is no LZ4 block, behind a good checksum: refused by name, no panic.
        let junk = b"\xff\xff\xff\xff not lz4";
        let bad = framed(
            STORED_FORMAT,
            &Packed {
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
            STORED_FORMAT,
            &Packed {
                text_bytes: MAX_IMAGE_BYTES + 1,
                crc32: crc32fast::hash(&block),
            },
            &block,
        );
        assert!(
            matches!(Image::decode(&l, huge), Err(ImageError::Format(m)) if m.contains("larger"))
        );
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
