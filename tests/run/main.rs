//! `choudoufu-live run` with the real terraform: concurrent applies, claims, markers, outages, saved plans, migrations, the terraform shim.

mod aws_door;
mod cone;
mod cone_saved;
mod door;
mod door_aliases;
mod door_crash;
mod door_guard;
mod door_markers;
mod door_pairs;
mod door_races;
mod door_records;
mod door_resume;
mod door_store_away;
mod migrate;
mod own_provider;
mod run_claims;
mod run_deletes;
mod run_markers;
mod run_outage;
mod run_store_refused;
mod run_terraform;
mod saved_plans;
mod shim;
mod state_push;
