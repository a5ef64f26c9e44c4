//! The state a plan was made from, as far as `run` reads it: each resource's provider, dependencies and values.

use serde::Deserialize;

use super::change::Mode;
use super::fields::nullable;

/// A plan's `prior_state`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PriorState {
    /// Its values, when it has any.
    #[serde(default)]
    pub values: Option<StateValues>,
}

/// A state's `values`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct StateValues {
    /// The root module.
    #[serde(default, deserialize_with = "nullable")]
    pub root_module: StateModule,
}

/// One module of a state.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct StateModule {
    /// Its resource instances.
    #[serde(default, deserialize_with = "nullable")]
    pub resources: Vec<StateResource>,
    /// Its child modules.
    #[serde(default, deserialize_with = "nullable")]
    pub child_modules: Vec<StateModule>,
}

impl StateModule {
    /// Call `f` on every resource instance of this module and its children.
    pub fn walk<'a>(&'a self, f: &mut impl FnMut(&'a StateResource)) {
        for r in &self.resources {
            f(r);
        }
        for child in &self.child_modules {
            child.walk(f);
        }
    }
}

/// One resource instance object of a state.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct StateResource {
    /// The instance address.
    #[serde(default)]
    pub address: Option<String>,
    /// Managed or data.
    #[serde(default, deserialize_with = "nullable")]
    pub mode: Mode,
    /// The resource type.
    #[serde(default, rename = "type")]
    pub type_name: Option<String>,
    /// The deposed object's key, when this is a deposed object.
    #[serde(default)]
    pub deposed_key: Option<String>,
    /// Its attribute values, as the state holds them.
    #[serde(default)]
    pub values: serde_json::Value,
    /// The provider's source address.
    #[serde(default)]
    pub provider_name: Option<String>,
    /// What it depends on in the state.
    #[serde(default, deserialize_with = "nullable")]
    pub depends_on: Vec<String>,
}
