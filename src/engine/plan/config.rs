//! The configuration a plan was made from: its modules, resources, provider configurations and variables.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::change::Mode;
use super::fields::{nullable, present};

/// A plan's `configuration`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Configuration {
    /// Each provider configuration, by its key (`aws.east`, `module.m:aws`).
    #[serde(default, deserialize_with = "nullable")]
    pub provider_config: BTreeMap<String, ProviderConfig>,
    /// The root module.
    #[serde(default, deserialize_with = "nullable")]
    pub root_module: ConfigModule,
}

/// One provider configuration.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ProviderConfig {
    /// The provider's local name (`aws`).
    #[serde(default)]
    pub name: Option<String>,
    /// The provider's source address (`registry.terraform.io/hashicorp/aws`).
    #[serde(default)]
    pub full_name: Option<String>,
    /// Its alias, if any.
    #[serde(default)]
    pub alias: Option<String>,
    /// The module it is configured in (none or empty: the root).
    #[serde(default)]
    pub module_address: Option<String>,
}

/// One module of the configuration.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ConfigModule {
    /// Its resources (data sources included).
    #[serde(default, deserialize_with = "nullable")]
    pub resources: Vec<ConfigResource>,
    /// The modules it calls, by call name.
    #[serde(default, deserialize_with = "nullable")]
    pub module_calls: BTreeMap<String, ModuleCall>,
    /// Its input variables, by name.
    #[serde(default, deserialize_with = "nullable")]
    pub variables: BTreeMap<String, ConfigVariable>,
}

impl ConfigModule {
    /// The managed resource `type_name.name` of this module.
    pub fn managed(&self, type_name: &str, name: &str) -> Option<&ConfigResource> {
        self.resources.iter().find(|r| {
            r.mode == Mode::Managed
                && r.type_name.as_deref() == Some(type_name)
                && r.name.as_deref() == Some(name)
        })
    }

    /// The module a chain of call names leads to from this one.
    pub fn descend<'a>(&self, calls: impl IntoIterator<Item = &'a str>) -> Option<&ConfigModule> {
        let mut at = self;
        for call in calls {
            at = &at.module_calls.get(call)?.module;
        }
        Some(at)
    }
}

/// One module call.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ModuleCall {
    /// The module it calls.
    #[serde(default, deserialize_with = "nullable")]
    pub module: ConfigModule,
}

/// One input variable's declaration.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ConfigVariable {
    /// Its default, when it declares one (`Some(Null)` for `default = null`).
    #[serde(default, deserialize_with = "present")]
    pub default: Option<Value>,
}

/// One resource (or data source) block of the configuration.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ConfigResource {
    /// Its address within its module (`aws_vpc.v`).
    #[serde(default)]
    pub address: Option<String>,
    /// Managed or data.
    #[serde(default, deserialize_with = "nullable")]
    pub mode: Mode,
    /// The resource type.
    #[serde(default, rename = "type")]
    pub type_name: Option<String>,
    /// The resource name.
    #[serde(default)]
    pub name: Option<String>,
    /// The key of its provider configuration in [`Configuration::provider_config`].
    #[serde(default)]
    pub provider_config_key: Option<String>,
    /// Its arguments' expressions (the provider's schema: kept as JSON).
    #[serde(default)]
    pub expressions: Value,
    /// Its `count` expression.
    #[serde(default)]
    pub count_expression: Value,
    /// Its `for_each` expression.
    #[serde(default)]
    pub for_each_expression: Value,
    /// Its provisioners.
    #[serde(default, deserialize_with = "nullable")]
    pub provisioners: Vec<Provisioner>,
    /// Its `depends_on`.
    #[serde(default, deserialize_with = "nullable")]
    pub depends_on: Vec<String>,
}

impl ConfigResource {
    /// Whether it has a provisioner that runs at create time.
    pub fn provisioned(&self) -> bool {
        self.provisioners
            .iter()
            .any(|p| p.when.as_deref() != Some("destroy"))
    }
}

/// One provisioner block.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Provisioner {
    /// Its type (`local-exec`).
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// When it runs, when the plan says (`destroy`).
    #[serde(default)]
    pub when: Option<String>,
    /// Its arguments' expressions.
    #[serde(default)]
    pub expressions: Value,
}
