//! The plan document as a whole: its version, variables, changes, prior state and configuration.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use super::change::{Actions, Change, Mode, ResourceChange};
use super::config::Configuration;
use super::error::PlanJsonError;
use super::fields::nullable;
use super::prior::{PriorState, StateModule};

/// A plan as `terraform show -json PLAN` gives it, typed where `run` reads it.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Plan {
    /// The JSON format's version (`"1.2"`).
    #[serde(default)]
    pub format_version: Option<String>,
    /// The version of terraform that made the plan.
    #[serde(default)]
    pub terraform_version: Option<String>,
    /// Whether the plan can be applied (absent: yes).
    #[serde(default)]
    pub applyable: Option<bool>,
    /// The root module's input variables and the values the plan was made with.
    #[serde(default, deserialize_with = "nullable")]
    pub variables: BTreeMap<String, PlanVariable>,
    /// Every resource instance change, in the plan's order (no-ops and reads included).
    #[serde(default, deserialize_with = "nullable")]
    pub resource_changes: Vec<ResourceChange>,
    /// Each root output's change, by name.
    #[serde(default, deserialize_with = "nullable")]
    pub output_changes: BTreeMap<String, Change>,
    /// The state the plan was made from.
    #[serde(default)]
    pub prior_state: Option<PriorState>,
    /// The configuration the plan was made from.
    #[serde(default, deserialize_with = "nullable")]
    pub configuration: Configuration,
}

/// One input variable's value in a plan.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PlanVariable {
    /// The value (null when none).
    #[serde(default)]
    pub value: serde_json::Value,
}

impl Plan {
    /// Parse `terraform show -json PLAN`'s output.
    pub fn from_slice(bytes: &[u8]) -> Result<Plan, PlanJsonError> {
        // serde reads a struct from a list too; a plan is an object.
        if bytes.trim_ascii_start().first() == Some(&b'[') {
            return Err(PlanJsonError::NotAnObject);
        }
        serde_json::from_slice(bytes).map_err(PlanJsonError::of)
    }

    /// Parse a plan already read as JSON.
    pub fn from_value(value: serde_json::Value) -> Result<Plan, PlanJsonError> {
        if value.is_array() {
            return Err(PlanJsonError::NotAnObject);
        }
        serde_json::from_value(value).map_err(PlanJsonError::of)
    }

    /// Whether the plan can be applied (a plan that does not say can).
    pub fn applyable(&self) -> bool {
        self.applyable.unwrap_or(true)
    }

    /// Every provider the plan names: its changes', its configuration's and its prior state's.
    pub fn providers(&self) -> BTreeSet<String> {
        let mut names: BTreeSet<String> = self
            .resource_changes
            .iter()
            .filter_map(|c| c.provider_name.clone())
            .collect();
        names.extend(
            self.configuration
                .provider_config
                .values()
                .filter_map(|p| p.full_name.clone()),
        );
        if let Some(root) = self.prior_root() {
            root.walk(&mut |r| names.extend(r.provider_name.clone()));
        }
        names
    }

    /// The plain creates of managed resources (not replacements), in the plan's order.
    pub fn creates(&self) -> impl Iterator<Item = &ResourceChange> {
        self.resource_changes
            .iter()
            .filter(|c| c.mode == Mode::Managed && c.change.actions == Actions::Create)
    }

    /// The variables the plan stores a value for (null values left out).
    pub fn variable_values(&self) -> impl Iterator<Item = (&str, &serde_json::Value)> {
        self.variables
            .iter()
            .filter(|(_, v)| !v.value.is_null())
            .map(|(name, v)| (name.as_str(), &v.value))
    }

    /// The root module of the prior state, if the plan has one.
    pub fn prior_root(&self) -> Option<&StateModule> {
        self.prior_state
            .as_ref()
            .and_then(|p| p.values.as_ref())
            .map(|v| &v.root_module)
    }
}
