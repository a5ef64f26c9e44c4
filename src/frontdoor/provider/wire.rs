//! One field of a protobuf message rewritten in place, every other byte kept as it came.
//!
//! The door declares only the fields it reads ([`super::proto`]); a message decoded and
//! encoded again would lose the rest (a newer protocol's fields among them). So a message the
//! door changes is spliced: each top-level field is copied as it came, and only the
//! length-delimited field asked for is replaced.

use prost::bytes::Buf;
use prost::encoding::{decode_varint, encode_varint};
use thiserror::Error;

/// Why a message could not be spliced.
#[derive(Debug, Error)]
pub enum WireError {
    /// Not a protobuf message the door can walk.
    #[error("not a well-formed protobuf message: {0}")]
    Malformed(&'static str),
}

/// One top-level field of a message: its number, wire type, and where its body and its whole lie in the message.
struct Field {
    number: u64,
    wire_type: u64,
    /// The key, the length (if any) and the body.
    whole: std::ops::Range<usize>,
    /// The body alone (a length-delimited field's bytes).
    body: std::ops::Range<usize>,
}

/// Every top-level field of `message`, in order; an error at the first malformed one.
fn fields(message: &[u8]) -> impl Iterator<Item = Result<Field, WireError>> + '_ {
    let mut rest = message;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let field = next_field(message, &mut rest);
        if field.is_err() {
            rest = &[];
        }
        Some(field)
    })
}

fn next_field(message: &[u8], rest: &mut &[u8]) -> Result<Field, WireError> {
    let start = message.len() - rest.len();
    let key = decode_varint(rest).map_err(|_| WireError::Malformed("a bad field key"))?;
    let wire_type = key & 7;
    let skip = match wire_type {
        0 => {
            decode_varint(rest).map_err(|_| WireError::Malformed("a bad varint"))?;
            0
        }
        1 => 8,
        2 => {
            usize::try_from(decode_varint(rest).map_err(|_| WireError::Malformed("a bad length"))?)
                .map_err(|_| WireError::Malformed("a length past memory"))?
        }
        5 => 4,
        _ => return Err(WireError::Malformed("a group or unknown wire type")),
    };
    if rest.remaining() < skip {
        return Err(WireError::Malformed("a field past the message's end"));
    }
    let body_start = message.len() - rest.len();
    *rest = &rest[skip..];
    let end = message.len() - rest.len();
    Ok(Field {
        number: key >> 3,
        wire_type,
        whole: start..end,
        body: body_start..end,
    })
}

/// `message` with each occurrence of length-delimited field `field` replaced by what `change` makes of it; `None` when `change` changed none.
pub fn rewrite_field(
    message: &[u8],
    field: u32,
    mut change: impl FnMut(&[u8]) -> Option<Vec<u8>>,
) -> Result<Option<Vec<u8>>, WireError> {
    let mut out = Vec::with_capacity(message.len() + 64);
    let mut changed = false;
    for f in fields(message) {
        let f = f?;
        let new = (f.wire_type == 2 && f.number == u64::from(field))
            .then(|| change(&message[f.body.clone()]))
            .flatten();
        match new {
            Some(new) => {
                changed = true;
                encode_varint(f.number << 3 | 2, &mut out);
                encode_varint(new.len() as u64, &mut out);
                out.extend_from_slice(&new);
            }
            None => out.extend_from_slice(&message[f.whole]),
        }
    }
    Ok(changed.then_some(out))
}

/// `message` without the entries of its map fields `maps` whose string key `keep` refuses; every other byte kept as it came.
pub fn retain_map_entries(
    message: &[u8],
    maps: &[u32],
    mut keep: impl FnMut(&str) -> bool,
) -> Result<Vec<u8>, WireError> {
    let mut out = Vec::with_capacity(message.len());
    for f in fields(message) {
        let f = f?;
        if f.wire_type == 2 && maps.iter().any(|m| u64::from(*m) == f.number) {
            let entry = &message[f.body.clone()];
            if !keep(&map_key(entry)?) {
                continue;
            }
        }
        out.extend_from_slice(&message[f.whole]);
    }
    Ok(out)
}

/// The string key (field 1) of one map entry.
fn map_key(entry: &[u8]) -> Result<String, WireError> {
    for f in fields(entry) {
        let f = f?;
        if f.number == 1 && f.wire_type == 2 {
            return String::from_utf8(entry[f.body].to_vec())
                .map_err(|_| WireError::Malformed("a map key that is not UTF-8"));
        }
    }
    // A map entry without its key field has the empty key.
    Ok(String::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_field_asked_for_changes() {
        // field 1 = "ab", field 3 = varint 150, field 2 = "xyz", field 9 (unknown here) = "k".
        let msg = [
            0x0a, 2, b'a', b'b', 0x18, 0x96, 0x01, 0x12, 3, b'x', b'y', b'z', 0x4a, 1, b'k',
        ];
        let out = rewrite_field(&msg, 2, |b| {
            assert_eq!(b, b"xyz");
            Some(b"longer!".to_vec())
        })
        .unwrap()
        .unwrap();
        assert_eq!(
            out,
            [
                0x0a, 2, b'a', b'b', 0x18, 0x96, 0x01, 0x12, 7, b'l', b'o', b'n', b'g', b'e', b'r',
                b'!', 0x4a, 1, b'k'
            ]
        );
        assert!(rewrite_field(&msg, 2, |_| None).unwrap().is_none());
        assert!(rewrite_field(&msg, 7, |_| Some(vec![])).unwrap().is_none());
        assert!(rewrite_field(&msg[..10], 2, |_| None).is_err());
    }

    #[test]
    fn only_the_refused_map_entries_go() {
        // field 2 entries {"keep": 1} and {"drop": 1}, field 3 entry {"drop": 1}, field 4 = "x".
        let entry = |key: &[u8]| {
            let mut e = vec![0x0a, key.len() as u8];
            e.extend_from_slice(key);
            e.extend_from_slice(&[0x10, 1]);
            e
        };
        let mut msg = Vec::new();
        for (field, key) in [(2u8, &b"keep"[..]), (2, b"drop"), (3, b"drop")] {
            let e = entry(key);
            msg.push(field << 3 | 2);
            msg.push(e.len() as u8);
            msg.extend_from_slice(&e);
        }
        msg.extend_from_slice(&[0x22, 1, b'x']);
        let out = retain_map_entries(&msg, &[2], |k| k != "drop").unwrap();
        let mut want = msg.clone();
        want.drain(10..20);
        assert_eq!(out, want);
        assert_eq!(retain_map_entries(&msg, &[2, 3], |_| true).unwrap(), msg);
        assert!(retain_map_entries(&msg[..5], &[2], |_| true).is_err());
    }
}
