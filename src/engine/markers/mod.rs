//! Live markers: the `tofu-estate` and `tofu-address` tags each resource carries from its create call on.

use serde_json::{Map, Value};
use thiserror::Error;

use crate::engine::digest::sha256_hex;

pub mod unrecorded;

/// The tag naming the estate that owns a resource.
pub const ESTATE_TAG: &str = "tofu-estate";
/// The tag naming a resource's address in the configuration.
pub const ADDRESS_TAG: &str = "tofu-address";

/// A provider family and where it keeps tags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// AWS: `tags`, any value up to 256 characters.
    Aws,
    /// Google: `labels`, lowercase values of at most 63 characters.
    Google,
    /// Azure: `tags`.
    Azure,
    /// Kubernetes: `metadata.labels`, label values of at most 63 characters.
    Kubernetes,
}

impl Family {
    /// The family of a provider source or resource type.
    pub fn of(provider: &str, resource_type: &str) -> Option<Family> {
        let name = provider.rsplit('/').next().unwrap_or(provider);
        let by_type = resource_type.split('_').next().unwrap_or("");
        match (name, by_type) {
            ("aws", _) | (_, "aws") => Some(Family::Aws),
            ("google" | "google-beta", _) | (_, "google") => Some(Family::Google),
            ("azurerm", _) | (_, "azurerm") => Some(Family::Azure),
            ("kubernetes", _) | (_, "kubernetes") => Some(Family::Kubernetes),
            _ => None,
        }
    }

    /// The attribute path the markers go into.
    pub fn attribute(self) -> &'static str {
        match self {
            Family::Aws | Family::Azure => "tags",
            Family::Google => "labels",
            Family::Kubernetes => "metadata.labels",
        }
    }

    /// A marker value as this family can hold it.
    pub fn encode(self, value: &str) -> String {
        let valid = match self {
            Family::Aws | Family::Azure => value.chars().count() <= 256,
            Family::Google => {
                value.len() <= 63
                    && value.chars().all(|c| {
                        c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_'
                    })
            }
            Family::Kubernetes => kubernetes_label_value(value),
        };
        if valid {
            value.to_string()
        } else {
            encoded(value)
        }
    }
}

/// The instance address a record names (`ADDR (deposed KEY)` is the object of `ADDR`): the address its object's marker carries.
pub fn instance_address(record_address: &str) -> &str {
    match record_address.find(" (deposed ") {
        Some(at) => &record_address[..at],
        None => record_address,
    }
}

/// The form of a value a family cannot hold as it is: `h-` and the first 40 hex digits of its SHA-256.
pub fn encoded(value: &str) -> String {
    format!("h-{}", &sha256_hex(value.as_bytes())[..40])
}

/// Kubernetes label value rules: at most 63 characters, alphanumeric at both ends, `-_.` inside.
pub fn kubernetes_label_value(v: &str) -> bool {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    v.is_empty()
        || (v.len() <= 63
            && v.chars().all(ok)
            && v.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && v.chars().last().is_some_and(|c| c.is_ascii_alphanumeric()))
}

/// Types whose create call takes no tags: they are tagged by the next call.
const TAG_AFTER_CREATE: &[(&str, &str)] = &[
    ("aws_default_vpc", "ec2:CreateTags on the VPC it adopts"),
    (
        "aws_default_subnet",
        "ec2:CreateTags on the subnet it adopts",
    ),
    (
        "aws_default_security_group",
        "ec2:CreateTags on the security group it adopts",
    ),
    (
        "aws_default_route_table",
        "ec2:CreateTags on the route table it adopts",
    ),
    (
        "aws_default_network_acl",
        "ec2:CreateTags on the network ACL it adopts",
    ),
];

/// Where the markers went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Timing {
    /// They ride the create call.
    AtCreate,
    /// The create takes none: make this call right after it.
    AfterCreate(String),
    /// The family carries no markers.
    NotMarked,
}

/// A planned create's config with its markers.
#[derive(Clone, Debug, PartialEq)]
pub struct Injected {
    /// The config to create with.
    pub config: Value,
    /// When the markers are written.
    pub timing: Timing,
    /// The attribute path they went into.
    pub attribute: &'static str,
}

/// Why markers could not be injected.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum MarkerError {
    /// The user's own tag says something else than the marker must.
    #[error(
        "{address}: the configuration sets {attribute}[\"{key}\"] = {user:?}, but the live marker must be {marker:?}; remove it from the configuration (the plugin sets it). Nothing was created."
    )]
    Contradiction {
        /// The resource.
        address: String,
        /// The attribute path.
        attribute: &'static str,
        /// The marker key.
        key: &'static str,
        /// The user's value.
        user: String,
        /// The marker's value.
        marker: String,
    },
    /// A config that is not an object where tags must go.
    #[error("{address}: cannot put markers into {attribute}: {reason}")]
    Shape {
        /// The resource.
        address: String,
        /// The attribute path.
        attribute: &'static str,
        /// What is wrong.
        reason: String,
    },
}

fn merge(
    tags: &mut Map<String, Value>,
    markers: [(&'static str, String); 2],
    address: &str,
    attribute: &'static str,
) -> Result<(), MarkerError> {
    for (key, value) in markers {
        match tags.get(key) {
            Some(Value::String(user)) if *user != value => {
                return Err(MarkerError::Contradiction {
                    address: address.to_string(),
                    attribute,
                    key,
                    user: user.clone(),
                    marker: value,
                });
            }
            Some(Value::Null) | None => {
                tags.insert(key.to_string(), Value::String(value));
            }
            Some(Value::String(_)) => {}
            Some(other) => {
                return Err(MarkerError::Contradiction {
                    address: address.to_string(),
                    attribute,
                    key,
                    user: other.to_string(),
                    marker: value,
                });
            }
        }
    }
    Ok(())
}

fn tag_map<'a>(
    obj: &'a mut Map<String, Value>,
    name: &str,
    address: &str,
    attribute: &'static str,
) -> Result<&'a mut Map<String, Value>, MarkerError> {
    let slot = obj
        .entry(name.to_string())
        .or_insert(Value::Object(Map::new()));
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut().ok_or_else(|| MarkerError::Shape {
        address: address.to_string(),
        attribute,
        reason: format!("`{name}` is not a map"),
    })
}

/// Merge the markers of `address` in `estate` into a planned create's `config`, keeping the user's own tags.
pub fn inject(
    provider: &str,
    resource_type: &str,
    address: &str,
    estate: &str,
    mut config: Value,
) -> Result<Injected, MarkerError> {
    let Some(family) = Family::of(provider, resource_type) else {
        return Ok(Injected {
            config,
            timing: Timing::NotMarked,
            attribute: "",
        });
    };
    let attribute = family.attribute();
    if let Some((_, follow_up)) = TAG_AFTER_CREATE.iter().find(|(t, _)| *t == resource_type) {
        return Ok(Injected {
            config,
            timing: Timing::AfterCreate(format!(
                "tag it right after its create: {follow_up}, with {ESTATE_TAG}={} and {ADDRESS_TAG}={}",
                family.encode(estate),
                family.encode(address)
            )),
            attribute,
        });
    }
    let markers = [
        (ESTATE_TAG, family.encode(estate)),
        (ADDRESS_TAG, family.encode(address)),
    ];
    let shape = |reason: &str| MarkerError::Shape {
        address: address.to_string(),
        attribute,
        reason: reason.to_string(),
    };
    let obj = config
        .as_object_mut()
        .ok_or_else(|| shape("the config is not an object"))?;
    match family {
        Family::Aws | Family::Azure => merge(
            tag_map(obj, "tags", address, attribute)?,
            markers,
            address,
            attribute,
        )?,
        Family::Google => merge(
            tag_map(obj, "labels", address, attribute)?,
            markers,
            address,
            attribute,
        )?,
        Family::Kubernetes => {
            // metadata is a nested block: an object, or a list holding one.
            let meta = obj
                .entry("metadata".to_string())
                .or_insert(Value::Array(vec![Value::Object(Map::new())]));
            let meta_obj = match meta {
                Value::Array(items) => {
                    if items.is_empty() {
                        items.push(Value::Object(Map::new()));
                    }
                    items[0]
                        .as_object_mut()
                        .ok_or_else(|| shape("metadata[0] is not an object"))?
                }
                Value::Object(m) => m,
                _ => return Err(shape("metadata is neither a block nor a list of one")),
            };
            merge(
                tag_map(meta_obj, "labels", address, attribute)?,
                markers,
                address,
                attribute,
            )?;
        }
    }
    Ok(Injected {
        config,
        timing: Timing::AtCreate,
        attribute,
    })
}

/// The estate a live object's state says owns it, from its tags or labels.
pub fn owner_of(instance: &Value) -> Option<String> {
    let attrs = instance.get("attributes")?;
    for path in [
        &["tags"][..],
        &["tags_all"],
        &["labels"],
        &["metadata", "0", "labels"],
    ] {
        let mut v = attrs;
        let mut found = true;
        for step in path {
            v = match v {
                Value::Array(a) => match step.parse::<usize>().ok().and_then(|i| a.get(i)) {
                    Some(x) => x,
                    None => {
                        found = false;
                        break;
                    }
                },
                other => match other.get(*step) {
                    Some(x) => x,
                    None => {
                        found = false;
                        break;
                    }
                },
            };
        }
        if found && let Some(owner) = v.get(ESTATE_TAG).and_then(Value::as_str) {
            return Some(owner.to_string());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn aws_keeps_user_tags() {
        let out = inject(
            "registry.terraform.io/hashicorp/aws",
            "aws_instance",
            "aws_instance.web[\"a\"]",
            "prod",
            json!({"ami": "x", "tags": {"team": "db"}}),
        )
        .unwrap();
        assert_eq!(out.timing, Timing::AtCreate);
        assert_eq!(
            out.config["tags"],
            json!({"team": "db", "tofu-estate": "prod", "tofu-address": "aws_instance.web[\"a\"]"})
        );
    }

    #[test]
    fn contradicting_user_value_is_refused() {
        let e = inject(
            "hashicorp/aws",
            "aws_s3_bucket",
            "aws_s3_bucket.b",
            "prod",
            json!({"tags": {"tofu-estate": "dev"}}),
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("tofu-estate") && e.to_string().contains("\"dev\""),
            "{e}"
        );
    }

    #[test]
    fn kubernetes_labels_are_encoded_when_invalid() {
        let out = inject(
            "hashicorp/kubernetes",
            "kubernetes_config_map",
            "kubernetes_config_map.c[\"x y\"]",
            "prod",
            json!({"metadata": [{"name": "c", "labels": {"app": "a"}}]}),
        )
        .unwrap();
        let labels = &out.config["metadata"][0]["labels"];
        assert_eq!(labels["app"], "a");
        assert_eq!(labels["tofu-estate"], "prod");
        let v = labels["tofu-address"].as_str().unwrap();
        assert!(
            v.starts_with("h-") && v.len() == 42 && kubernetes_label_value(v),
            "{v}"
        );
        let plain = inject(
            "hashicorp/kubernetes",
            "kubernetes_namespace",
            "kubernetes_namespace.ns",
            "prod",
            json!({"metadata": [{}]}),
        )
        .unwrap();
        assert_eq!(
            plain.config["metadata"][0]["labels"]["tofu-address"],
            "kubernetes_namespace.ns"
        );
    }

    #[test]
    fn google_labels_and_azure_tags() {
        let g = inject(
            "hashicorp/google",
            "google_storage_bucket",
            "google_storage_bucket.b",
            "Prod.EU",
            json!({"labels": null}),
        )
        .unwrap();
        assert_eq!(g.attribute, "labels");
        assert!(
            g.config["labels"]["tofu-estate"]
                .as_str()
                .unwrap()
                .starts_with("h-")
        );
        let a = inject(
            "hashicorp/azurerm",
            "azurerm_resource_group",
            "azurerm_resource_group.rg",
            "prod",
            json!({}),
        )
        .unwrap();
        assert_eq!(a.config["tags"]["tofu-estate"], "prod");
    }

    #[test]
    fn types_tagged_after_create_say_so() {
        let out = inject(
            "hashicorp/aws",
            "aws_default_vpc",
            "aws_default_vpc.d",
            "prod",
            json!({}),
        )
        .unwrap();
        assert!(matches!(out.timing, Timing::AfterCreate(ref f) if f.contains("ec2:CreateTags")));
    }

    #[test]
    fn owner_is_read_from_tags_or_labels() {
        assert_eq!(
            owner_of(&json!({"attributes": {"tags": {"tofu-estate": "a"}}})),
            Some("a".into())
        );
        assert_eq!(
            owner_of(&json!({"attributes": {"metadata": [{"labels": {"tofu-estate": "k"}}]}})),
            Some("k".into())
        );
        assert_eq!(owner_of(&json!({"attributes": {"id": "x"}})), None);
    }
}
