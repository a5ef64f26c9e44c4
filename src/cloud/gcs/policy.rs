//! The per-estate access policy of the gcs kind: an IAM condition on the object name prefix.
//!
//! Not proven against a peer: gcp-storage-emulator stores a bucket's IAM policy and enforces
//! nothing, so the tests check the document's shape only, and `iam policy` says so when it
//! prints it ([`crate::cloud::POLICY_NOT_PROVEN`]).

use serde_json::{Value, json};

use crate::engine::layout::{EstateName, Layout};

/// The GCS role the condition narrows.
pub const GCS_ROLE: &str = "roles/storage.objectUser";
/// The GCS role that reads the bucket's safety settings (bucket metadata only, no objects).
pub const GCS_CHECK_ROLE: &str = "roles/storage.bucketViewer";

/// The estate's record prefix, e.g. `tofu-records/prod/`.
fn prefix(estate: &EstateName) -> String {
    Layout::new(estate.clone()).prefix()
}

/// The GCS IAM condition expression: the bucket itself (listing, which IAM cannot narrow by
/// prefix) and the objects under the estate's prefix.
pub fn gcs_expression(estate: &EstateName, bucket: &str) -> String {
    format!(
        "resource.name == \"projects/_/buckets/{bucket}\" || resource.name.startsWith(\"projects/_/buckets/{bucket}/objects/{}\")",
        prefix(estate)
    )
}

/// The conditional IAM binding (policy version 3) for one estate's role.
pub fn gcs_binding(estate: &EstateName, bucket: &str) -> Value {
    json!({
        "role": GCS_ROLE,
        "members": ["MEMBER"],
        "condition": {
            "title": format!("choudoufu-live-{estate}"),
            "description": format!("choudoufu-live estate {estate}: its records only"),
            "expression": gcs_expression(estate, bucket),
        }
    })
}

/// The `gcloud` commands that add the bindings.
pub fn gcs_commands(estate: &EstateName, bucket: &str) -> [String; 2] {
    [
        format!(
            "gcloud storage buckets add-iam-policy-binding gs://{bucket} --member=MEMBER --role={GCS_ROLE} --condition='title=choudoufu-live-{estate},expression={}'",
            gcs_expression(estate, bucket)
        ),
        format!(
            "gcloud storage buckets add-iam-policy-binding gs://{bucket} --member=MEMBER --role={GCS_CHECK_ROLE}"
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_condition_names_the_estate_prefix_and_nothing_wider() {
        let prod = EstateName::parse("prod").unwrap();
        let gcs = gcs_expression(&prod, "acme");
        assert!(
            gcs.ends_with("startsWith(\"projects/_/buckets/acme/objects/tofu-records/prod/\")")
        );
        assert!(!gcs.contains(','), "gcloud's --condition splits on commas");
    }
}
