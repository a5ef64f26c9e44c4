//! The S3 record store: `PutObject` with `If-None-Match: *` / `If-Match`, `DeleteObject` with `If-Match`.
//!
//! `bucket` holds the bucket's safety: the settings checked before a run's first write, and
//! `bucket setup`.
//!
//! `client.rs` holds the store type and the requests its calls are made of, `store.rs` its
//! record-store calls and the settings that build it and its guard, `clock.rs` the store's time
//! (a `Date` read by an interceptor), `unreached.rs` the SDK interceptor that gives up early on a store no try could connect to.

mod agent;
pub mod bucket;
mod client;
mod clock;
pub mod settings;
mod store;
mod unreached;
mod versions;

pub use client::{
    ATTEMPT_TIMEOUT_ENV, DEFAULT_ATTEMPT_TIMEOUT, MAX_ATTEMPTS, MAX_ATTEMPTS_ENV, S3Store, policy,
};
pub use settings::S3Settings;
