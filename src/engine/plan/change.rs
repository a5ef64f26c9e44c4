//! One resource instance's planned change, and what terraform's `actions` list means as an [`Operation`].

use serde::Deserialize;
use serde_json::Value;

use super::fields::nullable;
use crate::engine::operation::Operation;

/// Whether a resource is managed or a data source.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// A `resource` block.
    Managed,
    /// A `data` block.
    Data,
    /// Missing, or a mode this program does not know.
    #[default]
    #[serde(other)]
    Unknown,
}

/// Terraform's `actions` list of one change, as the cases it can be.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(from = "Vec<String>")]
pub enum Actions {
    /// Nothing changes: no actions, or only `no-op` and `read`.
    #[default]
    NoChange,
    /// `["create"]`.
    Create,
    /// `["update"]`.
    Update,
    /// `["delete"]`.
    Delete,
    /// `["delete", "create"]`: a replacement that destroys first.
    DeleteThenCreate,
    /// `["create", "delete"]`: a replacement that creates first (`create_before_destroy`).
    CreateThenDelete,
    /// `["forget"]`: removed from the state, the object kept.
    Forget,
    /// Any other list (a change this program does not know by name).
    Other(Vec<String>),
}

impl From<Vec<String>> for Actions {
    fn from(actions: Vec<String>) -> Actions {
        let names: Vec<&str> = actions.iter().map(String::as_str).collect();
        match names.as_slice() {
            ["create"] => Actions::Create,
            ["update"] => Actions::Update,
            ["delete"] => Actions::Delete,
            ["delete", "create"] => Actions::DeleteThenCreate,
            ["create", "delete"] => Actions::CreateThenDelete,
            ["forget"] => Actions::Forget,
            all if all.iter().all(|a| matches!(*a, "no-op" | "read")) => Actions::NoChange,
            _ => Actions::Other(actions),
        }
    }
}

impl Actions {
    /// Whether nothing changes.
    pub fn is_no_change(&self) -> bool {
        *self == Actions::NoChange
    }

    /// The operation these actions make (none when nothing changes); a list not known by name is an update.
    pub fn operation(&self) -> Option<Operation> {
        match self {
            Actions::NoChange => None,
            Actions::Create => Some(Operation::Create),
            Actions::Update | Actions::Other(_) => Some(Operation::Update),
            Actions::Delete => Some(Operation::Delete),
            Actions::DeleteThenCreate | Actions::CreateThenDelete => Some(Operation::Replace),
            Actions::Forget => Some(Operation::Forget),
        }
    }

    /// The provider apply calls these actions make, in order: a destroy-first replacement is a delete then a create; a create-first one makes none the door records (its old object becomes deposed).
    pub fn provider_calls(&self) -> &'static [Operation] {
        match self {
            Actions::Create => &[Operation::Create],
            Actions::Update => &[Operation::Update],
            Actions::Delete => &[Operation::Delete],
            Actions::DeleteThenCreate => &[Operation::Delete, Operation::Create],
            _ => &[],
        }
    }
}

/// The import a change makes (`import` block).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct Importing {
    /// The ID imported, when the plan knows it.
    #[serde(default)]
    pub id: Option<String>,
}

/// A change's values before and after, and what its actions are.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct Change {
    /// What terraform does.
    #[serde(default, deserialize_with = "nullable")]
    pub actions: Actions,
    /// The object before (null: none).
    #[serde(default)]
    pub before: Value,
    /// The object after, its unknown values left out or null (null: none).
    #[serde(default)]
    pub after: Value,
    /// `true` where a value of `after` is known only after the apply.
    #[serde(default)]
    pub after_unknown: Value,
    /// `true` where a value of `before` is sensitive.
    #[serde(default)]
    pub before_sensitive: Value,
    /// `true` where a value of `after` is sensitive.
    #[serde(default)]
    pub after_sensitive: Value,
    /// The import this change makes, if any.
    #[serde(default)]
    pub importing: Option<Importing>,
}

/// One resource instance's key in a plan: a count index or a for_each key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstanceIndex {
    /// A count index, as the plan writes it.
    Int(serde_json::Number),
    /// A for_each key.
    Str(String),
}

impl TryFrom<Value> for InstanceIndex {
    type Error = String;

    fn try_from(v: Value) -> Result<InstanceIndex, String> {
        match v {
            Value::Number(n) => Ok(InstanceIndex::Int(n)),
            Value::String(s) => Ok(InstanceIndex::Str(s)),
            other => Err(format!("an index is a number or a string, not {other}")),
        }
    }
}

impl<'de> Deserialize<'de> for InstanceIndex {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        InstanceIndex::try_from(Value::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

impl InstanceIndex {
    /// The key as JSON, as a state's `index_key` holds it.
    pub fn to_value(&self) -> Value {
        match self {
            InstanceIndex::Int(n) => Value::Number(n.clone()),
            InstanceIndex::Str(s) => Value::String(s.clone()),
        }
    }
}

/// One entry of a plan's `resource_changes`: an instance (or a deposed object of one) and its change.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct ResourceChange {
    /// The instance address.
    pub address: String,
    /// The address it had before a `moved` block moved it.
    #[serde(default)]
    pub previous_address: Option<String>,
    /// Its module instance's address (none in the root module).
    #[serde(default)]
    pub module_address: Option<String>,
    /// Managed or data.
    #[serde(default, deserialize_with = "nullable")]
    pub mode: Mode,
    /// The resource type.
    #[serde(default, rename = "type")]
    pub type_name: Option<String>,
    /// The resource name.
    #[serde(default)]
    pub name: Option<String>,
    /// Its count index or for_each key, if any.
    #[serde(default)]
    pub index: Option<InstanceIndex>,
    /// The deposed object's key, when the change is to a deposed object.
    #[serde(default)]
    pub deposed: Option<String>,
    /// The provider's source address (`registry.terraform.io/hashicorp/aws`).
    #[serde(default)]
    pub provider_name: Option<String>,
    /// The change.
    #[serde(default, deserialize_with = "nullable")]
    pub change: Change,
    /// Why terraform chose the action, when it says.
    #[serde(default)]
    pub action_reason: Option<String>,
}

impl ResourceChange {
    /// The address it moves from, when a `moved` block moves it (not its own address).
    pub fn moved_from(&self) -> Option<&str> {
        self.previous_address
            .as_deref()
            .filter(|p| *p != self.address)
    }

    /// What the plan does to it, as one operation (none: nothing the records see).
    ///
    /// Actions that change nothing still import (`import` block) or move (`moved` block).
    pub fn operation(&self) -> Option<Operation> {
        self.change.actions.operation().or_else(|| {
            if self.change.importing.is_some() {
                Some(Operation::Import)
            } else if self.moved_from().is_some() {
                Some(Operation::Move)
            } else {
                None
            }
        })
    }

    /// The instance address, a deposed object's as `ADDR (deposed KEY)`.
    pub fn full_address(&self) -> String {
        match &self.deposed {
            Some(d) => format!("{} (deposed {d})", self.address),
            None => self.address.clone(),
        }
    }
}
