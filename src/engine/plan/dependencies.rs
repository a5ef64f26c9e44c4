//! What each planned resource depends on: its configuration's references and `depends_on`, and its prior state's dependencies.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::config::ConfigModule;
use super::document::Plan;
use crate::engine::address::referenced;

/// Every `references` list in an expression tree.
fn collect_references(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                if k == "references"
                    && let Some(refs) = v.as_array()
                {
                    out.extend(refs.iter().filter_map(|r| r.as_str().map(str::to_string)));
                } else {
                    collect_references(v, out);
                }
            }
        }
        Value::Array(items) => {
            for i in items {
                collect_references(i, out);
            }
        }
        _ => {}
    }
}

/// Each configured resource's dependencies (its references and `depends_on`), by absolute resource address.
fn config_dependencies(
    module: &ConfigModule,
    prefix: &str,
    out: &mut BTreeMap<String, BTreeSet<String>>,
) {
    for r in &module.resources {
        let Some(address) = &r.address else {
            continue;
        };
        let mut refs = Vec::new();
        collect_references(&r.expressions, &mut refs);
        collect_references(&r.count_expression, &mut refs);
        collect_references(&r.for_each_expression, &mut refs);
        for p in &r.provisioners {
            collect_references(&p.expressions, &mut refs);
        }
        refs.extend(r.depends_on.iter().cloned());
        let deps = out.entry(format!("{prefix}{address}")).or_default();
        deps.extend(refs.iter().filter_map(|r| referenced(prefix, r)));
    }
    for (name, call) in &module.module_calls {
        config_dependencies(&call.module, &format!("{prefix}module.{name}."), out);
    }
}

impl Plan {
    /// Each resource of the configuration and the resources it depends on (its references and `depends_on`), by resource address without instance keys (`module.a.aws_vpc.v`).
    pub fn resource_dependencies(&self) -> BTreeMap<String, BTreeSet<String>> {
        let mut out = BTreeMap::new();
        config_dependencies(&self.configuration.root_module, "", &mut out);
        out
    }

    /// Each instance's state dependencies (`depends_on` in the prior state), by instance address.
    pub fn state_dependencies(&self) -> BTreeMap<String, Vec<String>> {
        let mut out = BTreeMap::new();
        if let Some(root) = self.prior_root() {
            root.walk(&mut |r| {
                if let Some(address) = &r.address {
                    out.insert(address.clone(), r.depends_on.clone());
                }
            });
        }
        out
    }
}
