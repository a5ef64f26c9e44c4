//! Resource instance addresses: how terraform prints them, and how they become store key segments.

use crate::digest::sha256_hex;

/// Longest escaped segment kept readable; a longer one is stored under its digest.
pub const MAX_READABLE_SEGMENT: usize = 200;

/// Prefix of a segment that holds a digest instead of the escaped name.
pub const DIGEST_MARK: char = '~';

/// Escape any string into one key segment: no `/`, no leading `.`, nothing outside `[A-Za-z0-9._-]`.
pub fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for (i, b) in name.bytes().enumerate() {
        let plain = b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || (b == b'.' && i > 0);
        if plain {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Undo [`escape`]; `None` when the segment is not one `escape` makes.
pub fn unescape(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = segment.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || (b == b'.' && i > 0) => {
                out.push(b);
                i += 1;
            }
            _ => return None,
        }
    }
    let text = String::from_utf8(out).ok()?;
    (escape(&text) == segment).then_some(text)
}

/// The key segment for a name: its escape, or `~<sha256>` when the escape is too long.
pub fn key_segment(name: &str) -> String {
    let escaped = escape(name);
    if escaped.len() <= MAX_READABLE_SEGMENT {
        escaped
    } else {
        format!("{DIGEST_MARK}{}", sha256_hex(name.as_bytes()))
    }
}

/// Quote a for_each key the way terraform prints it inside `[...]`.
pub fn quote_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 2);
    out.push('"');
    let mut chars = key.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '$' | '%' if chars.peek() == Some(&'{') => {
                out.push(c);
                out.push(c);
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One instance's index key: none, a count index or a for_each key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexKey {
    /// A resource without count or for_each.
    None,
    /// A count index.
    Int(i64),
    /// A for_each key.
    Str(String),
}

impl IndexKey {
    /// The `[...]` suffix terraform prints for this key.
    pub fn suffix(&self) -> String {
        match self {
            IndexKey::None => String::new(),
            IndexKey::Int(i) => format!("[{i}]"),
            IndexKey::Str(s) => format!("[{}]", quote_key(s)),
        }
    }
}

/// The full address of one resource instance object, as terraform prints it.
pub fn instance_address(
    module: Option<&str>,
    mode: &str,
    type_name: &str,
    name: &str,
    key: &IndexKey,
    deposed: Option<&str>,
) -> String {
    let mut out = String::new();
    if let Some(m) = module.filter(|m| !m.is_empty()) {
        out.push_str(m);
        out.push('.');
    }
    if mode == "data" {
        out.push_str("data.");
    }
    out.push_str(type_name);
    out.push('.');
    out.push_str(name);
    out.push_str(&key.suffix());
    if let Some(d) = deposed {
        out.push_str(" (deposed ");
        out.push_str(d);
        out.push(')');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn odd_keys_escape_to_one_safe_segment() {
        for name in [
            "a/b",
            "..",
            ".",
            "a\"b",
            "back\\slash",
            "with space",
            "zürich-东京",
            "${x}",
            "",
        ] {
            let seg = key_segment(name);
            assert!(!seg.contains('/'), "{seg}");
            assert!(!seg.starts_with('.'), "{seg}");
            assert_ne!(seg, "..");
            assert_eq!(unescape(&seg).as_deref(), Some(name));
        }
    }

    #[test]
    fn long_names_become_digests() {
        let long = "k".repeat(500);
        let seg = key_segment(&long);
        assert!(seg.starts_with(DIGEST_MARK));
        assert_eq!(seg.len(), 65);
        assert_ne!(seg, key_segment(&"k".repeat(501)));
    }

    #[test]
    fn addresses_print_like_terraform() {
        let k = IndexKey::Str("a\"b${c}".into());
        assert_eq!(
            instance_address(
                Some("module.net[0]"),
                "managed",
                "terraform_data",
                "x",
                &k,
                None
            ),
            r#"module.net[0].terraform_data.x["a\"b$${c}"]"#
        );
        assert_eq!(
            instance_address(None, "data", "t", "n", &IndexKey::Int(2), Some("00abcd")),
            "data.t.n[2] (deposed 00abcd)"
        );
    }

    proptest! {
        #[test]
        fn escape_round_trips(name in any::<String>()) {
            let e = escape(&name);
            prop_assert!(!e.contains('/'));
            prop_assert!(!e.starts_with('.'));
            prop_assert_eq!(unescape(&e), Some(name));
        }

        #[test]
        fn unescape_never_panics(seg in any::<String>()) {
            let _ = unescape(&seg);
        }

        #[test]
        fn distinct_names_get_distinct_segments(a in any::<String>(), b in any::<String>()) {
            prop_assume!(a != b);
            prop_assert_ne!(key_segment(&a), key_segment(&b));
        }
    }
}
