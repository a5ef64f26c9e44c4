//! The provider's own word on marked live objects: whether each is live (not gone, nor being deleted by the cloud) and by which import ID terraform imports it.
//!
//! A probe of the provider door ([`Door::probe`]) is started for each provider configuration
//! asked through, on first use, and ended when this is dropped: it is a whole provider process,
//! so it is kept only while objects are being asked about.

use serde_json::Value;

use super::say;
use crate::cloud::aws::markers::LiveObject;
use crate::cut::{Mechanism, cut};
use crate::engine::address::resource_of;
use crate::frontdoor::provider::Door;
use crate::frontdoor::provider::probe::{Found, Probe, candidates};

/// The probes of one door, one for each provider configuration asked through.
pub struct Liveness<'a> {
    door: &'a Door,
    probes: Vec<(Value, Option<Probe>)>,
}

impl<'a> Liveness<'a> {
    /// No probe started yet.
    pub fn new(door: &'a Door) -> Self {
        Liveness {
            door,
            probes: Vec::new(),
        }
    }

    /// What the provider configured with `config` says of `object` as a `type_name`; `None` when it could not be asked (said once for each configuration).
    pub async fn ask(
        &mut self,
        config: &Value,
        type_name: &str,
        object: &LiveObject,
    ) -> Option<Found> {
        if cut(Mechanism::LiveRead) {
            return None;
        }
        let at = match self.probes.iter().position(|(c, _)| c == config) {
            Some(at) => at,
            None => {
                let probe = match self.door.probe(config).await {
                    Ok(probe) => Some(probe),
                    Err(e) => {
                        say::no_probe(e);
                        None
                    }
                };
                self.probes.push((config.clone(), probe));
                self.probes.len() - 1
            }
        };
        let probe = self.probes[at].1.as_ref()?;
        let tried = candidates(&object.arn, object.import_id.as_deref());
        Some(probe.read_back(type_name, &object.arn, &tried).await)
    }
}

/// The resource type of a marked object, from the address its `tofu-address` names (none when the marker is hashed or names no resource).
pub fn marked_type(object: &LiveObject) -> Option<String> {
    let resource = resource_of(object.address()?);
    let mut parts = resource.rsplit('.');
    let _name = parts.next()?;
    let type_name = parts.next()?;
    (type_name.contains('_') && !type_name.is_empty()).then(|| type_name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn marked(address: &str) -> LiveObject {
        LiveObject {
            arn: "arn:aws:kms:r:1:key/k".into(),
            import_id: None,
            tags: BTreeMap::from([("tofu-address".into(), address.into())]),
        }
    }

    #[test]
    fn a_markers_type_is_its_addresss() {
        assert_eq!(
            marked_type(&marked("aws_kms_key.a[0]")).as_deref(),
            Some("aws_kms_key")
        );
        assert_eq!(
            marked_type(&marked("module.m[\"x.y\"].aws_s3_bucket.b[\"k.j\"]")).as_deref(),
            Some("aws_s3_bucket")
        );
        assert_eq!(marked_type(&marked("h-0123abcd")), None);
        assert_eq!(marked_type(&marked("module.m")), None);
    }
}
