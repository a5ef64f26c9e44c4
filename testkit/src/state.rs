//! State documents for tests: terraform_data resources in terraform's state v4 shape.

use serde_json::{Value, json};

/// The builtin provider's configuration address, as terraform's state names it.
pub const TERRAFORM_PROVIDER: &str = "provider[\"terraform.io/builtin/terraform\"]";

/// A `terraform_data` resource named `name` with one instance of `attributes`.
pub fn terraform_data(name: &str, attributes: Value) -> Value {
    json!({
        "mode": "managed", "type": "terraform_data", "name": name,
        "provider": TERRAFORM_PROVIDER,
        "instances": [{"schema_version": 0, "attributes": attributes, "sensitive_attributes": []}]
    })
}

/// A string input as terraform_data holds it: `{"value": v, "type": "string"}`.
pub fn input(value: &str) -> Value {
    json!({"value": value, "type": "string"})
}

/// A state v4 document of `resources`, as terraform `version` writes it, with `lineage`.
pub fn document(version: &str, lineage: &str, resources: Vec<Value>) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "version": 4, "terraform_version": version, "serial": 1, "lineage": lineage,
        "outputs": {}, "resources": resources
    }))
    .unwrap_or_default()
}

/// A document of `terraform_data` resources named and valued as given, each with id `id-<name>`.
pub fn doc(lineage: &str, resources: &[(&str, &str)]) -> Vec<u8> {
    let rs = resources
        .iter()
        .map(|(n, v)| terraform_data(n, json!({"id": format!("id-{n}"), "input": input(v)})))
        .collect();
    document("1.11.4", lineage, rs)
}

/// The same from a map of names to values.
pub fn doc_of(lineage: &str, values: &std::collections::BTreeMap<String, String>) -> Vec<u8> {
    let pairs: Vec<(&str, &str)> = values
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    doc(lineage, &pairs)
}
