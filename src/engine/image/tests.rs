//! The image's round trips: encoded, packed, and decoded whole or as it arrives.

use super::pack;
use super::text::{framed, line};
use super::*;
use crate::engine::layout::{EstateName, Layout};
use crate::store::Version;

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
    assert!(matches!(Image::decode(&l, huge), Err(ImageError::Format(m)) if m.contains("larger")));
}

/// The stored image of `n` resource records (keys in order), each holding `record`.
fn alike(l: &Layout, n: usize, record: &[u8]) -> Vec<u8> {
    let keys: Vec<String> = (0..n)
        .map(|i| l.resource_key(&format!("x.r{i:02}")).into_string())
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
