//! Property tests: state split/assemble round-trips any state; the parsers never panic on any input.

use std::collections::BTreeSet;

use choudoufu_live::config::LiveConfig;
use choudoufu_live::engine::digest::canonical;
use choudoufu_live::engine::layout::{EstateName, Layout};
use choudoufu_live::engine::record::{EstateMeta, Record};
use choudoufu_live::engine::state::{Header, Item, assemble, parse};
use proptest::prelude::*;
use serde_json::{Value, json};

#[derive(Clone, Debug)]
enum Key {
    None,
    Int(i64),
    Str(String),
}

fn key() -> impl Strategy<Value = Key> {
    prop_oneof![
        Just(Key::None),
        (0i64..1000).prop_map(Key::Int),
        any::<String>().prop_map(Key::Str)
    ]
}

/// A generated resource: module, data mode?, type, name, and its instances (index key, deposed key).
type GenResource = (
    Option<String>,
    bool,
    String,
    String,
    Vec<(Key, Option<String>)>,
);

fn ident() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_]{0,12}"
}

fn resource() -> impl Strategy<Value = GenResource> {
    (
        proptest::option::of("module\\.[a-z]{1,6}(\\[[0-9]\\])?(\\.module\\.[a-z]{1,4})?"),
        any::<bool>(),
        ident(),
        ident(),
        proptest::collection::vec((key(), proptest::option::of("[0-9a-f]{8}")), 1..4),
    )
}

fn document(resources: &[GenResource]) -> Value {
    let rs: Vec<Value> = resources
        .iter()
        .map(|(module, data, ty, name, instances)| {
            let inst: Vec<Value> = instances
                .iter()
                .map(|(k, deposed)| {
                    let mut o = json!({"schema_version": 0, "attributes": {"id": "x", "n": 1.5}});
                    match k {
                        Key::None => {}
                        Key::Int(i) => o["index_key"] = json!(i),
                        Key::Str(s) => o["index_key"] = json!(s),
                    }
                    if let Some(d) = deposed {
                        o["deposed"] = json!(d);
                    }
                    o
                })
                .collect();
            let mut r = json!({"mode": if *data { "data" } else { "managed" }, "type": ty, "name": name, "provider": "provider[\"registry.terraform.io/hashicorp/x\"]", "instances": inst});
            if let Some(m) = module {
                r["module"] = json!(m);
            }
            r
        })
        .collect();
    json!({"version": 4, "terraform_version": "1.11.4", "serial": 3, "lineage": "l", "outputs": {"o": {"value": "v", "type": "string"}}, "resources": rs})
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Split then assemble gives back every instance, and assembling again is a fixed point.
    #[test]
    fn split_assemble_round_trips(resources in proptest::collection::vec(resource(), 0..6)) {
        let bytes = serde_json::to_vec(&document(&resources)).unwrap();
        let split = match parse(&bytes) {
            Ok(s) => s,
            // Random instances can repeat one address: that must be a named error, never a panic.
            Err(e) => { prop_assert!(e.to_string().contains("twice")); return Ok(()); }
        };
        let addresses: BTreeSet<String> = split.items.iter().filter_map(|i| match i { Item::Resource { address, .. } => Some(address.clone()), _ => None }).collect();
        let count = split.items.iter().filter(|i| matches!(i, Item::Resource { .. })).count();
        prop_assert_eq!(addresses.len(), count, "one record address per instance object");
        let header = Header { lineage: split.lineage.clone(), serial: split.serial, terraform_version: split.terraform_version.clone() };
        let once = assemble(&header, &split.items);
        let again = parse(&serde_json::to_vec(&once).unwrap()).unwrap();
        prop_assert_eq!(canonical(&assemble(&header, &again.items)), canonical(&once));
        let mut a: Vec<String> = split.items.iter().map(|i| format!("{i:?}")).collect();
        let mut b: Vec<String> = again.items.iter().map(|i| format!("{i:?}")).collect();
        a.sort(); b.sort();
        prop_assert_eq!(a, b);
    }

    /// The state parser never panics, whatever the bytes.
    #[test]
    fn state_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse(&bytes);
    }

    /// Nor on JSON of the wrong shape.
    #[test]
    fn state_parser_never_panics_on_json(v in any_json()) {
        let _ = parse(&serde_json::to_vec(&v).unwrap());
        let _ = parse(&serde_json::to_vec(&json!({"version": 4, "resources": [v]})).unwrap());
    }

    /// The record decoders never panic, whatever the bytes.
    #[test]
    fn record_decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512), v in any_json()) {
        let layout = Layout::new(EstateName::parse("e").unwrap());
        let _ = Record::decode("tofu-records/e/r/x", &bytes, &layout);
        let _ = EstateMeta::decode("tofu-records/e/_estate", &bytes, &layout);
        let j = serde_json::to_vec(&v).unwrap();
        let _ = Record::decode("tofu-records/e/r/x", &j, &layout);
    }

    /// The live block parser never panics, whatever the text.
    #[test]
    fn live_block_parser_never_panics(text in "(live|estate|record_store|\\{|\\}|=|\"[a-z]*\"|[ \\n]|[a-z]+|#.*\\n){0,40}") {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("live.hcl"), &text).unwrap();
        let _ = LiveConfig::load(dir.path());
    }
}

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z_]{1,8}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// An oversized state document is refused by name before it is read, with nothing written.
#[test]
fn an_oversized_state_is_refused_by_name() {
    let huge = vec![b' '; choudoufu_live::engine::state::MAX_STATE_BYTES + 1];
    let e = parse(&huge).unwrap_err();
    assert!(
        e.to_string().contains("over the") && e.to_string().contains("nothing was written"),
        "{e}"
    );
}
