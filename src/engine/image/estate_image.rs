//! The decoded estate image: entries in key order over the image's own text, found by key
//! and version, and read as it was stored (packed in blocks, or its text).

use std::borrow::Cow;
use std::time::{Duration, UNIX_EPOCH};

use super::entry::{Described, ImageEntry, LogMark};
use super::pack::{Unpacked, unpack, unpack_streamed};
use super::text::{
    ImageError, MAX_IMAGE_BYTES, Slot, Text, find_entries, head_lines, read_heads, text_of,
};
use crate::cut::{Mechanism, cut};
use crate::engine::layout::Layout;
use crate::engine::state::{InstanceRank, ResourceView};
use crate::store::Version;

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
