//! Unrecorded marked objects: live objects carrying the estate's marker whose address no
//! record names. What the records tell the search, apart from any listing (which the cloud
//! code makes): the addresses they name, as markers carry them, and their types by provider
//! configuration.

use std::collections::{BTreeMap, BTreeSet};

use super::{Family, instance_address};

/// One resource record as the search for unrecorded objects reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordedResource<'a> {
    /// The record's address (a deposed object's included).
    pub address: &'a str,
    /// Its provider configuration's address.
    pub provider: &'a str,
    /// Its resource type.
    pub type_name: &'a str,
}

/// The records under one provider configuration: how many, and their resource types.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Provided {
    records: usize,
    types: BTreeSet<String>,
}

/// What an estate's resource records tell the search for unrecorded marked objects.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recorded {
    /// Each record's instance address, as `family`'s markers carry it.
    addresses: BTreeSet<String>,
    /// The records by provider configuration.
    by_provider: BTreeMap<String, Provided>,
}

impl Recorded {
    /// What every one of `records` tells, its address as `family`'s markers carry it.
    pub fn of<'a>(family: Family, records: impl IntoIterator<Item = RecordedResource<'a>>) -> Self {
        let mut recorded = Recorded::default();
        for r in records {
            recorded
                .addresses
                .insert(family.encode(instance_address(r.address)));
            let provided = recorded
                .by_provider
                .entry(r.provider.to_string())
                .or_default();
            provided.records += 1;
            provided.types.insert(r.type_name.to_string());
        }
        recorded
    }

    /// What the records of `family`'s resource types among `records` tell.
    pub fn of_family<'a>(
        family: Family,
        records: impl IntoIterator<Item = RecordedResource<'a>>,
    ) -> Self {
        let of_family = records
            .into_iter()
            .filter(|r| Family::of("", r.type_name) == Some(family));
        Self::of(family, of_family)
    }

    /// Every resource type recorded, in order.
    pub fn types(&self) -> Vec<String> {
        let types: BTreeSet<&String> = self.by_provider.values().flat_map(|p| &p.types).collect();
        types.into_iter().cloned().collect()
    }

    /// The types to list with `provider`'s configuration: its records' and `more`, in order, once each.
    pub fn types_under(&self, provider: &str, more: &[String]) -> Vec<String> {
        let types: BTreeSet<&String> = self
            .by_provider
            .get(provider)
            .into_iter()
            .flat_map(|p| &p.types)
            .chain(more)
            .collect();
        types.into_iter().cloned().collect()
    }

    /// Each provider configuration with records that is not one of `given`, with how many records it has, in order.
    pub fn unlisted<'a>(
        &'a self,
        given: &'a BTreeSet<&str>,
    ) -> impl Iterator<Item = (&'a str, usize)> {
        self.by_provider
            .iter()
            .filter(|(p, _)| !given.contains(p.as_str()))
            .map(|(p, provided)| (p.as_str(), provided.records))
    }

    /// Whether a marked object whose address marker says `address` (none: it has none) is
    /// unrecorded: no record names that address.
    pub fn unrecorded(&self, address: Option<&str>) -> bool {
        address.is_none_or(|a| !self.addresses.contains(a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource<'a>(
        address: &'a str,
        provider: &'a str,
        type_name: &'a str,
    ) -> RecordedResource<'a> {
        RecordedResource {
            address,
            provider,
            type_name,
        }
    }

    #[test]
    fn an_object_is_unrecorded_when_no_record_names_its_address() {
        let records = [
            resource("aws_s3_bucket.a", "p1", "aws_s3_bucket"),
            resource("aws_iam_role.r (deposed 00ab)", "p1", "aws_iam_role"),
            resource("google_x.g", "p2", "google_x"),
        ];
        let all = Recorded::of(Family::Aws, records);
        assert!(!all.unrecorded(Some("aws_s3_bucket.a")));
        assert!(
            !all.unrecorded(Some("aws_iam_role.r")),
            "a deposed object is its instance's"
        );
        assert!(!all.unrecorded(Some("google_x.g")));
        assert!(all.unrecorded(Some("aws_s3_bucket.b")));
        assert!(all.unrecorded(None), "an object without an address marker");
        assert_eq!(all.types(), ["aws_iam_role", "aws_s3_bucket", "google_x"]);

        let aws = Recorded::of_family(Family::Aws, records);
        assert!(
            aws.unrecorded(Some("google_x.g")),
            "only the family's records count"
        );
        assert_eq!(
            aws.types_under(
                "p1",
                &["aws_sqs_queue".to_string(), "aws_s3_bucket".to_string()]
            ),
            ["aws_iam_role", "aws_s3_bucket", "aws_sqs_queue"]
        );
        assert_eq!(aws.types_under("p9", &[]), Vec::<String>::new());
        let given = BTreeSet::from(["p2"]);
        assert_eq!(aws.unlisted(&given).collect::<Vec<_>>(), [("p1", 2)]);
        let long = "x".repeat(300);
        let encoded = Recorded::of(Family::Aws, [resource(&long, "p", "aws_x")]);
        assert!(
            !encoded.unrecorded(Some(&Family::Aws.encode(&long))),
            "as the marker carries it"
        );
    }
}
