//! An image's text: its two head lines (format and header), its entries found by the length
//! each head ends with, and each entry's head read into a slot over the text's own bytes.

use std::borrow::Cow;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::head::read_head;
use crate::engine::cores::over_cores;
use crate::engine::layout::{KeyKind, Layout};
use crate::engine::record::{Summary, resource_belongs_at};
use crate::engine::state::InstanceRank;
use crate::store::Version;

/// The format tag on an image's first line.
pub const IMAGE_FORMAT: &str = "choudoufu-live/image/v2";
/// Largest image this program reads.
pub const MAX_IMAGE_BYTES: usize = 1024 * 1024 * 1024;

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

/// An image's header line.
#[derive(Serialize, Deserialize)]
pub(super) struct Header {
    pub(super) estate: String,
    pub(super) run_id: String,
    pub(super) written_at: String,
    pub(super) entries: usize,
    pub(super) body_crc32: u32,
    /// The watermark, in nanoseconds since 1970 (none: an older writer's image).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) log_from: Option<u64>,
    /// The write log entries whose writes may still land.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) pending: Vec<String>,
}

/// A text of an entry's head: where it lies in the image's bytes, or, when the head escaped it, its own.
#[derive(Clone, Debug)]
pub(super) enum Text {
    /// `data[start..end]` (the head's parser read it there as a string: on char boundaries).
    At { start: usize, end: usize },
    /// Unescaped (from a head, or a record's escaped string), shared by the slots that hold the same.
    Own(Arc<str>),
}

impl Text {
    /// `text`, as a place in `data` when it lies there.
    pub(super) fn of(text: Cow<'_, str>, data: &str) -> Text {
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
    pub(super) fn get<'a>(&'a self, data: &'a str) -> &'a str {
        match self {
            // The image's text was checked as UTF-8 once, when it was decoded.
            Text::At { start, end } => data.get(*start..*end).unwrap_or_default(),
            Text::Own(own) => own,
        }
    }

    /// The same text, `by` bytes further on.
    pub(super) fn shift(&mut self, by: usize) {
        if let Text::At { start, end } = self {
            *start += by;
            *end += by;
        }
    }

    /// Its bytes, for ordering (byte order is a string's order).
    pub(super) fn bytes<'a>(&'a self, data: &'a str) -> &'a [u8] {
        match self {
            Text::At { start, end } => data.as_bytes().get(*start..*end).unwrap_or_default(),
            Text::Own(own) => own.as_bytes(),
        }
    }
}

/// One entry of a decoded image: its head's values (texts in the image's bytes) and where its record lies.
#[derive(Clone, Debug)]
pub(super) struct Slot {
    pub(super) key: Text,
    pub(super) version: Version,
    pub(super) digest: Text,
    pub(super) rank: Option<InstanceRank>,
    pub(super) log: Option<Text>,
    pub(super) res: Option<SlotSummary>,
    pub(super) start: usize,
    pub(super) end: usize,
}

impl Slot {
    /// The same slot, of a text `by` bytes further on (a block's slot, placed in the whole).
    pub(super) fn shifted(mut self, by: usize) -> Slot {
        for text in [&mut self.key, &mut self.digest]
            .into_iter()
            .chain(self.log.as_mut())
        {
            text.shift(by);
        }
        if let Some(res) = self.res.as_mut() {
            res.shift(by);
        }
        self.start += by;
        self.end += by;
        self
    }
}

/// A resource record's [`Summary`] as a slot keeps it: texts in the image's bytes, and where its instance lies there.
#[derive(Clone, Debug)]
pub(super) struct SlotSummary {
    pub(super) address: Text,
    pub(super) module: Option<Text>,
    pub(super) mode: Text,
    pub(super) type_name: Text,
    pub(super) name: Text,
    pub(super) each: Option<Text>,
    pub(super) provider: Text,
    pub(super) terraform_version: Option<Text>,
    pub(super) instance: std::ops::Range<usize>,
}

impl SlotSummary {
    /// Its texts and instance, `by` bytes further on.
    pub(super) fn shift(&mut self, by: usize) {
        for text in [
            &mut self.address,
            &mut self.mode,
            &mut self.type_name,
            &mut self.name,
            &mut self.provider,
        ]
        .into_iter()
        .chain(self.module.as_mut())
        .chain(self.each.as_mut())
        .chain(self.terraform_version.as_mut())
        {
            text.shift(by);
        }
        self.instance = self.instance.start + by..self.instance.end + by;
    }

    /// `summary` of the record at `start..end` of `data`: each text inside the record between
    /// quotes with no escape in it, the instance an object inside the record, the address one
    /// that belongs at `key`.
    pub(super) fn of(
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

pub(super) fn line(data: &[u8], from: usize) -> Option<(&[u8], usize)> {
    let rest = data.get(from..)?;
    let n = memchr::memchr(b'\n', rest)?;
    Some((&rest[..n], from + n + 1))
}

/// `tag`'s line, `head` as a JSON line, then `body`: the frame of an image's text and of its packing.
pub(super) fn framed(tag: &str, head: &impl Serialize, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 256);
    out.extend_from_slice(tag.as_bytes());
    out.push(b'\n');
    // Numbers and strings (a packing line, Header): serialising cannot fail.
    let _ = serde_json::to_writer(&mut out, head);
    out.push(b'\n');
    out.extend_from_slice(body);
    out
}

/// Where one entry lies in an image's text: its head line and its record.
pub(super) struct Span {
    pub(super) head: std::ops::Range<usize>,
    pub(super) start: usize,
    pub(super) end: usize,
}

/// The header of an image's text, read from its two head lines and checked to be of
/// `layout`'s estate, and where those lines end.
pub(super) fn head_lines(layout: &Layout, data: &[u8]) -> Result<(Header, usize), ImageError> {
    let (tag, at) = line(data, 0).ok_or_else(|| ImageError::Format("no format line".into()))?;
    if tag != IMAGE_FORMAT.as_bytes() {
        return Err(ImageError::Format(format!(
            "its first line is {:?}",
            String::from_utf8_lossy(&tag[..tag.len().min(64)])
        )));
    }
    let (head, body) = line(data, at).ok_or_else(|| ImageError::Format("no header".into()))?;
    let header: Header = serde_json::from_slice(head)
        .map_err(|e| ImageError::Format(format!("unreadable header: {e}")))?;
    if header.estate != layout.estate().as_str() {
        return Err(ImageError::Foreign {
            found: header.estate,
            expected: layout.estate().to_string(),
        });
    }
    Ok((header, body))
}

/// An image's text, checked as UTF-8 once, so its heads parse as text and their strings are read in place.
pub(super) fn text_of(data: Vec<u8>) -> Result<String, ImageError> {
    String::from_utf8(data).map_err(|e| ImageError::Format(format!("its text is not UTF-8: {e}")))
}

/// The entries of `text` (whole entries, from its start to its end), each placed `base` further on.
pub(super) fn find_entries(text: &[u8], base: usize) -> Result<Vec<Span>, ImageError> {
    // An entry is some 1,000 bytes of text, its head a third of it.
    let mut spans: Vec<Span> = Vec::with_capacity(text.len() / 512);
    let mut at = 0;
    while at < text.len() {
        let index = spans.len();
        let bad = |reason: String| ImageError::Entry { index, reason };
        let (head, start) = line(text, at).ok_or_else(|| bad("no entry line".into()))?;
        let bytes = tail_length(head)
            .ok_or_else(|| bad("its head does not end with its record's length".into()))?;
        let end = start
            .checked_add(bytes)
            .filter(|&end| end < text.len() && text[end] == b'\n')
            .ok_or_else(|| bad(format!("its {bytes} bytes run past the image")))?;
        spans.push(Span {
            head: base + at..base + start - 1,
            start: base + start,
            end: base + end,
        });
        at = end + 1;
    }
    Ok(spans)
}

/// The record length a head line ends with (`..."bytes":N}`, the field written last).
pub(super) fn tail_length(head: &[u8]) -> Option<usize> {
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
pub(super) fn read_heads(
    layout: &Layout,
    data: &str,
    spans: &[Span],
) -> Result<Vec<Slot>, ImageError> {
    let mut slots: Vec<Slot> = Vec::new();
    for part in over_cores(spans, 1024, |first, chunk| {
        read_heads_in(layout, data, chunk, first)
    }) {
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

/// Read the heads of `spans` (of `data`, the first being entry `first`), here.
pub(super) fn read_heads_in(
    layout: &Layout,
    data: &str,
    chunk: &[Span],
    first: usize,
) -> Result<Vec<Slot>, ImageError> {
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
}
