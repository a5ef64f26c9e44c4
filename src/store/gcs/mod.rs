//! The Google Cloud Storage record store, on the JSON API: uploads with
//! `ifGenerationMatch=0` (create) or `ifGenerationMatch=<generation>` (update), deletes
//! with `ifGenerationMatch=<generation>`. A record's version is its generation.
//!
//! Credentials come from the `object_store` crate's standard Google chain (a service
//! account key, `GOOGLE_APPLICATION_CREDENTIALS`, application default credentials, the
//! metadata server); the requests themselves are direct JSON API calls, because
//! `object_store`'s GCS client speaks the XML API, whose listings carry no generation and
//! whose deletes it sends without a precondition.
//!
//! `client.rs` holds the store type and the requests its calls are made of, `store.rs` its
//! record-store calls and the settings that build it and its guard.

mod client;
pub mod safety;
pub mod settings;
mod store;
mod versions;

pub use client::{DEFAULT_ENDPOINT, GcsStore};
pub use settings::GcsSettings;
