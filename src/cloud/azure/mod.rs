//! Azure beyond its record store: the per-estate access policy.

pub mod policy;
