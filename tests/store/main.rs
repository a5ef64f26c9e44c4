//! The record stores: each kind's conditional writes, listings and safety checks, faults and races at the wire, and the settings that name a store.

mod config;
mod faults;
mod listing_after;
mod log_lifecycle;
mod races;
mod settings_sources;
mod store_behaviour;
mod store_safety;
