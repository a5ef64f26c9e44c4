//! Writing an image: its text (entries in key order, each head with the record's summary),
//! then packed for the store.

use std::time::UNIX_EPOCH;

use super::entry::{ImageEntry, LogMark};
use super::estate_image::Image;
use super::head::EntryHead;
use super::pack::pack;
use super::text::{Header, IMAGE_FORMAT, framed};
use crate::cut::{Mechanism, cut};
use crate::engine::layout::{KeyKind, Layout};
use crate::engine::record::summary_of_final;

/// An image's text, where its entries start, and where each ends (after its newline).
struct Written {
    text: Vec<u8>,
    body: usize,
    ends: Vec<usize>,
}

impl Image {
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
}
