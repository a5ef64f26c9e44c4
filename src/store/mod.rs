//! Record stores: where records live, and the one atomic conditional request each write is.
//!
//! One module or folder per kind (`local`, `s3/`, `azure/`, `gcs/`); what they share is
//! written once: the [`RecordStore`] trait and its values ([`record_store`]), listings followed
//! to their end ([`listing`]), the conditional put every write goes through ([`conditional`]),
//! the [`StoreError`] they raise, key segments ([`key`]), settings and their parsers
//! ([`settings`]), what a kind's settings build ([`open`](mod@open): its store and its write
//! guard, dispatched once in [`StoreSettings::config`]), the write guard ([`guard`]), the one
//! retry policy of every kind ([`retry`], [`backoff`]), HTTP client helpers of the cloud kinds
//! ([`http`], [`unexpected`]) and the traced wrapper every opened store is wrapped in
//! ([`traced`]). This file only declares and re-exports: each child imports its siblings by
//! their own path, so no file imports its parent.

pub mod azure;
pub mod backoff;
pub mod call;
pub mod conditional;
pub mod error;
pub mod gcs;
pub mod guard;
pub mod http;
pub mod key;
pub mod listing;
pub mod local;
pub mod open;
pub mod private_file;
pub mod private_folder;
pub mod record_store;
pub mod retry;
pub mod s3;
pub mod settings;
pub mod traced;
pub mod unexpected;
pub mod versions;

pub use call::StoreCall;
pub use conditional::put_conditional;
pub use error::{StoreError, StoreName};
pub use guard::{GuardError, SafetyUnchecked, UnsafeRecordStore, WriteGuard};
pub use listing::{list_all, list_range};
pub use open::{Opened, StoreConfig};
pub use record_store::{
    Chunks, Conflict, DynStore, KeyRange, Listed, Page, Precondition, RangeStart, RecordStore,
    StoreTime, Stored, Streamed, Version, WriteOutcome, within,
};
pub use settings::store_settings::{guard_for, open};
pub use settings::{SettingError, SettingsSource, StoreKind, StoreSettings};
pub use versions::{History, ObjectVersion, VersionKind, VersionListing};
