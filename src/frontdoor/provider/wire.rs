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

/// `message` with each occurrence of length-delimited field `field` replaced by what `change` makes of it; `None` when `change` changed none.
pub fn rewrite_field(
    message: &[u8],
    field: u32,
    mut change: impl FnMut(&[u8]) -> Option<Vec<u8>>,
) -> Result<Option<Vec<u8>>, WireError> {
    let mut out = Vec::with_capacity(message.len() + 64);
    let mut rest = message;
    let mut changed = false;
    while !rest.is_empty() {
        let start = message.len() - rest.len();
        let key = decode_varint(&mut rest).map_err(|_| WireError::Malformed("a bad field key"))?;
        let wire_type = key & 7;
        let number = key >> 3;
        let skip = match wire_type {
            0 => {
                decode_varint(&mut rest).map_err(|_| WireError::Malformed("a bad varint"))?;
                0
            }
            1 => 8,
            2 => usize::try_from(
                decode_varint(&mut rest).map_err(|_| WireError::Malformed("a bad length"))?,
            )
            .map_err(|_| WireError::Malformed("a length past memory"))?,
            5 => 4,
            _ => return Err(WireError::Malformed("a group or unknown wire type")),
        };
        if rest.remaining() < skip {
            return Err(WireError::Malformed("a field past the message's end"));
        }
        let (body, after) = rest.split_at(skip);
        let end = message.len() - after.len();
        match (wire_type, number == u64::from(field)) {
            (2, true) => match change(body) {
                Some(new) => {
                    changed = true;
                    encode_varint(key, &mut out);
                    encode_varint(new.len() as u64, &mut out);
                    out.extend_from_slice(&new);
                }
                None => out.extend_from_slice(&message[start..end]),
            },
            _ => out.extend_from_slice(&message[start..end]),
        }
        rest = after;
    }
    Ok(changed.then_some(out))
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
}
