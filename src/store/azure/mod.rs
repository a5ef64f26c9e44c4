//! The Azure Blob Storage record store: Put Blob with `If-None-Match: *` / `If-Match: <ETag>`,
//! Delete Blob with `If-Match: <ETag>`.
//!
//! Reads and listings go through the `object_store` crate, which also brings the standard
//! Azure credential chain and Shared Key signing; its own retry is configured from the
//! store's [`RetryPolicy`](crate::store::retry::RetryPolicy). The conditional put and delete
//! are direct Blob requests (`rest.rs`), authorised as `object_store` authorises its own and tried under the same
//! policy: `object_store` cannot send a condition with a delete, and does not try a
//! conditional put again when its answer was lost, which `store::put_conditional`
//! recognises as landed.
//!
//! `client.rs` holds the store type and the requests its calls are made of, `store.rs` its
//! record-store calls and the settings that build it and its guard.

mod client;
mod rest;
pub mod safety;
pub mod settings;
mod store;
mod versions;

pub use client::AzureStore;
pub use settings::{AzureSettings, ConnectionString, parse_connection_string};
