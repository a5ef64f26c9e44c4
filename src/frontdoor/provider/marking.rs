//! Live markers through the door: the AWS provider told to ignore `tofu-` tags, a create's tags given the markers, and the markers taken out of what goes back to terraform.
//!
//! The values are cty's MessagePack, changed in place so every other byte stays as the
//! provider and terraform wrote it:
//!
//! - `ConfigureProvider`: `tofu-` joins `ignore_tags { key_prefixes }`, beside the user's
//!   own keys and prefixes. Every configure call gets it, so plan, refresh and apply read
//!   every object alike: the markers never show in `tags` or `tags_all`.
//! - `ApplyResourceChange` of a create: `tofu-estate` and `tofu-address` join the planned
//!   `tags` (and the config's), which the provider merges with `default_tags` for its create
//!   call. The plan terraform holds never had them.
//! - Its answer: the markers are taken out of `tags` and `tags_all` of the new state, should
//!   the provider hand them back, so the new state agrees with terraform's plan. A `tags` that
//!   was null before the markers joined it is null again, as the provider would have answered.

use prost::Message;
use rmpv::Value;
use thiserror::Error;

use super::proto::tfplugin5::DynamicValue;
use super::wire::{self, WireError};
use crate::engine::markers::{ADDRESS_TAG, ESTATE_TAG, Family};

/// The tag key prefix the door has the provider ignore (both markers start with it).
pub const MARKER_PREFIX: &str = "tofu-";

/// Why a value could not be marked.
#[derive(Debug, Error)]
pub enum MarkingError {
    /// Not valid MessagePack.
    #[error("not valid msgpack: {0}")]
    Decode(#[from] rmpv::decode::Error),
    /// Could not be written again.
    #[error("cannot write msgpack: {0}")]
    Encode(#[from] rmpv::encode::Error),
    /// Not the shape the AWS provider's schema gives.
    #[error("{0}")]
    Shape(&'static str),
    /// The message around the value.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// A DynamicValue that is not one.
    #[error("not a DynamicValue: {0}")]
    Proto(#[from] prost::DecodeError),
}

/// Which estate the door marks creates for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Marking {
    /// The estate (the `tofu-estate` value before encoding).
    pub estate: String,
}

impl Marking {
    /// The two markers of `address`, as AWS tags hold them.
    pub fn markers(&self, address: &str) -> [(&'static str, String); 2] {
        [
            (ESTATE_TAG, Family::Aws.encode(&self.estate)),
            (ADDRESS_TAG, Family::Aws.encode(address)),
        ]
    }
}

/// Whether a provider's values are marked by the door: the AWS family only.
pub fn marks(provider: &str) -> bool {
    Family::of(provider, "") == Some(Family::Aws)
}

/// Change the msgpack value `dv` holds with `change`; false (and `dv` untouched) when it holds none or `change` changed nothing.
pub fn rewrite(
    dv: &mut DynamicValue,
    change: impl Fn(&mut Value) -> Result<bool, MarkingError>,
) -> Result<bool, MarkingError> {
    if dv.msgpack.is_empty() {
        return Ok(false);
    }
    let mut value = rmpv::decode::read_value(&mut dv.msgpack.as_slice())?;
    if !change(&mut value)? {
        return Ok(false);
    }
    let mut out = Vec::with_capacity(dv.msgpack.len() + 64);
    rmpv::encode::write_value(&mut out, &value)?;
    dv.msgpack = out;
    Ok(true)
}

/// `message` with its DynamicValue field `field` changed by `change`, every other byte kept; `None` when nothing changed.
pub fn rewrite_message(
    message: &[u8],
    field: u32,
    change: impl Fn(&mut Value) -> Result<bool, MarkingError>,
) -> Result<Option<Vec<u8>>, MarkingError> {
    let mut failed = None;
    let out = wire::rewrite_field(message, field, |bytes| {
        let mut dv = match DynamicValue::decode(bytes) {
            Ok(dv) => dv,
            Err(e) => {
                failed = Some(MarkingError::from(e));
                return None;
            }
        };
        match rewrite(&mut dv, &change) {
            Ok(true) => Some(dv.encode_to_vec()),
            Ok(false) => None,
            Err(e) => {
                failed = Some(e);
                None
            }
        }
    })?;
    match failed {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// The entry `key` of an object (a msgpack map with string keys).
fn entry<'a>(object: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    match object {
        Value::Map(entries) => entries
            .iter_mut()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v),
        _ => None,
    }
}

/// Add `tofu-` to an AWS provider configuration's `ignore_tags { key_prefixes }`, keeping the user's own.
pub fn ignore_markers(config: &mut Value) -> Result<bool, MarkingError> {
    let prefix = Value::from(MARKER_PREFIX);
    let block = || {
        Value::Map(vec![
            (
                Value::from("key_prefixes"),
                Value::Array(vec![prefix.clone()]),
            ),
            (Value::from("keys"), Value::Nil),
        ])
    };
    let Value::Map(entries) = config else {
        return Err(MarkingError::Shape(
            "the provider configuration is not an object",
        ));
    };
    let Some(slot) = entries
        .iter_mut()
        .find(|(k, _)| k.as_str() == Some("ignore_tags"))
        .map(|(_, v)| v)
    else {
        entries.push((Value::from("ignore_tags"), Value::Array(vec![block()])));
        return Ok(true);
    };
    match slot {
        Value::Nil => *slot = Value::Array(vec![block()]),
        Value::Array(items) if items.is_empty() => items.push(block()),
        Value::Array(items) => {
            let Some(prefixes) = entry(&mut items[0], "key_prefixes") else {
                return Err(MarkingError::Shape("ignore_tags has no key_prefixes"));
            };
            match prefixes {
                Value::Nil => *prefixes = Value::Array(vec![prefix]),
                Value::Array(ps) if ps.contains(&prefix) => return Ok(false),
                Value::Array(ps) => ps.push(prefix),
                _ => return Err(MarkingError::Shape("ignore_tags.key_prefixes is not known")),
            }
        }
        _ => return Err(MarkingError::Shape("ignore_tags is not known")),
    }
    Ok(true)
}

/// What the door did to a create's planned `tags`, so its answer can be given back as the provider would have made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marked {
    /// The markers joined a `tags` map the plan had.
    Tags,
    /// The plan's `tags` was null: the markers made it a map.
    NullTags,
}

/// Whether an object's `tags` is null (it has a `tags` attribute, and no value in it).
pub fn tags_null(object: &mut Value) -> bool {
    entry(object, "tags").is_some_and(|t| t.is_nil())
}

/// Put `markers` into the `tags` of a planned object: false when it has no `tags` map to hold them (or they are there).
pub fn mark(
    object: &mut Value,
    markers: &[(&'static str, String); 2],
) -> Result<bool, MarkingError> {
    let Some(tags) = entry(object, "tags") else {
        return Ok(false);
    };
    if tags.is_nil() {
        *tags = Value::Map(Vec::new());
    }
    let Value::Map(tags) = tags else {
        // Unknown until apply, or not a map: the call goes as planned.
        return Ok(false);
    };
    let mut changed = false;
    for (key, value) in markers {
        let value = Value::from(value.as_str());
        match tags.iter_mut().find(|(k, _)| k.as_str() == Some(*key)) {
            Some((_, v)) if *v == value => {}
            Some((_, v)) => {
                *v = value;
                changed = true;
            }
            None => {
                tags.push((Value::from(*key), value));
                changed = true;
            }
        }
    }
    Ok(changed)
}

/// Take the markers out of an object's `tags` and `tags_all`: true when any was there. With `null_tags` (the plan's `tags` was null), a `tags` left empty is null again.
pub fn strip(object: &mut Value, null_tags: bool) -> Result<bool, MarkingError> {
    let mut changed = false;
    for attribute in ["tags", "tags_all"] {
        let Some(slot) = entry(object, attribute) else {
            continue;
        };
        if let Value::Map(tags) = slot {
            let before = tags.len();
            tags.retain(|(k, _)| !matches!(k.as_str(), Some(ESTATE_TAG | ADDRESS_TAG)));
            changed |= tags.len() != before;
            if null_tags && attribute == "tags" && tags.is_empty() {
                *slot = Value::Nil;
                changed = true;
            }
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: Vec<(&str, Value)>) -> Value {
        Value::Map(
            entries
                .into_iter()
                .map(|(k, v)| (Value::from(k), v))
                .collect(),
        )
    }

    fn prefixes(config: &mut Value) -> Vec<String> {
        let Some(Value::Array(items)) = entry(config, "ignore_tags") else {
            panic!("no ignore_tags")
        };
        let Some(Value::Array(ps)) = entry(&mut items[0], "key_prefixes") else {
            panic!("no key_prefixes")
        };
        ps.iter()
            .filter_map(|p| p.as_str().map(str::to_string))
            .collect()
    }

    #[test]
    fn the_markers_prefix_joins_the_users_ignore_tags() {
        let mut none = map(vec![
            ("region", Value::from("us-east-1")),
            ("ignore_tags", Value::Array(vec![])),
        ]);
        assert!(ignore_markers(&mut none).unwrap());
        assert_eq!(prefixes(&mut none), ["tofu-"]);
        let mut own = map(vec![(
            "ignore_tags",
            Value::Array(vec![map(vec![
                ("key_prefixes", Value::Array(vec![Value::from("kube-")])),
                ("keys", Value::Array(vec![Value::from("owner")])),
            ])]),
        )]);
        assert!(ignore_markers(&mut own).unwrap());
        assert_eq!(prefixes(&mut own), ["kube-", "tofu-"]);
        assert!(!ignore_markers(&mut own).unwrap(), "added once");
        let mut unknown = map(vec![("ignore_tags", Value::Ext(0, vec![]))]);
        assert!(ignore_markers(&mut unknown).is_err());
    }

    #[test]
    fn a_create_is_marked_and_its_answer_stripped() {
        let m = Marking {
            estate: "prod".into(),
        }
        .markers("aws_s3_bucket.b");
        let mut planned = map(vec![
            ("bucket", Value::from("b")),
            ("tags", Value::Nil),
            ("tags_all", Value::Map(vec![])),
        ]);
        assert!(mark(&mut planned, &m).unwrap());
        let tags = entry(&mut planned, "tags").unwrap().clone();
        assert_eq!(
            tags,
            map(vec![
                ("tofu-estate", Value::from("prod")),
                ("tofu-address", Value::from("aws_s3_bucket.b"))
            ])
        );
        let mut own = map(vec![("tags", map(vec![("team", Value::from("db"))]))]);
        assert!(mark(&mut own, &m).unwrap());
        let mut answer = own.clone();
        assert!(strip(&mut answer, false).unwrap());
        assert_eq!(
            answer,
            map(vec![("tags", map(vec![("team", Value::from("db"))]))])
        );
        assert!(!strip(&mut answer, false).unwrap());
        // A plan whose tags were null gets null back, not an empty map; tags_all stays a map.
        let mut null = map(vec![("tags", Value::Nil), ("tags_all", Value::Map(vec![]))]);
        assert!(tags_null(&mut null));
        assert!(mark(&mut null, &m).unwrap());
        assert!(!tags_null(&mut null));
        let mut answer = null.clone();
        *entry(&mut answer, "tags_all").unwrap() = entry(&mut null, "tags").unwrap().clone();
        assert!(strip(&mut answer, true).unwrap());
        assert_eq!(
            answer,
            map(vec![("tags", Value::Nil), ("tags_all", Value::Map(vec![]))])
        );
        // A user's own empty map stays one.
        let mut empty = map(vec![("tags", Value::Map(vec![]))]);
        assert!(mark(&mut empty, &m).unwrap());
        assert!(strip(&mut empty, false).unwrap());
        assert_eq!(empty, map(vec![("tags", Value::Map(vec![]))]));
        let mut untagged = map(vec![("name", Value::from("x"))]);
        assert!(!mark(&mut untagged, &m).unwrap());
        let mut unknown = map(vec![("tags", Value::Ext(0, vec![]))]);
        assert!(!mark(&mut unknown, &m).unwrap());
    }

    #[test]
    fn a_rewrite_changes_only_what_it_must() {
        let mut buf = Vec::new();
        rmpv::encode::write_value(&mut buf, &map(vec![("tags", Value::Nil)])).unwrap();
        let mut dv = DynamicValue {
            msgpack: buf.clone(),
            json: Vec::new(),
        };
        assert!(!rewrite(&mut dv, |_| Ok(false)).unwrap());
        assert_eq!(dv.msgpack, buf);
        let m = Marking { estate: "e".into() }.markers("a.b");
        assert!(rewrite(&mut dv, |v| mark(v, &m)).unwrap());
        assert_ne!(dv.msgpack, buf);
    }
}
