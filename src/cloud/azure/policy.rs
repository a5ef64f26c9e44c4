//! The per-estate access policy of the azurerm kind: an Azure role assignment condition on the
//! estate's blob prefix.
//!
//! Not proven against a peer: azurite evaluates no role assignments, so the tests check the
//! document's shape only, and `iam policy` says so when it prints it
//! ([`crate::cloud::POLICY_NOT_PROVEN`]).

use serde_json::{Value, json};

use crate::engine::layout::{EstateName, Layout};

/// The built-in Azure role the condition narrows.
pub const AZURE_ROLE: &str = "Storage Blob Data Contributor";
const BLOBS: &str = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs";
const CONTAINERS: &str = "Microsoft.Storage/storageAccounts/blobServices/containers";

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_condition_names_the_estate_prefix_and_nothing_wider() {
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
    }
}
