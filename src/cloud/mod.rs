//! What is specific to one cloud beyond its record store: listing live objects by their markers, and access policies.

pub mod aws;
pub mod azure;
pub mod gcs;

/// Why the azurerm and gcs policies are not proven, as `iam policy` prints it.
pub const POLICY_NOT_PROVEN: &str = "not proven against a peer: azurite and gcp-storage-emulator evaluate no role assignment conditions or IAM conditions; check it in your own account before relying on it (see docs/operating.md)";
