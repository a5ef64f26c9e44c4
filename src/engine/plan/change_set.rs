//! Everything a plan changes, as the records see it: each resource instance's operation and dependencies, and the root outputs.

use std::collections::BTreeSet;

use super::change::Mode;
use super::document::Plan;
use crate::engine::address::resource_of;
use crate::engine::claims::Wanted;
use crate::engine::layout::Layout;
use crate::engine::operation::Operation;

/// One resource instance a plan changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedChange {
    /// The instance address (a deposed object: `ADDR (deposed KEY)`).
    pub address: String,
    /// What the plan does to it.
    pub operation: Operation,
    /// The address it moves from, when a `moved` block moves it.
    pub moved_from: Option<String>,
    /// What it depends on: its state dependencies and its configuration's references (resource or `module.NAME` addresses).
    pub dependencies: Vec<String>,
}

/// Everything a plan changes: resource instances (with what they depend on) and root outputs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChangeSet {
    /// The resource instance changes, in the plan's order.
    pub resources: Vec<PlannedChange>,
    /// The root outputs whose value changes.
    pub outputs: BTreeSet<String>,
}

impl ChangeSet {
    /// The change set of a plan: its managed changes that do something, and its outputs that change.
    pub fn of(plan: &Plan) -> ChangeSet {
        let config = plan.resource_dependencies();
        let state = plan.state_dependencies();
        let mut set = ChangeSet::default();
        for c in &plan.resource_changes {
            if c.mode == Mode::Data {
                continue;
            }
            let Some(operation) = c.operation() else {
                continue;
            };
            let moved_from = c.moved_from().map(str::to_string);
            let own = resource_of(&c.address);
            let mut deps: BTreeSet<String> = config.get(&own).cloned().unwrap_or_default();
            for from in [Some(c.address.as_str()), moved_from.as_deref()]
                .into_iter()
                .flatten()
            {
                deps.extend(state.get(from).into_iter().flatten().cloned());
            }
            deps.remove(&own);
            set.resources.push(PlannedChange {
                address: c.full_address(),
                operation,
                moved_from,
                dependencies: deps.into_iter().collect(),
            });
        }
        set.outputs = plan
            .output_changes
            .iter()
            .filter(|(_, change)| !change.actions.is_no_change())
            .map(|(name, _)| name.clone())
            .collect();
        set
    }

    /// The record keys of the resource instances it changes (and the addresses they move from).
    pub fn resource_keys(&self, layout: &Layout) -> BTreeSet<String> {
        let mut keys = BTreeSet::new();
        for c in &self.resources {
            keys.insert(layout.resource_key(&c.address).into_string());
            if let Some(from) = &c.moved_from {
                keys.insert(layout.resource_key(from).into_string());
            }
        }
        keys
    }

    /// Every record key it changes: resources, the addresses they move from, and outputs.
    pub fn keys(&self, layout: &Layout) -> BTreeSet<String> {
        let mut keys = self.resource_keys(layout);
        keys.extend(
            self.outputs
                .iter()
                .map(|o| layout.output_key(o).into_string()),
        );
        keys
    }

    /// The claims that cover it: each changed instance, and each address a move leaves.
    pub fn wanted(&self) -> Vec<Wanted> {
        let mut out = Vec::new();
        for c in &self.resources {
            out.push(Wanted {
                address: c.address.clone(),
                operation: c.operation,
                dependencies: c.dependencies.clone(),
            });
            if let Some(from) = &c.moved_from {
                out.push(Wanted {
                    address: from.clone(),
                    operation: Operation::Move,
                    dependencies: c.dependencies.clone(),
                });
            }
        }
        out
    }
}
