//! AWS: live objects found by their `tofu-estate` / `tofu-address` tags, and the per-estate IAM policy.

pub mod iam;
pub mod markers;
