//! `choudoufu-live run` with the real terraform: concurrent applies, claims, markers, outages, saved plans, migrations.

mod door;
mod migrate;
mod run_claims;
mod run_markers;
mod run_outage;
mod run_terraform;
mod saved_plans;
