use serde_json::json;

use super::*;
use crate::engine::layout::{EstateName, Layout};
use crate::engine::operation::Operation;

/// Trimmed from `terraform show -json` of a plan with a replace, an update, a move, a module and a data source.
fn plan_json() -> serde_json::Value {
    json!({
        "format_version": "1.2",
        "terraform_version": "1.11.4",
        "some_field_terraform_adds": {"x": 1},
        "resource_changes": [
            {"address": "terraform_data.a", "mode": "managed", "change": {"actions": ["delete", "create"]}},
            {"address": "terraform_data.b", "mode": "managed", "change": {"actions": ["update"]}},
            {"address": "terraform_data.c2", "previous_address": "terraform_data.c", "mode": "managed", "change": {"actions": ["no-op"]}},
            {"address": "terraform_data.same", "mode": "managed", "change": {"actions": ["no-op"]}},
            {"address": "terraform_data.imp", "mode": "managed", "change": {"actions": ["no-op"], "importing": {"id": "i-1"}}},
            {"address": "terraform_data.dep", "deposed": "1b6df766", "mode": "managed", "change": {"actions": ["delete"]}},
            {"address": "terraform_data.gone", "mode": "managed", "change": {"actions": ["forget"]}},
            {"address": "module.m[0].terraform_data.z[\"k\"]", "mode": "managed", "change": {"actions": ["create"]}},
            {"address": "data.terraform_remote_state.rd", "mode": "data", "change": {"actions": ["read"]}}
        ],
        "output_changes": {"ids": {"actions": ["update"]}, "same": {"actions": ["no-op"]}},
        "configuration": {"root_module": {
            "resources": [
                {"address": "terraform_data.a", "expressions": {"input": {"constant_value": "A"}}},
                {"address": "terraform_data.b",
                 "expressions": {"input": {"references": ["terraform_data.a.id", "terraform_data.a", "var.x", "local.l"]}},
                 "depends_on": ["terraform_data.c2"]}
            ],
            "module_calls": {"m": {"module": {"resources": [
                {"address": "terraform_data.z",
                 "expressions": {"input": {"references": ["terraform_data.w[0].id", "module.n.out", "data.x.y.id", "each.key"]}}}
            ]}}}
        }},
        "prior_state": {"values": {"root_module": {"resources": [
            {"address": "terraform_data.b", "depends_on": ["terraform_data.a", "terraform_data.c"]}
        ]}}}
    })
}

fn plan() -> Plan {
    Plan::from_value(plan_json()).unwrap()
}

#[test]
fn a_plans_change_set_with_operations_and_dependencies() {
    let set = ChangeSet::of(&plan());
    let ops: Vec<(&str, Operation)> = set
        .resources
        .iter()
        .map(|c| (c.address.as_str(), c.operation))
        .collect();
    assert_eq!(
        ops,
        [
            ("terraform_data.a", Operation::Replace),
            ("terraform_data.b", Operation::Update),
            ("terraform_data.c2", Operation::Move),
            ("terraform_data.imp", Operation::Import),
            ("terraform_data.dep (deposed 1b6df766)", Operation::Delete),
            ("terraform_data.gone", Operation::Forget),
            ("module.m[0].terraform_data.z[\"k\"]", Operation::Create),
        ]
    );
    let b = &set.resources[1];
    assert_eq!(
        b.dependencies,
        ["terraform_data.a", "terraform_data.c", "terraform_data.c2"]
    );
    assert_eq!(
        set.resources[6].dependencies,
        ["module.m.module.n", "module.m.terraform_data.w"]
    );
    assert_eq!(set.outputs, ["ids".to_string()].into());
    let wanted = set.wanted();
    assert!(
        wanted
            .iter()
            .any(|w| w.address == "terraform_data.c" && w.operation == Operation::Move)
    );
    let layout = Layout::new(EstateName::parse("e").unwrap());
    let keys = set.keys(&layout);
    assert!(keys.contains(layout.resource_key("terraform_data.c").as_str()));
    assert!(keys.contains(layout.output_key("ids").as_str()));
    assert!(
        !set.resource_keys(&layout)
            .contains(layout.output_key("ids").as_str())
    );
}

#[test]
fn each_actions_list_is_one_operation() {
    let actions = |a: serde_json::Value| serde_json::from_value::<Actions>(a).unwrap();
    let cases = [
        (
            json!(["create"]),
            Some(Operation::Create),
            &[Operation::Create][..],
        ),
        (
            json!(["update"]),
            Some(Operation::Update),
            &[Operation::Update][..],
        ),
        (
            json!(["delete"]),
            Some(Operation::Delete),
            &[Operation::Delete][..],
        ),
        (
            json!(["delete", "create"]),
            Some(Operation::Replace),
            &[Operation::Delete, Operation::Create][..],
        ),
        (
            json!(["create", "delete"]),
            Some(Operation::Replace),
            &[][..],
        ),
        (json!(["forget"]), Some(Operation::Forget), &[][..]),
        (json!(["no-op"]), None, &[][..]),
        (json!(["read"]), None, &[][..]),
        (json!([]), None, &[][..]),
        (
            json!(["create", "forget"]),
            Some(Operation::Update),
            &[][..],
        ),
    ];
    for (list, operation, calls) in cases {
        let a = actions(list.clone());
        assert_eq!(a.operation(), operation, "{list}");
        assert_eq!(a.provider_calls(), calls, "{list}");
    }
}

#[test]
fn a_plans_structure_is_typed_and_its_additions_ignored() {
    let p = plan();
    assert_eq!(p.format_version.as_deref(), Some("1.2"));
    assert_eq!(p.terraform_version.as_deref(), Some("1.11.4"));
    assert!(p.applyable());
    assert_eq!(p.resource_changes[8].mode, Mode::Data);
    assert_eq!(
        p.resource_changes[4].change.importing,
        Some(Importing {
            id: Some("i-1".into())
        })
    );
    let creates: Vec<&str> = p.creates().map(|c| c.address.as_str()).collect();
    assert_eq!(creates, ["module.m[0].terraform_data.z[\"k\"]"]);
    // Nulls where terraform leaves a part out.
    let p = Plan::from_value(json!({
        "resource_changes": null, "output_changes": null, "variables": null,
        "configuration": null, "prior_state": null,
        "applyable": false
    }))
    .unwrap();
    assert!(p.resource_changes.is_empty() && !p.applyable());
}

#[test]
fn a_malformed_plan_is_a_typed_error() {
    let malformed = |v: serde_json::Value| {
        assert!(
            matches!(
                Plan::from_value(v.clone()),
                Err(PlanJsonError::Malformed(_))
            ),
            "{v}"
        );
    };
    malformed(json!({"resource_changes": 3}));
    malformed(json!({"resource_changes": [{"change": {}}]}));
    malformed(json!({"resource_changes": [{"address": 1}]}));
    malformed(json!({"resource_changes": [{"address": "a.b", "change": {"actions": "create"}}]}));
    malformed(json!({"resource_changes": [{"address": "a.b", "index": true}]}));
    malformed(json!({"configuration": {"root_module": {"resources": {}}}}));
    malformed(json!({"prior_state": {"values": {"root_module": {"child_modules": 1}}}}));
    assert!(matches!(
        Plan::from_value(json!([])),
        Err(PlanJsonError::NotAnObject)
    ));
    assert!(matches!(
        Plan::from_slice(b" [1]"),
        Err(PlanJsonError::NotAnObject)
    ));
    assert!(matches!(
        Plan::from_slice(b"{not json"),
        Err(PlanJsonError::NotJson(_))
    ));
    assert!(matches!(
        Plan::from_slice(b""),
        Err(PlanJsonError::NotJson(_))
    ));
    assert_eq!(
        ChangeSet::of(&Plan::from_value(json!({})).unwrap()),
        ChangeSet::default()
    );
}

#[test]
fn a_plan_names_its_providers() {
    let p = Plan::from_value(json!({
        "resource_changes": [
            {"address": "a.x", "provider_name": "registry.terraform.io/hashicorp/aws"},
            {"address": "b.y", "provider_name": "terraform.io/builtin/terraform"}
        ],
        "configuration": {"provider_config": {"aws.east": {"full_name": "registry.terraform.io/hashicorp/aws"}}},
        "prior_state": {"values": {"root_module": {"child_modules": [
            {"resources": [{"provider_name": "registry.opentofu.org/hashicorp/random"}]}
        ]}}}
    }))
    .unwrap();
    let names: Vec<String> = p.providers().into_iter().collect();
    assert_eq!(
        names,
        [
            "registry.opentofu.org/hashicorp/random",
            "registry.terraform.io/hashicorp/aws",
            "terraform.io/builtin/terraform"
        ]
    );
}

#[test]
fn variables_with_values_and_defaults() {
    let p = Plan::from_value(json!({
        "variables": {"x": {"value": "d"}, "n": {"value": null}, "k": {"value": 3}},
        "configuration": {"root_module": {"variables": {"tok": {}, "x": {"default": "d"}, "z": {"default": null}}}}
    }))
    .unwrap();
    let vars: Vec<(&str, String)> = p
        .variable_values()
        .map(|(n, v)| (n, v.to_string()))
        .collect();
    assert_eq!(vars, [("k", "3".to_string()), ("x", "\"d\"".to_string())]);
    let declared = &p.configuration.root_module.variables;
    assert_eq!(declared["tok"].default, None);
    assert_eq!(declared["z"].default, Some(serde_json::Value::Null));
}

mod properties {
    use proptest::prelude::*;

    use super::super::Plan;

    proptest! {
        /// Any bytes parse to a plan or a typed error, never a panic.
        #[test]
        fn any_bytes_are_a_plan_or_an_error(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = Plan::from_slice(&bytes);
        }

        /// Any JSON shaped like a plan's parts parses or is refused, never a panic.
        #[test]
        fn any_json_is_a_plan_or_an_error(
            text in r#"\{"(resource_changes|configuration|prior_state|output_changes|variables)": (null|1|"s"|\[\]|\{\}|\[\{"address": ("a.b"|1|null), "change": (null|\{\}|\{"actions": (\["create"\]|1|null)\})\}\])\}"#
        ) {
            let _ = Plan::from_slice(text.as_bytes());
        }
    }
}
