//! The estate image decoder: any bytes read as an image give an image or a named error, never a
//! panic, and an image that decodes always assembles into a document that parses as JSON.
//! The input is tried as a whole image, as the body of one framed with a valid checksum (so the
//! fuzzer reaches the entries behind the CRC), as the LZ4 block of an earlier writer's packed
//! image framed with a valid checksum (so it reaches the decompressor), and as the entries'
//! block of a packed image in blocks behind a valid head block (so it reaches the entries found
//! in a block).
#![no_main]
use choudoufu_live::engine::image::{IMAGE_FORMAT, Image, STORED_FORMAT, STORED_FORMAT_V3};
use choudoufu_live::engine::layout::{EstateName, Layout};
use choudoufu_live::engine::session::{document, header_of, snapshot_of_image};
use libfuzzer_sys::fuzz_target;

fn assemble(layout: &Layout, bytes: Vec<u8>) {
    let Ok(image) = Image::decode(layout, bytes) else {
        return;
    };
    let image = std::sync::Arc::new(image);
    let Ok(snapshot) = snapshot_of_image(layout, &image) else {
        return;
    };
    let header = header_of(layout, &snapshot, None);
    let doc = document(&header, snapshot.records.values().filter_map(|e| e.part()));
    if let Err(e) = serde_json::from_slice::<serde_json::Value>(&doc) {
        panic!("an image that decoded assembled a document that is not JSON: {e}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(estate) = EstateName::parse("fuzz") else {
        return;
    };
    let layout = Layout::new(estate);
    assemble(&layout, data.to_vec());
    let mut packed = format!(
        "{STORED_FORMAT_V3}\n{{\"text_bytes\":{},\"crc32\":{}}}\n",
        data.len().saturating_mul(8),
        crc32fast::hash(data)
    )
    .into_bytes();
    packed.extend_from_slice(data);
    assemble(&layout, packed);
    let Some((&entries, body)) = data.split_first() else {
        return;
    };
    // The head lines as an LZ4 block of literals only, then the input as the entries' block.
    let head = format!(
        "{IMAGE_FORMAT}\n{{\"estate\":\"fuzz\",\"run_id\":\"f\",\"written_at\":\"2026-01-01T00:00:00Z\",\"entries\":{entries},\"body_crc32\":0}}\n"
    );
    let mut head_block = vec![0xf0];
    let mut rest = head.len() - 15;
    while rest >= 255 {
        head_block.push(255);
        rest -= 255;
    }
    head_block.push(rest as u8);
    head_block.extend_from_slice(head.as_bytes());
    let mut blocks = format!(
        "{STORED_FORMAT}\n{{\"text_bytes\":{},\"blocks\":[{{\"text\":{},\"packed\":{},\"crc32\":{}}},{{\"text\":{},\"packed\":{},\"crc32\":{}}}]}}\n",
        head.len() + body.len().saturating_mul(4),
        head.len(),
        head_block.len(),
        crc32fast::hash(&head_block),
        body.len().saturating_mul(4),
        body.len(),
        crc32fast::hash(body)
    )
    .into_bytes();
    blocks.extend_from_slice(&head_block);
    blocks.extend_from_slice(body);
    assemble(&layout, blocks);
    let mut framed = format!(
        "{IMAGE_FORMAT}\n{{\"estate\":\"fuzz\",\"run_id\":\"f\",\"written_at\":\"2026-01-01T00:00:00Z\",\"entries\":{entries},\"body_crc32\":{}}}\n",
        crc32fast::hash(body)
    )
    .into_bytes();
    framed.extend_from_slice(body);
    assemble(&layout, framed);
});
