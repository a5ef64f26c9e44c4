//! The name this crate reports itself under.

/// The instrumentation scope and default `service.name`.
pub const SERVICE: &str = "choudoufu-live";
