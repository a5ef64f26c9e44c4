//! Where records are kept: the store kinds, and the one settings parser per kind that every source feeds.
//!
//! Settings reach the program three ways: the `record_store` block of the live block
//! (`config`), the tfplugin6 state store's attributes, and the `choudoufu.live.v1`
//! `StoreSettings` message. Each of those is a [`SettingsSource`]; each kind reads its
//! settings from a source with one function next to its store, so the three give the same
//! settings and the same errors for the same input.

pub mod error;
pub mod kind;
pub mod source;
pub mod store_settings;

pub use error::SettingError;
pub use kind::{STORE_KINDS, StoreKind};
pub use source::SettingsSource;
pub use store_settings::StoreSettings;
