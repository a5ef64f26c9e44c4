//! Where an estate's records lie in a store: `tofu-records/<estate>/{_estate, _image, r/<address>,
//! o/<name>, d/<address>, p/<address>, runs/<run id>, wlog/<entry>}`; every key is a [`RecordKey`]
//! made here, from the folders [`crate::store::key::Folder`] lists.

use std::fmt;

use crate::cut::{Mechanism, cut};
use crate::store::KeyRange;
pub use crate::store::key::ROOT_PREFIX;
use crate::store::key::{ESTATE_RECORD, Folder, IMAGE_RECORD, segment as key_segment};

/// A validated estate name: 1 to 63 of `[A-Za-z0-9._-]`, starting with a letter or digit.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EstateName(String);

impl EstateName {
    /// Check `name`; the error says what a valid name looks like.
    pub fn parse(name: &str) -> Result<Self, String> {
        let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        let starts_well = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric());
        if name.is_empty() || name.len() > 63 || !starts_well || !name.chars().all(ok_char) {
            return Err(format!(
                "invalid estate name {name:?}: use 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit (e.g. \"prod-eu\")"
            ));
        }
        Ok(EstateName(name.to_string()))
    }

    /// The estate that holds workspace `ws` of this estate: `<estate>@<ws>`, a name no user estate can take.
    pub fn workspace(&self, ws: &str) -> Result<EstateName, String> {
        let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        let starts_well = ws.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
        if ws.is_empty() || ws.len() > 63 || !starts_well || !ws.chars().all(ok_char) {
            return Err(format!(
                "invalid workspace name {ws:?}: use 1 to 63 letters, digits, '.', '_' or '-'"
            ));
        }
        Ok(EstateName(format!("{}@{ws}", self.0)))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EstateName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a key under an estate's prefix holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// The estate's `_estate` meta record.
    Estate,
    /// The estate's image (`_image`): a cache of every state record, never the truth.
    Image,
    /// A resource instance record.
    Resource,
    /// A root output record.
    Output,
    /// A pending-operation mark (`p/<address>`).
    Pending,
    /// A run's liveness record (`runs/<run id>`).
    Run,
    /// A default provider's record (`d/<address>`).
    Provider,
    /// A write log entry (`wlog/<entry>`): what a writer is about to write.
    Log,
    /// Something this layout does not write.
    Unknown,
}

/// A key of an estate in its record store, made only by [`Layout`]: an estate's key is never
/// spelled anywhere else.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordKey(String);

impl RecordKey {
    /// The key as the store takes it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key as an owned string.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl std::ops::Deref for RecordKey {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for RecordKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RecordKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for RecordKey {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for RecordKey {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for RecordKey {
    fn eq(&self, other: &String) -> bool {
        self.0 == *other
    }
}

impl PartialEq<RecordKey> for &str {
    fn eq(&self, other: &RecordKey) -> bool {
        *self == other.0
    }
}

impl PartialEq<RecordKey> for String {
    fn eq(&self, other: &RecordKey) -> bool {
        *self == other.0
    }
}

impl std::borrow::Borrow<str> for RecordKey {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<RecordKey> for String {
    fn from(key: RecordKey) -> String {
        key.0
    }
}

/// The keys of one estate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    estate: EstateName,
}

impl Layout {
    /// The layout of `estate`.
    pub fn new(estate: EstateName) -> Self {
        Layout { estate }
    }

    /// The estate.
    pub fn estate(&self) -> &EstateName {
        &self.estate
    }

    /// `tofu-records/<estate>/`, with the slash, so `prod` never lists `prod-eu`.
    pub fn prefix(&self) -> String {
        if cut(Mechanism::EstatePrefix) {
            return ROOT_PREFIX.to_string();
        }
        format!("{ROOT_PREFIX}{}/", self.estate)
    }

    /// The estate's meta record.
    pub fn estate_key(&self) -> RecordKey {
        RecordKey(format!("{}{ESTATE_RECORD}", self.prefix()))
    }

    /// The estate's image: one object under the estate's own prefix, so the estate's IAM policy covers it.
    pub fn image_key(&self) -> RecordKey {
        RecordKey(format!("{}{IMAGE_RECORD}", self.prefix()))
    }

    /// The two parts of the key space that hold state, as (prefix, range) to list: the head
    /// (`_estate`, `_image`, `d/`, `o/`: every key before `p/`) and the resources (`r/`).
    /// Pending marks (`p/`) and run records (`runs/`) lie outside both.
    pub fn state_segments(&self) -> [(String, KeyRange); 2] {
        let prefix = self.prefix();
        [
            (
                prefix.clone(),
                KeyRange::new(None, Some(format!("{prefix}{}/", Folder::Pending.name()))),
            ),
            (
                format!("{prefix}{}/", Folder::Resources.name()),
                KeyRange::default(),
            ),
        ]
    }

    /// The record key of a resource instance address.
    pub fn resource_key(&self, address: &str) -> RecordKey {
        self.key_in(Folder::Resources, address)
    }

    /// The record key of a root output.
    pub fn output_key(&self, name: &str) -> RecordKey {
        self.key_in(Folder::Outputs, name)
    }

    /// The pending-operation mark of an address.
    pub fn pending_key(&self, address: &str) -> RecordKey {
        self.key_in(Folder::Pending, address)
    }

    /// The liveness record of a run.
    pub fn run_key(&self, run_id: &str) -> RecordKey {
        self.key_in(Folder::Runs, run_id)
    }

    /// The folder of the estate's write log: `wlog/` sorts after every state segment, the
    /// marks and the run records, so no listing of those meets an entry.
    pub fn log_prefix(&self) -> String {
        format!("{}{}/", self.prefix(), Folder::Log.name())
    }

    /// The key of the write log entry named `name` (a name [`crate::engine::write_log`] makes).
    pub fn log_key(&self, name: &str) -> RecordKey {
        RecordKey(format!("{}{name}", self.log_prefix()))
    }

    /// The record of a default provider configuration.
    pub fn provider_key(&self, address: &str) -> RecordKey {
        self.key_in(Folder::Providers, address)
    }

    /// What `key` holds, or `None` when it lies outside this estate's prefix.
    pub fn classify(&self, key: &str) -> Option<KeyKind> {
        // As `key.strip_prefix(&self.prefix())`, without building the prefix (a read classifies every key).
        let rest = key.strip_prefix(ROOT_PREFIX)?;
        let rest = if cut(Mechanism::EstatePrefix) {
            rest
        } else {
            rest.strip_prefix(self.estate.as_str())?.strip_prefix('/')?
        };
        if rest == ESTATE_RECORD {
            return Some(KeyKind::Estate);
        }
        if rest == IMAGE_RECORD {
            return Some(KeyKind::Image);
        }
        let Some((folder, segment)) = rest.split_once('/') else {
            return Some(KeyKind::Unknown);
        };
        let folder = Folder::ALL.into_iter().find(|f| f.name() == folder);
        Some(match folder {
            Some(folder) if valid_segment(segment) => match folder {
                Folder::Resources => KeyKind::Resource,
                Folder::Outputs => KeyKind::Output,
                Folder::Pending => KeyKind::Pending,
                Folder::Runs => KeyKind::Run,
                Folder::Providers => KeyKind::Provider,
                Folder::Log => KeyKind::Log,
            },
            _ => KeyKind::Unknown,
        })
    }

    /// The key of `name` in `folder`.
    fn key_in(&self, folder: Folder, name: &str) -> RecordKey {
        RecordKey(format!(
            "{}{}/{}",
            self.prefix(),
            folder.name(),
            key_segment(name)
        ))
    }
}

fn valid_segment(seg: &str) -> bool {
    !seg.is_empty() && !seg.contains('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(name: &str) -> Layout {
        Layout::new(EstateName::parse(name).unwrap())
    }

    #[test]
    fn estates_that_start_alike_share_no_keys() {
        let prod = layout("prod");
        let prod_eu = layout("prod-eu");
        let k = prod_eu.resource_key("terraform_data.a");
        assert_eq!(prod.classify(&k), None);
        assert!(!prod_eu.prefix().starts_with(&prod.prefix()));
        assert!(!prod.prefix().starts_with(&prod_eu.prefix()));
    }

    #[test]
    fn keys_are_classified() {
        let l = layout("e");
        assert_eq!(l.classify(&l.estate_key()), Some(KeyKind::Estate));
        assert_eq!(
            l.classify(&l.resource_key("a.b[\"x/y\"]")),
            Some(KeyKind::Resource)
        );
        assert_eq!(l.classify(&l.output_key("out")), Some(KeyKind::Output));
        assert_eq!(l.classify(&l.image_key()), Some(KeyKind::Image));
        assert_eq!(l.classify("tofu-records/e/r/a/b"), Some(KeyKind::Unknown));
    }

    #[test]
    fn state_segments_hold_every_state_key_and_no_mark_or_run() {
        let l = layout("e");
        let inside = |key: &str| {
            l.state_segments()
                .iter()
                .any(|(p, r)| key.starts_with(p.as_str()) && r.contains(key))
        };
        for key in [
            l.estate_key(),
            l.image_key(),
            l.output_key("zzz"),
            l.resource_key("a.b"),
            l.resource_key("~x"),
        ] {
            assert!(inside(&key), "{key}");
        }
        let entry = format!("{}0000-x", l.log_prefix());
        assert_eq!(l.classify(&entry), Some(KeyKind::Log));
        for key in [
            l.pending_key("a.b").into_string(),
            l.run_key("r1").into_string(),
            entry,
        ] {
            assert!(!inside(&key), "{key}");
        }
    }

    #[test]
    fn bad_estate_names_are_refused() {
        for bad in ["", "-x", "a/b", "a b", "..", &"x".repeat(64), "ü"] {
            assert!(EstateName::parse(bad).is_err(), "{bad:?}");
        }
        for good in ["prod", "prod-eu", "a.b_c", "0"] {
            assert!(EstateName::parse(good).is_ok(), "{good:?}");
        }
    }
}
