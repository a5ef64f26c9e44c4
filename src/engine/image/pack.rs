//! How an image's text is stored: in LZ4 blocks (`v4-lz4`), each unpacked and its entries'
//! heads read on a worker as its bytes arrive; one block (`v3-lz4`, an earlier writer's) is still read.
//!
//! `choudoufu-live/image/v4-lz4\n{"text_bytes":N,"blocks":[{"text":T,"packed":P,"crc32":C},…]}\n`
//! then each block's bytes in order. The first block is the text's two head lines (its format
//! and header), each later one whole entries of about [`BLOCK_TEXT`] bytes, so a block's entries
//! are found without its neighbours; `crc32` is over the block's packed bytes.

use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::text::{
    ImageError, MAX_IMAGE_BYTES, Slot, find_entries, framed, head_lines, line, read_heads_in,
};
use crate::engine::cores::over_cores;
use crate::engine::layout::Layout;

/// The format tag of a stored image: its text in LZ4 blocks.
pub const STORED_FORMAT: &str = "choudoufu-live/image/v4-lz4";
/// The format tag of an earlier writer's stored image: its text in one LZ4 block.
pub const STORED_FORMAT_V3: &str = "choudoufu-live/image/v3-lz4";
/// The text a block holds before it ends at its next entry's end.
const BLOCK_TEXT: usize = 1 << 20;
/// The longest a `v4-lz4` image's format and packing lines may be (a packing line names some
/// 60 bytes a block, a block per MiB of text).
const HEAD_LINES_BYTES: usize = 4 << 20;

/// The line before a `v3-lz4` image's block.
#[derive(Serialize, Deserialize)]
pub(super) struct Packed {
    /// The text's length.
    pub(super) text_bytes: usize,
    /// CRC-32 of the compressed block that follows.
    pub(super) crc32: u32,
}

/// The line before a `v4-lz4` image's blocks.
#[derive(Serialize, Deserialize)]
struct Blocks {
    /// The text's length.
    text_bytes: usize,
    /// Each block, in order.
    blocks: Vec<BlockHead>,
}

/// One block of a `v4-lz4` image.
#[derive(Serialize, Deserialize)]
struct BlockHead {
    /// Its text's length.
    text: usize,
    /// Its packed length.
    packed: usize,
    /// CRC-32 of its packed bytes.
    crc32: u32,
}

/// A stored image's text, as it came.
pub(super) enum Unpacked {
    /// Stored as it is (an older writer's, or the root's copy): its body's checksum is its check.
    Text(Vec<u8>),
    /// From one block (`v3-lz4`), checked by the block's checksum.
    Block(Vec<u8>),
    /// From blocks, each checked by its checksum and as UTF-8, with its entries' heads read:
    /// its head lines end at `body`.
    Blocks {
        /// The text.
        text: Vec<u8>,
        /// Where its first entry starts.
        body: usize,
        /// Its entries, in order.
        slots: Vec<Slot>,
    },
}

/// The text of a stored image (its blocks checked and unpacked), or `data` itself when it is
/// not packed.
pub(super) fn unpack(layout: &Layout, data: Vec<u8>) -> Result<Unpacked, ImageError> {
    let mut once = Some(data);
    match unpack_streamed(layout, || {
        once.take().map(Ok::<_, std::convert::Infallible>)
    }) {
        Ok(unpacked) => unpacked,
        Err(never) => match never {},
    }
}

/// The text of a stored image whose bytes `next` gives as they arrive (blocking for each), or
/// the source's error. A `v4-lz4` image's blocks are checked, unpacked into their place and
/// have their entries' heads read (as `layout`'s) on the machine's cores as each block
/// arrives, while later ones still do; any other stored form is gathered whole, then read.
pub(super) fn unpack_streamed<E>(
    layout: &Layout,
    mut next: impl FnMut() -> Option<Result<Vec<u8>, E>>,
) -> Result<Result<Unpacked, ImageError>, E> {
    let mut data = Vec::new();
    // Until the format line and the packing line are in (or the bytes are no v4 image).
    let (packing, first) = loop {
        match line(&data, 0) {
            Some((tag, at)) if tag == STORED_FORMAT.as_bytes() => {
                if let Some((head, first)) = line(&data, at) {
                    match packing_of(head) {
                        Ok(packing) => break (packing, first),
                        Err(e) => return Ok(Err(e)),
                    }
                }
            }
            Some(_) => return gather(data, next).map(|d| d.and_then(unpack_whole)),
            None if !STORED_FORMAT
                .as_bytes()
                .starts_with(&data[..data.len().min(STORED_FORMAT.len())]) =>
            {
                return gather(data, next).map(|d| d.and_then(unpack_whole));
            }
            None => {}
        }
        if data.len() > HEAD_LINES_BYTES {
            return Ok(Err(ImageError::Format(format!(
                "no packing line in its first {HEAD_LINES_BYTES} bytes"
            ))));
        }
        match next() {
            Some(chunk) => data.extend_from_slice(&chunk?),
            None => return Ok(unpack_whole(data)),
        }
    };
    let body = packing.blocks[0].text;
    let mut text = vec![0u8; packing.text_bytes];
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 8);
    let (jobs, rx) = std::sync::mpsc::channel::<Job<'_>>();
    let rx = Mutex::new(rx);
    let found = std::thread::scope(|scope| {
        let (jobs, rx) = (jobs, &rx);
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(move || {
                    let mut done = Vec::new();
                    // A worker takes the next block until none is left to come.
                    while let Some(job) = rx.lock().ok().and_then(|r| r.recv().ok()) {
                        done.push((job.index, unpack_block(layout, job)));
                    }
                    done
                })
            })
            .collect();
        let fed = feed(&packing, &mut text, data.split_off(first), &mut next, &jobs);
        drop(jobs);
        let mut done: Vec<(usize, Result<Vec<Slot>, ImageError>)> = Vec::new();
        for handle in handles {
            match handle.join() {
                Ok(part) => done.extend(part),
                Err(_) => {
                    return fed
                        .map(|_| Err(ImageError::Format("unpacking its blocks failed".into())));
                }
            }
        }
        fed.map(|fed| {
            fed?;
            done.sort_by_key(|(index, _)| *index);
            let found = done
                .iter()
                .map(|(_, part)| part.as_ref().map_or(0, Vec::len));
            let mut slots = Vec::with_capacity(found.sum());
            for (_, part) in done {
                slots.extend(part?);
            }
            Ok(slots)
        })
    })?;
    drop(rx);
    Ok(found.map(|slots| Unpacked::Blocks { text, body, slots }))
}

/// The packing line of a `v4-lz4` image, checked: a first block, texts that add up.
fn packing_of(head: &[u8]) -> Result<Blocks, ImageError> {
    let packing: Blocks = serde_json::from_slice(head)
        .map_err(|e| ImageError::Format(format!("unreadable packing line: {e}")))?;
    too_large(packing.text_bytes)?;
    let texts = packing
        .blocks
        .iter()
        .try_fold(0usize, |n, b| n.checked_add(b.text));
    if packing.blocks.is_empty() {
        return Err(ImageError::Format("it has no blocks".into()));
    }
    if texts != Some(packing.text_bytes)
        || packing.blocks.iter().any(|b| b.packed > MAX_IMAGE_BYTES)
    {
        return Err(not_adding_up());
    }
    Ok(packing)
}

/// Blocks whose lengths are not the text's, or not the bytes that came.
fn not_adding_up() -> ImageError {
    ImageError::Format("its blocks do not add up to its text and its bytes".into())
}

/// Hand each block of `packing` to the workers as its bytes are in (`pending` holds those
/// after the packing line, `next` gives the rest), each with its place in `text`.
fn feed<'t, E>(
    packing: &'t Blocks,
    text: &'t mut [u8],
    mut pending: Vec<u8>,
    next: &mut impl FnMut() -> Option<Result<Vec<u8>, E>>,
    jobs: &std::sync::mpsc::Sender<Job<'t>>,
) -> Result<Result<(), ImageError>, E> {
    // `pending[from..]` is what has come and is in no block yet.
    let (mut rest, mut at, mut from) = (text, 0, 0);
    for (index, head) in packing.blocks.iter().enumerate() {
        while pending.len() - from < head.packed {
            pending.drain(..from);
            from = 0;
            match next() {
                Some(chunk) => pending.extend_from_slice(&chunk?),
                None => return Ok(Err(not_adding_up())),
            }
        }
        let (out, tail) = std::mem::take(&mut rest).split_at_mut(head.text);
        let job = Job {
            index,
            head,
            packed: pending[from..from + head.packed].to_vec(),
            out,
            at,
        };
        from += head.packed;
        rest = tail;
        at += head.text;
        if jobs.send(job).is_err() {
            return Ok(Err(ImageError::Format(
                "unpacking its blocks failed".into(),
            )));
        }
    }
    // Nothing may follow the last block.
    if pending.len() > from {
        return Ok(Err(not_adding_up()));
    }
    while let Some(chunk) = next() {
        if !chunk?.is_empty() {
            return Ok(Err(not_adding_up()));
        }
    }
    Ok(Ok(()))
}

/// Every byte `next` still gives, after `data`.
fn gather<E>(
    mut data: Vec<u8>,
    mut next: impl FnMut() -> Option<Result<Vec<u8>, E>>,
) -> Result<Result<Vec<u8>, ImageError>, E> {
    while let Some(chunk) = next() {
        data.extend_from_slice(&chunk?);
        if data.len() > MAX_IMAGE_BYTES {
            return Ok(Err(ImageError::Format(format!(
                "more than {MAX_IMAGE_BYTES} bytes is larger than any image"
            ))));
        }
    }
    Ok(Ok(data))
}

/// A stored image that is not in blocks: one block (`v3-lz4`), or a text.
fn unpack_whole(data: Vec<u8>) -> Result<Unpacked, ImageError> {
    match line(&data, 0) {
        Some((tag, at)) if tag == STORED_FORMAT_V3.as_bytes() => {
            unpack_v3(&data, at).map(Unpacked::Block)
        }
        Some((tag, _)) if tag == STORED_FORMAT.as_bytes() => {
            Err(ImageError::Format("no packing line".into()))
        }
        _ => Ok(Unpacked::Text(data)),
    }
}

fn unpack_v3(data: &[u8], at: usize) -> Result<Vec<u8>, ImageError> {
    let (head, block) =
        line(data, at).ok_or_else(|| ImageError::Format("no packing line".into()))?;
    let packed: Packed = serde_json::from_slice(head)
        .map_err(|e| ImageError::Format(format!("unreadable packing line: {e}")))?;
    if crc32fast::hash(&data[block..]) != packed.crc32 {
        return Err(ImageError::Checksum);
    }
    too_large(packed.text_bytes)?;
    lz4_flex::block::decompress(&data[block..], packed.text_bytes)
        .map_err(|e| ImageError::Format(format!("its block does not decompress: {e}")))
}

fn too_large(text_bytes: usize) -> Result<(), ImageError> {
    if text_bytes > MAX_IMAGE_BYTES {
        return Err(ImageError::Format(format!(
            "{text_bytes} bytes is larger than any image"
        )));
    }
    Ok(())
}

/// One block to unpack: its packed bytes, where its text goes, and that text's place in the whole.
struct Job<'a> {
    index: usize,
    head: &'a BlockHead,
    packed: Vec<u8>,
    out: &'a mut [u8],
    at: usize,
}

/// Check and unpack one block, and read its entries' heads (the first, the head lines, has none).
fn unpack_block(layout: &Layout, job: Job<'_>) -> Result<Vec<Slot>, ImageError> {
    let Job {
        index,
        head,
        packed,
        out,
        at,
    } = job;
    if crc32fast::hash(&packed) != head.crc32 {
        return Err(ImageError::Checksum);
    }
    let n = lz4_flex::block::decompress_into(&packed, out)
        .map_err(|e| ImageError::Format(format!("its block {index} does not decompress: {e}")))?;
    if n != out.len() {
        return Err(ImageError::Format(format!(
            "its block {index} unpacks to {n} bytes, not {}",
            out.len()
        )));
    }
    if index == 0 {
        // Its estate is checked first, so another estate's image is refused as that.
        return head_lines(layout, out).map(|_| Vec::new());
    }
    let in_block = |e: ImageError| ImageError::Format(format!("its block {index}: {e}"));
    // Read in the block (its text checked here, while it is in cache), then placed in the whole.
    let spans = find_entries(out, 0).map_err(in_block)?;
    let text = std::str::from_utf8(out)
        .map_err(|e| in_block(ImageError::Format(format!("its text is not UTF-8: {e}"))))?;
    let slots = read_heads_in(layout, text, &spans, 0).map_err(in_block)?;
    Ok(slots.into_iter().map(|s| s.shifted(at)).collect())
}

/// The stored bytes of `text` (whose head lines end at `body`, each entry at one of `ends`):
/// the packing line and its blocks, packed over the machine's cores.
pub(super) fn pack(text: &[u8], body: usize, ends: &[usize]) -> Vec<u8> {
    let mut cuts = vec![0, body];
    for &end in ends {
        if end - cuts[cuts.len() - 1] >= BLOCK_TEXT {
            cuts.push(end);
        }
    }
    if cuts[cuts.len() - 1] < text.len() {
        cuts.push(text.len());
    }
    let ranges: Vec<(usize, usize)> = cuts.windows(2).map(|w| (w[0], w[1])).collect();
    let compress = |chunk: &[(usize, usize)]| -> Vec<Vec<u8>> {
        chunk
            .iter()
            .map(|&(from, to)| lz4_flex::block::compress(&text[from..to]))
            .collect()
    };
    let packed: Vec<Vec<u8>> = over_cores(&ranges, 4, |_, chunk| compress(chunk))
        .into_iter()
        // A chunk whose thread panicked is packed here.
        .flat_map(|part| part.unwrap_or_else(compress))
        .collect();
    let blocks = Blocks {
        text_bytes: text.len(),
        blocks: ranges
            .iter()
            .zip(&packed)
            .map(|(&(from, to), p)| BlockHead {
                text: to - from,
                packed: p.len(),
                crc32: crc32fast::hash(p),
            })
            .collect(),
    };
    let mut out = framed(STORED_FORMAT, &blocks, &[]);
    out.reserve_exact(packed.iter().map(Vec::len).sum());
    for block in &packed {
        out.extend_from_slice(block);
    }
    out
}

/// The stored bytes of `text` as an earlier writer packed it (`v3-lz4`, one block).
#[cfg(test)]
pub(super) fn pack_v3(text: &[u8]) -> Vec<u8> {
    let block = lz4_flex::block::compress(text);
    let packed = Packed {
        text_bytes: text.len(),
        crc32: crc32fast::hash(&block),
    };
    framed(STORED_FORMAT_V3, &packed, &block)
}
