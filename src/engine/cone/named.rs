//! What a dependency target names: an object, a resource holding it, or a module call around it.

use std::collections::BTreeSet;

use crate::engine::address::{names, resource_of};

/// Whether the dependency target `target` (an instance, a resource or a `module.NAME` call) names the object `object`.
pub fn target_names(target: &str, object: &str) -> bool {
    let instance = object.split(" (deposed ").next().unwrap_or(object);
    instance == target || names(target, object)
}

/// The objects and resources of the cone so far, as dependency targets meet them.
#[derive(Debug, Default)]
pub struct Named {
    /// Objects and resources, by address.
    exact: BTreeSet<String>,
    /// The resources they belong to, and every module call around them (`module.m`).
    around: BTreeSet<String>,
}

impl Named {
    /// Add an object (`aws_x.y[0]`) or a whole resource (`aws_x.y`).
    pub fn add(&mut self, address: &str) {
        let instance = address.split(" (deposed ").next().unwrap_or(address);
        self.exact.insert(instance.to_string());
        let resource = resource_of(instance);
        let mut prefix = String::new();
        for part in resource.split('.') {
            if !prefix.is_empty() {
                prefix.push('.');
            }
            prefix.push_str(part);
            self.around.insert(prefix.clone());
        }
    }

    /// Whether `target` names something added: that object, or a resource or module call holding one.
    pub fn names(&self, target: &str) -> bool {
        self.exact.contains(target) || self.around.contains(target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_calls_and_instances_name_what_they_hold() {
        let mut named = Named::default();
        named.add("module.m.aws_x.y[0]");
        assert!(named.names("module.m"));
        assert!(named.names("module.m.aws_x.y"));
        assert!(named.names("module.m.aws_x.y[0]"));
        assert!(!named.names("module.m.aws_x.y[1]"));
        assert!(!named.names("module.mm"));
        assert!(!named.names("aws_x.y"));
        assert!(target_names("aws_x.y[0]", "aws_x.y[0] (deposed 0a)"));
        assert!(target_names("aws_x.y", "aws_x.y[1]"));
        assert!(!target_names("aws_x.y[0]", "aws_x.y[1]"));
    }
}
