//! An image entry's head line: written by serde_json, read by its fixed shape when it has it.
//!
//! A head is the JSON object `{"key":…,"version":{"token":…},"digest":…,"rank":[…],"log":…,
//! "res":[[s,e],…],"bytes":N}` (`rank`, `log` and `res` when present), written compact in that
//! order. Reading thousands of them is most of an image's decoding, so a head of exactly that
//! shape is read by a cursor over its bytes; any other (whitespace, another order, an unknown
//! field, a `version_id`, a number this program does not write) goes to serde_json, which
//! reads it or says why not. Both give the same head for every text the cursor reads.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::engine::record::{SUMMARY_SPANS, Summary};
use crate::engine::state::InstanceRank;
use crate::store::Version;

/// An entry's head line as written.
#[derive(Serialize)]
pub(super) struct EntryHead<'a> {
    pub key: &'a str,
    pub version: &'a Version,
    pub digest: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<&'a InstanceRank>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub res: Option<Summary>,
    pub bytes: usize,
}

/// An entry's head line as read: its texts borrowed from the image's bytes when they hold no escapes.
#[derive(Debug, PartialEq, Deserialize)]
pub(super) struct EntryHeadIn<'a> {
    #[serde(borrow)]
    pub key: Cow<'a, str>,
    pub version: Version,
    #[serde(borrow)]
    pub digest: Cow<'a, str>,
    #[serde(default)]
    pub rank: Option<InstanceRank>,
    #[serde(default, borrow)]
    pub log: Option<Cow<'a, str>>,
    #[serde(default)]
    pub res: Option<Summary>,
    pub bytes: usize,
}

/// The head in `text`: by its shape when it has the one written, else by serde_json.
pub(super) fn read_head(text: &str) -> Result<EntryHeadIn<'_>, serde_json::Error> {
    match Cursor::new(text).head() {
        Some(head) => Ok(head),
        None => serde_json::from_str(text),
    }
}

/// A place in a head's text; each step reads what the writer puts there, or gives none.
struct Cursor<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    fn new(text: &'a str) -> Self {
        Cursor { text, at: 0 }
    }

    /// The head, when the whole text is one of the written shape.
    fn head(mut self) -> Option<EntryHeadIn<'a>> {
        self.expect("{\"key\":")?;
        let key = self.string()?;
        self.expect(",\"version\":{\"token\":")?;
        let token = self.string()?.into_owned();
        self.expect("},\"digest\":")?;
        let digest = self.string()?;
        let rank = if self.eat(",\"rank\":[") {
            let order = u8::try_from(self.unsigned()?).ok()?;
            self.expect(",")?;
            let index = self.signed()?;
            self.expect(",")?;
            let key = self.string()?.into_owned();
            self.expect(",")?;
            let deposed = self.string()?.into_owned();
            self.expect("]")?;
            Some((order, index, key, deposed))
        } else {
            None
        };
        let log = if self.eat(",\"log\":") {
            Some(self.string()?)
        } else {
            None
        };
        let res = if self.eat(",\"res\":[") {
            let mut spans = [[0usize; 2]; SUMMARY_SPANS];
            for (i, span) in spans.iter_mut().enumerate() {
                if i > 0 {
                    self.expect(",")?;
                }
                self.expect("[")?;
                span[0] = self.unsigned()?;
                self.expect(",")?;
                span[1] = self.unsigned()?;
                self.expect("]")?;
            }
            self.expect("]")?;
            Some(Summary(spans))
        } else {
            None
        };
        self.expect(",\"bytes\":")?;
        let bytes = self.unsigned()?;
        self.expect("}")?;
        (self.at == self.text.len()).then_some(EntryHeadIn {
            key,
            version: Version::new(&token),
            digest,
            rank,
            log,
            res,
            bytes,
        })
    }

    /// Past `lit` when the text goes on with it.
    fn eat(&mut self, lit: &str) -> bool {
        let there = self
            .text
            .as_bytes()
            .get(self.at..)
            .is_some_and(|rest| rest.starts_with(lit.as_bytes()));
        if there {
            self.at += lit.len();
        }
        there
    }

    fn expect(&mut self, lit: &str) -> Option<()> {
        self.eat(lit).then_some(())
    }

    /// A JSON string: borrowed when it holds no escape, unescaped by serde_json when it does.
    fn string(&mut self) -> Option<Cow<'a, str>> {
        let bytes = self.text.as_bytes();
        let open = self.at;
        if bytes.get(open) != Some(&b'"') {
            return None;
        }
        let mut at = open + 1;
        let mut escaped = false;
        loop {
            at += memchr::memchr2(b'"', b'\\', bytes.get(at..)?)?;
            if bytes[at] == b'"' {
                break;
            }
            // A backslash and the byte it escapes (serde_json checks the escape itself).
            escaped = true;
            at += 2;
        }
        let inner = &bytes[open + 1..at];
        // A control character is no JSON: serde_json says so.
        if inner.iter().any(|&b| b < 0x20) {
            return None;
        }
        self.at = at + 1;
        if escaped {
            serde_json::from_str::<String>(self.text.get(open..=at)?)
                .ok()
                .map(Cow::Owned)
        } else {
            // Between two quotes (ASCII): on char boundaries.
            self.text.get(open + 1..at).map(Cow::Borrowed)
        }
    }

    /// A number of digits as the writer gives it (no sign, no leading zero, no fraction).
    fn digits(&mut self) -> Option<u64> {
        let bytes = self.text.as_bytes();
        let (start, mut at, mut n) = (self.at, self.at, 0u64);
        while let Some(&b) = bytes.get(at).filter(|b| b.is_ascii_digit()) {
            // Past u64: serde_json's to read (or refuse).
            n = n.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
            at += 1;
        }
        // Leading zeros, a fraction or an exponent: serde_json's to read (or refuse).
        if at == start
            || (at - start > 1 && bytes[start] == b'0')
            || matches!(bytes.get(at), Some(b'.' | b'e' | b'E'))
        {
            return None;
        }
        self.at = at;
        Some(n)
    }

    fn unsigned(&mut self) -> Option<usize> {
        usize::try_from(self.digits()?).ok()
    }

    fn signed(&mut self) -> Option<i64> {
        if self.eat("-") {
            // Not `-0` and not i64::MIN: serde_json's to read.
            i64::try_from(self.digits()?)
                .ok()
                .filter(|&n| n > 0)
                .map(|n| -n)
        } else {
            i64::try_from(self.digits()?).ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn written(rank: Option<InstanceRank>, log: Option<&str>, res: bool, token: &str) -> String {
        let version = Version::new(token);
        serde_json::to_string(&EntryHead {
            key: "tofu-records/prod/r/aws_s3_bucket.b[\"x\"]",
            version: &version,
            digest: "ab12",
            rank: rank.as_ref(),
            log,
            res: res.then_some(Summary([
                [86, 103],
                [0, 0],
                [125, 132],
                [142, 156],
                [166, 168],
                [0, 0],
                [182, 226],
                [586, 592],
                [240, 426],
            ])),
            bytes: 660,
        })
        .unwrap()
    }

    #[test]
    fn a_written_head_is_read_by_its_shape_as_serde_json_reads_it() {
        for (rank, log, res, token) in [
            (
                Some((0, 0, String::new(), String::new())),
                Some("8-r-000001-cr+x"),
                true,
                "sha256:ab",
            ),
            (
                Some((1, -3, "k\"ey".into(), "00aa".into())),
                None,
                false,
                "\"etag\"",
            ),
            (None, None, false, "0x8DC"),
        ] {
            let text = written(rank, log, res, token);
            let shaped = Cursor::new(&text).head();
            assert!(shaped.is_some(), "{text}");
            assert_eq!(
                shaped.unwrap(),
                serde_json::from_str::<EntryHeadIn>(&text).unwrap()
            );
        }
    }

    #[test]
    fn other_shapes_go_to_serde_json() {
        let text = written(None, Some("l"), false, "t");
        for other in [
            text.replace(",\"log\"", ", \"log\""),
            text.replace("\"bytes\":660", "\"bytes\":0660"),
            text.replace("\"bytes\":660", "\"bytes\":6.6e2"),
            text.replace("}", ",\"version_id\":\"v\"}"),
            text.replace("\"bytes\":660}", "\"bytes\":660,\"bytes\":2}"),
            text.replace("\"log\":\"l\"", "\"log\":\"l\u{1}\""),
            format!("{text} "),
        ] {
            assert!(Cursor::new(&other).head().is_none(), "{other}");
            // Whatever serde_json makes of it is what a read gets.
            let _ = read_head(&other);
        }
    }

    proptest! {
        /// Any text the cursor reads, serde_json reads the same; bytes of a written head
        /// changed anywhere, or cut short, never panic.
        #[test]
        fn the_cursor_agrees_with_serde_json(at in 0usize..400, byte in prop::sample::select(b"\"\\,:[]{}0123456789-.eE aZ\x01".to_vec()), cut in 0usize..400) {
            let text = written(Some((2, -17, "a".into(), "".into())), Some("log-1"), true, "\"t\"");
            let mut bytes = text.clone().into_bytes();
            let at = at % bytes.len();
            bytes[at] = byte;
            bytes.truncate(bytes.len() - cut % bytes.len());
            let Ok(changed) = String::from_utf8(bytes) else { return Ok(()); };
            if let Some(shaped) = Cursor::new(&changed).head() {
                prop_assert_eq!(Ok(shaped), serde_json::from_str::<EntryHeadIn>(&changed).map_err(|e| e.to_string()));
            }
        }
    }
}
