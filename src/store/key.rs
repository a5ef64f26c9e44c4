//! Record keys as every store kind can hold them: the root prefix, and any name as one safe key segment.
//!
//! A segment is a name escaped to `[A-Za-z0-9._-]` and `%XX` (no `/`, no leading `.`), so it
//! is a valid S3 key part, Azure blob path segment, GCS object name part and file name;
//! past [`MAX_READABLE_SEGMENT`] bytes it is the name's digest instead, within every
//! file system's name limit.

use sha2::{Digest, Sha256};

/// The prefix every record key lives under.
pub const ROOT_PREFIX: &str = "tofu-records/";

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
pub fn segment(name: &str) -> String {
    let escaped = escape(name);
    if escaped.len() <= MAX_READABLE_SEGMENT {
        escaped
    } else {
        format!(
            "{DIGEST_MARK}{}",
            hex::encode(Sha256::digest(name.as_bytes()))
        )
    }
}

/// The name a key ends with (its last segment, unescaped); the key itself when that is a digest.
pub fn name_of(key: &str) -> String {
    let last = key.rsplit('/').next().unwrap_or(key);
    unescape(last).unwrap_or_else(|| key.to_string())
}

/// A folder of an estate's key space, `tofu-records/<estate>/<folder>/<segment>`: the one list of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Folder {
    /// Resource instance records (`r/`).
    Resources,
    /// Root output records (`o/`).
    Outputs,
    /// Pending-operation marks (`p/`).
    Pending,
    /// Runs' liveness records (`runs/`).
    Runs,
    /// Default provider records (`d/`).
    Providers,
    /// Write log entries (`wlog/`): sorts after every other folder, so no listing of those meets one.
    Log,
}

impl Folder {
    /// Every folder.
    pub const ALL: [Folder; 6] = [
        Folder::Resources,
        Folder::Outputs,
        Folder::Pending,
        Folder::Runs,
        Folder::Providers,
        Folder::Log,
    ];

    /// The folder's name in a key.
    pub const fn name(self) -> &'static str {
        match self {
            Folder::Resources => "r",
            Folder::Outputs => "o",
            Folder::Pending => "p",
            Folder::Runs => "runs",
            Folder::Providers => "d",
            Folder::Log => LOG_FOLDER,
        }
    }
}

/// The folder of an estate's write log entries: `tofu-records/<estate>/wlog/...`.
pub const LOG_FOLDER: &str = "wlog";

/// The estate's meta record's name, right under its prefix.
pub const ESTATE_RECORD: &str = "_estate";

/// The estate's image's name, right under its prefix.
pub const IMAGE_RECORD: &str = "_image";

/// Whether `key` is a write log entry of some estate: `tofu-records/<estate>/wlog/<name>`.
pub fn is_log_entry(key: &str) -> bool {
    let Some(rest) = key.strip_prefix(ROOT_PREFIX) else {
        return false;
    };
    let mut parts = rest.splitn(3, '/');
    matches!(
        (parts.next(), parts.next(), parts.next()),
        (Some(estate), Some(LOG_FOLDER), Some(name)) if !estate.is_empty() && !name.is_empty()
    )
}

/// The estate a key belongs to: `tofu-records/<estate>/...`.
pub fn estate_of(key: &str) -> Option<&str> {
    let rest = key.strip_prefix(ROOT_PREFIX)?;
    rest.split('/').next().filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_of_keys_and_estates() {
        assert_eq!(
            name_of(&format!("{ROOT_PREFIX}e/r/{}", segment("a.b[\"x/y\"]"))),
            "a.b[\"x/y\"]"
        );
        assert_eq!(estate_of("tofu-records/prod/r/a"), Some("prod"));
        assert_eq!(estate_of("other/prod"), None);
        assert!(is_log_entry("tofu-records/prod/wlog/0001-x"));
        assert!(!is_log_entry("tofu-records/prod/r/wlog"));
        assert!(!is_log_entry("tofu-records/prod/wlog/"));
        assert!(!is_log_entry("tofu-records//wlog/x"));
    }

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
            let seg = segment(name);
            assert!(!seg.contains('/'), "{seg}");
            assert!(!seg.starts_with('.'), "{seg}");
            assert_ne!(seg, "..");
            assert_eq!(unescape(&seg).as_deref(), Some(name));
        }
    }

    #[test]
    fn long_names_become_digests() {
        let long = "k".repeat(500);
        let seg = segment(&long);
        assert!(seg.starts_with(DIGEST_MARK));
        assert_eq!(seg.len(), 65);
        assert_ne!(seg, segment(&"k".repeat(501)));
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
            prop_assert_ne!(segment(&a), segment(&b));
        }
    }
}
