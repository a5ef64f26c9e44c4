//! What each planned resource depends on: its configuration's references and `depends_on`, and its prior state's dependencies.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::config::ConfigModule;
use super::document::Plan;
use crate::engine::address::referenced;

/// Every `references` list in an expression tree, each as it stands (one per expression).
fn reference_lists<'a>(v: &'a Value, out: &mut Vec<&'a [Value]>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                if k == "references"
                    && let Some(refs) = v.as_array()
                {
                    out.push(refs);
                } else {
                    reference_lists(v, out);
                }
            }
        }
        Value::Array(items) => {
            for i in items {
                reference_lists(i, out);
            }
        }
        _ => {}
    }
}

/// The instance a reference names when it names one by a known key (`aws_x.y[0].id` names `aws_x.y[0]`), made absolute with `prefix`.
fn referenced_instance(prefix: &str, reference: &str) -> Option<String> {
    let resource = referenced("", reference)?;
    if resource.starts_with("module.") {
        return None;
    }
    let rest = reference.strip_prefix(&resource)?.strip_prefix('[')?;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in rest.char_indices() {
        match (in_string, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (_, false, '"') => in_string = !in_string,
            (false, _, ']') => return Some(format!("{prefix}{resource}[{}]", &rest[..i])),
            _ => {}
        }
    }
    None
}

/// What one expression's `references` list depends on: each instance it names by a known key, and each other resource (or module call) it names.
fn list_targets(prefix: &str, refs: &[Value], out: &mut BTreeSet<String>) {
    let refs: Vec<&str> = refs.iter().filter_map(Value::as_str).collect();
    let instances: BTreeSet<String> = refs
        .iter()
        .filter_map(|r| referenced_instance(prefix, r))
        .collect();
    for r in &refs {
        let Some(resource) = referenced(prefix, r) else {
            continue;
        };
        // Terraform lists each traversal's prefixes: `aws_x.y[0].id`, `aws_x.y[0]`, `aws_x.y`; the last adds nothing.
        let indexed = format!("{resource}[");
        if !instances.iter().any(|i| i.starts_with(&indexed)) {
            out.insert(resource);
        }
    }
    out.extend(instances);
}

/// What one configured resource references: its `references` lists (arguments, `count`, `for_each`, provisioners) and its `depends_on`.
struct ResourceRefs<'a> {
    /// Its module's prefix (`module.a.`, or empty at the root).
    prefix: &'a str,
    /// Its absolute address.
    address: String,
    /// Each expression's `references` list.
    lists: Vec<&'a [Value]>,
    /// Its `depends_on`.
    depends_on: &'a [String],
}

/// Each configured resource's references, in the root module and every module call below it.
fn each_resource<'a>(module: &'a ConfigModule, prefix: &str, f: &mut dyn FnMut(ResourceRefs<'_>)) {
    for r in &module.resources {
        let Some(address) = &r.address else {
            continue;
        };
        let mut lists = Vec::new();
        reference_lists(&r.expressions, &mut lists);
        reference_lists(&r.count_expression, &mut lists);
        reference_lists(&r.for_each_expression, &mut lists);
        for p in &r.provisioners {
            reference_lists(&p.expressions, &mut lists);
        }
        f(ResourceRefs {
            prefix,
            address: format!("{prefix}{address}"),
            lists,
            depends_on: &r.depends_on,
        });
    }
    for (name, call) in &module.module_calls {
        each_resource(&call.module, &format!("{prefix}module.{name}."), f);
    }
}

/// Each configured resource's dependencies as precisely as its configuration names them, by absolute resource address.
fn config_targets(module: &ConfigModule) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    each_resource(module, "", &mut |r| {
        let deps = out.entry(r.address).or_default();
        for list in r.lists {
            list_targets(r.prefix, list, deps);
        }
        deps.extend(r.depends_on.iter().filter_map(|d| referenced(r.prefix, d)));
    });
    out
}

/// Each configured resource's dependencies (its references and `depends_on`), by absolute resource address.
fn config_dependencies(module: &ConfigModule) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    each_resource(module, "", &mut |r| {
        let refs = r
            .lists
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .chain(r.depends_on.iter().map(String::as_str));
        out.entry(r.address)
            .or_default()
            .extend(refs.filter_map(|reference| referenced(r.prefix, reference)));
    });
    out
}

impl Plan {
    /// Each resource of the configuration and the resources it depends on (its references and `depends_on`), by resource address without instance keys (`module.a.aws_vpc.v`).
    pub fn resource_dependencies(&self) -> BTreeMap<String, BTreeSet<String>> {
        config_dependencies(&self.configuration.root_module)
    }

    /// Each resource of the configuration and what it depends on, as precisely as the configuration names it: an instance by a known key (`aws_x.y[0]`), else a resource or module call (`aws_x.y`, `module.m`).
    pub fn reference_targets(&self) -> BTreeMap<String, BTreeSet<String>> {
        config_targets(&self.configuration.root_module)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_by_key_names_its_instance() {
        assert_eq!(
            referenced_instance("", "aws_x.y[0].id").as_deref(),
            Some("aws_x.y[0]")
        );
        assert_eq!(
            referenced_instance("module.a.", r#"aws_x.y["k]\"x"].id"#).as_deref(),
            Some(r#"module.a.aws_x.y["k]\"x"]"#)
        );
        assert_eq!(referenced_instance("", "aws_x.y.id"), None);
        assert_eq!(referenced_instance("", "module.m[0].out"), None);
        assert_eq!(referenced_instance("", "var.v"), None);
        let mut out = BTreeSet::new();
        let refs =
            serde_json::json!(["aws_x.y[0].id", "aws_x.y[0]", "aws_x.y", "aws_z.w", "var.v"]);
        list_targets("", refs.as_array().unwrap(), &mut out);
        assert_eq!(
            out,
            ["aws_x.y[0]".to_string(), "aws_z.w".to_string()].into()
        );
    }
}
