//! Terraform's plan (`terraform show -json PLAN`), parsed once into types: its changes, configuration, prior state, outputs and variables.
//!
//! The plan's structure is typed; attribute values (the provider's objects: `before`,
//! `after`, `after_unknown`, expressions) stay [`serde_json::Value`]. Fields terraform adds
//! are ignored, and a field that is missing or null takes its default, so only a plan whose
//! structure is wrong (a list that is not a list, a change without an address) is refused,
//! by a [`PlanJsonError`]. Everything `run` derives from a plan is derived here, each once:
//! the change set ([`ChangeSet`]), the operation of each change ([`Actions`]), the
//! providers it names and its creates.

mod change;
mod change_set;
mod config;
mod dependencies;
mod document;
mod error;
mod fields;
mod prior;

pub use change::{Actions, Change, Importing, InstanceIndex, Mode, ResourceChange};
pub use change_set::{ChangeSet, PlannedChange};
pub use config::{
    ConfigModule, ConfigResource, ConfigVariable, Configuration, ModuleCall, ProviderConfig,
    Provisioner,
};
pub use document::{Plan, PlanVariable};
pub use error::PlanJsonError;
pub use prior::{PriorState, StateModule, StateResource, StateValues};

#[cfg(test)]
mod tests;
