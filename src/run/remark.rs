//! Markers kept right: which address's record holds each live object, so a bind never takes an object another address holds, and after each apply every marker names the address whose record holds its object.
//!
//! An object is matched to a record by its ARN (the record's `arn` attribute), else by its
//! import ID (the record's `id`) when one record alone has that ID. A marker can name another
//! address than its record's: two twins of one plan may swap, a `moved` block changes the
//! address, and an older program could mark wrongly. The record is what terraform saved, so
//! the marker is put right to it, never the other way round.

use std::collections::BTreeMap;

use crate::cloud::aws::markers::{AwsLister, LiveObject, instance_address};
use crate::cut::{Mechanism, cut};
use crate::engine::markers::Family;
use crate::engine::session::Snapshot;
use crate::engine::state::Item;

use super::say;

/// The addresses whose managed records hold each object of an estate, by ARN and by ID.
#[derive(Debug, Default)]
pub struct Holders {
    by_arn: BTreeMap<String, Vec<String>>,
    by_id: BTreeMap<String, Vec<String>>,
}

impl Holders {
    /// The holders `snapshot`'s resource records name (a record that does not decode names none).
    pub fn of(snapshot: &Snapshot) -> Holders {
        let mut holders = Holders::default();
        for entry in snapshot.records.values() {
            if entry.resource().is_none() {
                continue;
            }
            let Ok(record) = entry.record() else {
                continue;
            };
            // A data source reads an object some managed resource (or nobody here) holds.
            let Item::Resource {
                address,
                instance,
                meta,
            } = &record.item
            else {
                continue;
            };
            if meta.mode != "managed" {
                continue;
            }
            let address = instance_address(address);
            let attributes = &instance["attributes"];
            if let Some(arn) = attributes["arn"].as_str().filter(|a| !a.is_empty()) {
                holders
                    .by_arn
                    .entry(arn.to_string())
                    .or_default()
                    .push(address.to_string());
            }
            if let Some(id) = attributes["id"].as_str().filter(|a| !a.is_empty()) {
                holders
                    .by_id
                    .entry(id.to_string())
                    .or_default()
                    .push(address.to_string());
            }
        }
        holders
    }

    /// The address whose record holds `object`, when one record alone does (by its ARN, else by its import ID).
    pub fn holder(&self, object: &LiveObject) -> Option<&str> {
        if let Some(held) = self.by_arn.get(&object.arn) {
            return only(held);
        }
        only(self.by_id.get(object.import_id.as_deref()?)?)
    }
}

/// The one address of `held`, when it names one alone.
fn only(held: &[String]) -> Option<&str> {
    match held {
        [one] => Some(one),
        _ => None,
    }
}

/// Whether `object`'s marker names `address` (as AWS tags encode it).
pub fn marks(object: &LiveObject, address: &str) -> bool {
    object.address() == Some(Family::Aws.encode(address).as_str())
}

/// Put right every marker of `listed` that names another address than the record holding its object; what was put right, and what could not be, is said.
pub async fn put_right(lister: &AwsLister, holders: &Holders, listed: &[LiveObject]) -> usize {
    if cut(Mechanism::ReMark) {
        return 0;
    }
    let mut fixed = 0;
    for object in listed {
        let Some(holder) = holders.holder(object) else {
            continue;
        };
        if marks(object, holder) {
            continue;
        }
        let was = object.address().unwrap_or("none");
        match lister.remark(object, holder).await {
            Ok(()) => {
                say::remarked(&object.arn, was, holder);
                fixed += 1;
            }
            Err(e) => say::remark_failed(&object.arn, was, holder, e),
        }
    }
    fixed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn object(arn: &str, id: Option<&str>, address: &str) -> LiveObject {
        LiveObject {
            arn: arn.into(),
            import_id: id.map(str::to_string),
            tags: BTreeMap::from([("tofu-address".to_string(), address.to_string())]),
        }
    }

    #[test]
    fn an_object_is_held_by_its_arn_else_by_one_records_id() {
        let holders = Holders {
            by_arn: BTreeMap::from([
                ("arn:aws:s3:::a".into(), vec!["aws_s3_bucket.a".into()]),
                ("arn:two".into(), vec!["t.one".into(), "t.two".into()]),
            ]),
            by_id: BTreeMap::from([
                ("sg-1".into(), vec!["aws_security_group.g".into()]),
                ("x".into(), vec!["t.one".into(), "t.two".into()]),
            ]),
        };
        let bucket = object("arn:aws:s3:::a", Some("a"), "aws_s3_bucket.b");
        assert_eq!(holders.holder(&bucket), Some("aws_s3_bucket.a"));
        assert!(!marks(&bucket, "aws_s3_bucket.a"));
        let group = object(
            "arn:aws:ec2:r:1:security-group/sg-1",
            Some("sg-1"),
            "aws_security_group.g",
        );
        assert_eq!(holders.holder(&group), Some("aws_security_group.g"));
        assert!(marks(&group, "aws_security_group.g"));
        // An ID two records share names no holder.
        assert_eq!(holders.holder(&object("arn:x", Some("x"), "t.one")), None);
        assert_eq!(holders.holder(&object("arn:y", None, "t.one")), None);
        // Nor does an ARN two records hold, whatever its ID.
        assert_eq!(
            holders.holder(&object("arn:two", Some("sg-1"), "t.one")),
            None
        );
    }
}
