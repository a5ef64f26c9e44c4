//! The per-estate access policy of the azurerm and gcs kinds: an Azure role assignment
//! condition on the estate's blob prefix, and a GCS IAM condition on the object name prefix.
//!
//! Neither is proven against a peer: azurite and gcp-storage-emulator evaluate no role
//! assignments or IAM conditions (the emulator stores a bucket's IAM policy and enforces
//! nothing), so the tests check the documents' shape only. `iam policy` says so when it
//! prints them.

use serde_json::{Value, json};

use crate::engine::layout::{EstateName, Layout};

/// The built-in Azure role the condition narrows.
pub const AZURE_ROLE: &str = "Storage Blob Data Contributor";
/// The GCS role the condition narrows.
pub const GCS_ROLE: &str = "roles/storage.objectUser";
/// The GCS role that reads the bucket's safety settings (bucket metadata only, no objects).
pub const GCS_CHECK_ROLE: &str = "roles/storage.bucketViewer";

const BLOBS: &str = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs";
const CONTAINERS: &str = "Microsoft.Storage/storageAccounts/blobServices/containers";

/// Why these are not proven, as `iam policy` prints it.
pub const NOT_PROVEN: &str = "not proven against a peer: azurite and gcp-storage-emulator evaluate no role assignment conditions or IAM conditions; check it in your own account before relying on it (see docs/operating.md)";

/// The estate's record prefix, e.g. `tofu-records/prod/`.
fn prefix(estate: &EstateName) -> String {
    Layout::new(estate.clone()).prefix()
}

/// The Azure role assignment condition (version 2.0): blob reads, writes and deletes only
/// under the estate's prefix in `container`, and listings only with a prefix inside it.
pub fn azure_condition(estate: &EstateName, container: &str) -> String {
    let p = prefix(estate);
    format!(
        "(\n (\n  !(ActionMatches{{'{BLOBS}/read'}} AND NOT SubOperationMatches{{'Blob.List'}})\n  AND\n  !(ActionMatches{{'{BLOBS}/write'}})\n  AND\n  !(ActionMatches{{'{BLOBS}/add/action'}})\n  AND\n  !(ActionMatches{{'{BLOBS}/delete'}})\n )\n OR\n (\n  @Resource[{CONTAINERS}:name] StringEquals '{container}'\n  AND\n  @Resource[{BLOBS}:path] StringStartsWith '{p}'\n )\n)\nAND\n(\n (\n  !(ActionMatches{{'{BLOBS}/read'}} AND SubOperationMatches{{'Blob.List'}})\n )\n OR\n (\n  @Resource[{CONTAINERS}:name] StringEquals '{container}'\n  AND\n  @Request[{BLOBS}:prefix] StringStartsWith '{p}'\n )\n)"
    )
}

/// The container's ARM scope, with placeholders for what only the account's owner knows.
pub fn azure_scope(account: &str, container: &str) -> String {
    format!(
        "/subscriptions/SUBSCRIPTION_ID/resourceGroups/RESOURCE_GROUP/providers/Microsoft.Storage/storageAccounts/{account}/blobServices/default/containers/{container}"
    )
}

/// The role assignment as JSON: role, scope, condition.
pub fn azure_assignment(estate: &EstateName, account: &str, container: &str) -> Value {
    json!({
        "role": AZURE_ROLE,
        "scope": azure_scope(account, container),
        "conditionVersion": "2.0",
        "condition": azure_condition(estate, container),
        "description": format!("choudoufu-live estate {estate}: its records only"),
    })
}

/// The `az` command that makes the assignment.
pub fn azure_command(estate: &EstateName, account: &str, container: &str) -> String {
    let condition = azure_condition(estate, container).replace('\n', " ");
    format!(
        "az role assignment create --assignee PRINCIPAL_ID --role \"{AZURE_ROLE}\" --scope \"{}\" --condition-version 2.0 --condition \"{condition}\"",
        azure_scope(account, container)
    )
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
    fn conditions_name_the_estate_prefix_and_nothing_wider() {
        let prod = EstateName::parse("prod").unwrap();
        let az = azure_condition(&prod, "records");
        assert_eq!(
            az.matches("StringStartsWith 'tofu-records/prod/'").count(),
            2
        );
        assert_eq!(az.matches("StringEquals 'records'").count(), 2);
        assert!(!az.contains("'tofu-records/'"));
        for action in ["read", "write", "add/action", "delete"] {
            assert!(az.contains(&format!("{BLOBS}/{action}'")), "{action}");
        }
        assert_eq!(az.matches('(').count(), az.matches(')').count());
        let gcs = gcs_expression(&prod, "acme");
        assert!(
            gcs.ends_with("startsWith(\"projects/_/buckets/acme/objects/tofu-records/prod/\")")
        );
        assert!(!gcs.contains(','), "gcloud's --condition splits on commas");
    }
}
