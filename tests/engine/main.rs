//! The engine over a store: sessions, claims, the read image and cache, the state format and its fixtures.

mod claims_engine;
mod delete_rule;
mod properties;
mod read_cache;
mod read_image;
mod refreshed;
mod session;
mod state_fixtures;
mod write_log;
