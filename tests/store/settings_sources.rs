//! One parser per store kind: the live block, the tfplugin6 state store configuration and the
//! live protocol's StoreSettings give the same settings and the same errors for the same input.

use std::collections::BTreeMap;

use choudoufu_live::config::{ConfigError, LiveConfig};
use choudoufu_live::frontdoor::plugin::live::settings::settings as proto_settings;
use choudoufu_live::frontdoor::plugin::proto::live as pb;
use choudoufu_live::frontdoor::plugin::proto::tfplugin6::DynamicValue;
use choudoufu_live::frontdoor::plugin::state_store::config::{decode, interpret};
use choudoufu_live::store::StoreSettings;

/// One input: the kind and its settings (strings and bools).
struct Case {
    kind: &'static str,
    settings: &'static [(&'static str, Val)],
}

#[derive(Clone, Copy)]
enum Val {
    S(&'static str),
    B(bool),
}

/// What a source made of a case: the settings, or the error's message.
type Made = Result<StoreSettings, String>;

fn from_live_block(c: &Case) -> Made {
    let dir = tempfile::tempdir().unwrap();
    let mut body = String::new();
    for (k, v) in c.settings {
        match v {
            Val::S(s) => body.push_str(&format!("    {k} = {s:?}\n")),
            Val::B(b) => body.push_str(&format!("    {k} = {b}\n")),
        }
    }
    let text = format!(
        "live {{\n  estate = \"e\"\n  record_store \"{}\" {{\n{body}  }}\n}}\n",
        c.kind
    );
    std::fs::write(dir.path().join("live.hcl"), text).unwrap();
    match LiveConfig::load(dir.path()) {
        Ok(config) => Ok(config.store),
        Err(ConfigError::Invalid { message, .. }) => Err(message),
        Err(other) => panic!("not a settings error: {other}"),
    }
}

fn from_state_store(c: &Case) -> Made {
    let mut obj = serde_json::Map::new();
    obj.insert("estate".into(), "e".into());
    obj.insert("store".into(), c.kind.into());
    for (k, v) in c.settings {
        let v = match v {
            Val::S(s) => serde_json::Value::from(*s),
            Val::B(b) => serde_json::Value::from(*b),
        };
        obj.insert(k.to_string(), v);
    }
    let dv = DynamicValue {
        json: serde_json::to_vec(&obj).unwrap(),
        ..Default::default()
    };
    let attrs = decode(&dv).map_err(|e| e.message)?;
    match interpret(&attrs, false) {
        Ok(Some(config)) => Ok(config.store),
        Ok(None) => panic!("no unknown values were given"),
        Err(e) => Err(e.message),
    }
}

fn from_live_protocol(c: &Case) -> Made {
    let mut s = pb::StoreSettings {
        kind: c.kind.to_string(),
        ..Default::default()
    };
    let strings: BTreeMap<&str, &str> = c
        .settings
        .iter()
        .filter_map(|(k, v)| match v {
            Val::S(s) => Some((*k, *s)),
            Val::B(_) => None,
        })
        .collect();
    for (k, v) in c.settings {
        match (*k, v) {
            ("use_path_style", Val::B(b)) => s.use_path_style = Some(*b),
            ("skip_bucket_checks", Val::B(b)) => s.skip_bucket_checks = *b,
            ("skip_credentials", Val::B(b)) => s.skip_credentials = *b,
            _ => {}
        }
    }
    let get = |k: &str| strings.get(k).map(|v| v.to_string()).unwrap_or_default();
    s.path = get("path");
    s.bucket = get("bucket");
    s.region = get("region");
    s.endpoint = get("endpoint");
    s.kms_key_id = get("kms_key_id");
    s.storage_account_name = get("storage_account_name");
    s.container_name = get("container_name");
    s.access_key = get("access_key");
    s.sas_token = get("sas_token");
    s.connection_string = get("connection_string");
    s.credentials = get("credentials");
    proto_settings(Some(s)).map_err(|e| e.message)
}

#[test]
fn the_three_sources_agree() {
    use Val::*;
    let cases = [
        Case {
            kind: "local",
            settings: &[("path", S("recs"))],
        },
        Case {
            kind: "local",
            settings: &[],
        },
        Case {
            kind: "local",
            settings: &[("bucket", S("b"))],
        },
        Case {
            kind: "s3",
            settings: &[
                ("bucket", S("acme")),
                ("region", S("eu-west-1")),
                ("endpoint", S("http://127.0.0.1:9000")),
                ("use_path_style", B(true)),
                ("kms_key_id", S("k")),
                ("skip_bucket_checks", B(true)),
            ],
        },
        Case {
            kind: "s3",
            settings: &[("region", S("x"))],
        },
        Case {
            kind: "s3",
            settings: &[("bucket", S("b")), ("container_name", S("c"))],
        },
        Case {
            kind: "azurerm",
            settings: &[
                ("storage_account_name", S("acme")),
                ("container_name", S("records")),
                ("sas_token", S("sv=1&sig=x")),
            ],
        },
        Case {
            kind: "azurerm",
            settings: &[("storage_account_name", S("acme"))],
        },
        Case {
            kind: "azurerm",
            settings: &[
                ("container_name", S("c")),
                ("connection_string", S("AccountKey=x")),
            ],
        },
        Case {
            kind: "gcs",
            settings: &[("bucket", S("acme")), ("skip_credentials", B(true))],
        },
        // One setting name turns the safety check off on every kind that has one.
        Case {
            kind: "gcs",
            settings: &[("bucket", S("acme")), ("skip_bucket_checks", B(true))],
        },
        Case {
            kind: "azurerm",
            settings: &[
                ("storage_account_name", S("acme")),
                ("container_name", S("records")),
                ("skip_bucket_checks", B(true)),
            ],
        },
        Case {
            kind: "gcs",
            settings: &[],
        },
        Case {
            kind: "gcs",
            settings: &[("bucket", S("b")), ("region", S("x"))],
        },
        Case {
            kind: "gopher",
            settings: &[],
        },
    ];
    let mut errors = 0;
    for c in &cases {
        let block = from_live_block(c);
        let plugin = from_state_store(c);
        let protocol = from_live_protocol(c);
        assert_eq!(
            block, plugin,
            "live block vs state store, {} {:?}",
            c.kind, block
        );
        assert_eq!(
            block, protocol,
            "live block vs live protocol, {} {:?}",
            c.kind, block
        );
        if block.is_err() {
            errors += 1;
        }
    }
    assert_eq!(errors, 8, "the cases hold eight mistakes");
}
