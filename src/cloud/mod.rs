//! What is specific to one cloud beyond its record store: listing live objects by their markers, and access policies.

pub mod aws;
