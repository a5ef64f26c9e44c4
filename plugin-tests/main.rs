//! The plugin as terraform sees it: the go-plugin handshake, AutoMTLS, and the state-store RPCs.

mod choudoufu;
mod markers;

use std::time::Duration;

use choudoufu_live::frontdoor::plugin::proto::tfplugin6 as pb;
use choudoufu_live::frontdoor::plugin::proto::tfplugin6::provider_client::ProviderClient;
use host::{Launch, client_cert};
use serde_json::{Value, json};
use testkit::plugin_host as host;
use testkit::state;
use tokio_stream::StreamExt;
use tonic::transport::Channel;

fn doc(resources: &[(&str, &str)]) -> Vec<u8> {
    let rs = resources
        .iter()
        .map(|(n, v)| {
            state::terraform_data(
                n,
                json!({"id": format!("id-{n}"), "input": state::input(v)}),
            )
        })
        .collect();
    state::document("1.15.0", "l", rs)
}

fn config_msgpack(estate: &str, path: &str) -> pb::DynamicValue {
    use rmpv::Value as M;
    let s = |v: &str| M::String(v.into());
    let map = M::Map(vec![
        (s("estate"), s(estate)),
        (s("store"), s("local")),
        (s("path"), s(path)),
        (s("bucket"), M::Nil),
        (s("region"), M::Nil),
        (s("endpoint"), M::Nil),
        (s("use_path_style"), M::Nil),
        (s("kms_key_id"), M::Nil),
    ]);
    let mut buf = Vec::new();
    rmpv::encode::write_value(&mut buf, &map).unwrap();
    pb::DynamicValue {
        msgpack: buf,
        json: vec![],
    }
}

const STORE: &str = "live_records";

async fn configure(p: &mut ProviderClient<Channel>, estate: &str, path: &str, chunk: i64) -> i64 {
    let r = p
        .configure_state_store(pb::configure_state_store::Request {
            type_name: STORE.into(),
            config: Some(config_msgpack(estate, path)),
            capabilities: Some(pb::StateStoreClientCapabilities { chunk_size: chunk }),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
    r.capabilities.unwrap().chunk_size
}

async fn write(
    p: &mut ProviderClient<Channel>,
    ws: &str,
    bytes: &[u8],
    chunk: usize,
) -> Vec<pb::Diagnostic> {
    let total = bytes.len() as i64;
    let mut msgs = Vec::new();
    let mut start = 0i64;
    for (i, piece) in bytes.chunks(chunk).enumerate() {
        msgs.push(pb::write_state_bytes::RequestChunk {
            meta: (i == 0).then(|| pb::RequestChunkMeta {
                type_name: STORE.into(),
                state_id: ws.into(),
            }),
            bytes: piece.to_vec(),
            total_length: total,
            range: Some(pb::StateRange {
                start,
                end: start + piece.len() as i64 - 1,
            }),
        });
        start += piece.len() as i64;
    }
    p.write_state_bytes(tokio_stream::iter(msgs))
        .await
        .unwrap()
        .into_inner()
        .diagnostics
}

async fn read(p: &mut ProviderClient<Channel>, ws: &str) -> (Vec<u8>, usize) {
    let mut s = p
        .read_state_bytes(pb::read_state_bytes::Request {
            type_name: STORE.into(),
            state_id: ws.into(),
        })
        .await
        .unwrap()
        .into_inner();
    let mut out = Vec::new();
    let mut n = 0;
    while let Some(m) = s.next().await {
        let m = m.unwrap();
        assert!(m.diagnostics.is_empty(), "{:?}", m.diagnostics);
        let r = m.range.expect("every chunk carries its range");
        assert_eq!(r.start as usize, out.len());
        assert_eq!(
            r.end as usize,
            out.len() + m.bytes.len() - 1,
            "range ends are inclusive"
        );
        out.extend_from_slice(&m.bytes);
        assert!(m.total_length as usize >= out.len());
        n += 1;
    }
    (out, n)
}

fn resources_of(bytes: &[u8]) -> Value {
    let v: Value = serde_json::from_slice(bytes).unwrap();
    choudoufu_live::engine::digest::canonical(&v["resources"])
}

fn is_error(d: &[pb::Diagnostic]) -> bool {
    d.iter()
        .any(|d| d.severity == pb::diagnostic::Severity::Error as i32)
}

async fn whole_protocol(versions: &str) {
    let dir = tempfile::tempdir().unwrap();
    let cert = client_cert();
    let mut launch = Launch::new(dir.path(), Some(&cert));
    launch.versions = versions;
    launch.min_port = 20000;
    launch.max_port = 20999;
    let mut plugin = launch.start();
    assert_eq!(plugin.line.network, "tcp");
    let addr: std::net::SocketAddr = plugin.line.address.parse().unwrap();
    assert!(addr.ip().is_loopback());
    assert!((20000..=20999).contains(&addr.port()), "{addr}");
    let server_cert = plugin
        .line
        .cert
        .clone()
        .expect("a server certificate in the line");
    assert!(x509_is_for_localhost(&server_cert));

    // Health, as go-plugin checks it.
    let mut health = tonic_health::pb::health_client::HealthClient::new(
        plugin.channel_with(Some(&cert)).await.unwrap(),
    );
    let h = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "plugin".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        h.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );

    let mut p = plugin.provider(Some(&cert)).await;
    let schema = p
        .get_provider_schema(pb::get_provider_schema::Request {})
        .await
        .unwrap()
        .into_inner();
    let store = &schema.state_store_schemas[STORE];
    let names: Vec<&str> = store
        .block
        .as_ref()
        .unwrap()
        .attributes
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    assert!(
        names.contains(&"estate") && names.contains(&"bucket") && names.contains(&"path"),
        "{names:?}"
    );
    let meta = p
        .get_metadata(pb::get_metadata::Request {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(meta.state_stores[0].type_name, STORE);

    let v = p
        .validate_state_store_config(pb::validate_state_store::Request {
            type_name: STORE.into(),
            config: Some(config_msgpack("bad/name", "r")),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        is_error(&v.diagnostics),
        "an invalid estate name is refused"
    );
    assert_eq!(configure(&mut p, "plug", "recs", 1024).await, 1024);

    // No state yet: an empty stream.
    assert_eq!(read(&mut p, "default").await, (vec![], 0));
    let many: Vec<(String, String)> = (0..60)
        .map(|i| (format!("r{i:02}"), format!("value-{i}")))
        .collect();
    let many_ref: Vec<(&str, &str)> = many.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let state = doc(&many_ref);
    assert!(state.len() > 4 * 1024);
    assert!(write(&mut p, "default", &state, 1024).await.is_empty());
    let (back, chunks) = read(&mut p, "default").await;
    assert!(
        chunks > 1,
        "a state larger than one chunk comes back in {chunks} chunks"
    );
    assert_eq!(resources_of(&back), resources_of(&state));

    // Workspaces: default is the estate; others are listed from the store.
    assert!(
        write(&mut p, "dev", &doc(&[("x", "1")]), 1024)
            .await
            .is_empty()
    );
    let states = p
        .get_states(pb::get_states::Request {
            type_name: STORE.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        states.state_id,
        vec!["default".to_string(), "dev".to_string()]
    );
    let d = p
        .delete_state(pb::delete_state::Request {
            type_name: STORE.into(),
            state_id: "dev".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        is_error(&d.diagnostics),
        "a workspace with records is not deleted"
    );
    assert!(write(&mut p, "dev", &doc(&[]), 1024).await.is_empty());
    let d = p
        .delete_state(pb::delete_state::Request {
            type_name: STORE.into(),
            state_id: "dev".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(d.diagnostics.is_empty(), "{:?}", d.diagnostics);
    let states = p
        .get_states(pb::get_states::Request {
            type_name: STORE.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(states.state_id, vec!["default".to_string()]);
    let d = p
        .delete_state(pb::delete_state::Request {
            type_name: STORE.into(),
            state_id: "default".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        is_error(&d.diagnostics),
        "the estate is never deleted whole"
    );

    // No lock: LockState holds nothing and lets terraform proceed; UnlockState says there is no lock.
    let l = p
        .lock_state(pb::lock_state::Request {
            type_name: STORE.into(),
            state_id: "default".into(),
            operation: "OperationTypeApply".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(l.lock_id, "");
    assert!(!is_error(&l.diagnostics));
    let u = p
        .unlock_state(pb::unlock_state::Request {
            type_name: STORE.into(),
            state_id: "default".into(),
            lock_id: "abc".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(is_error(&u.diagnostics));
    assert!(
        u.diagnostics[0]
            .summary
            .contains("no lock: choudoufu-live holds no locks; every record write is conditional")
    );
    let (after, _) = read(&mut p, "default").await;
    assert_eq!(
        resources_of(&after),
        resources_of(&state),
        "nothing changed"
    );

    // Logs on stderr are hclog JSON.
    let lines = plugin.stderr_lines();
    assert!(!lines.is_empty());
    for l in &lines {
        let v: Value = serde_json::from_str(l).unwrap_or_else(|_| panic!("not hclog JSON: {l}"));
        assert!(
            v["@level"].is_string() && v["@message"].is_string() && v["@timestamp"].is_string(),
            "{l}"
        );
    }
    let took = plugin.shutdown(Some(&cert)).await;
    assert!(
        took < Duration::from_secs(2),
        "exit took {took:?} after Shutdown"
    );
}

fn x509_is_for_localhost(der: &[u8]) -> bool {
    // The DER carries the SAN dNSName "localhost" as raw bytes.
    der.windows(9).any(|w| w == b"localhost")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_5_6() {
    whole_protocol("5,6").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_6_5() {
    whole_protocol("6,5").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_certificates_and_no_certificate_cannot_call_anything() {
    let dir = tempfile::tempdir().unwrap();
    let cert = client_cert();
    let plugin = Launch::new(dir.path(), Some(&cert)).start();
    let stranger = client_cert();
    for who in [Some(&stranger), None] {
        match plugin.channel_with(who).await {
            Err(_) => {}
            Ok(ch) => {
                let mut p = ProviderClient::new(ch);
                assert!(
                    p.get_provider_schema(pb::get_provider_schema::Request {})
                        .await
                        .is_err(),
                    "a client without the pinned certificate got an answer"
                );
            }
        }
    }
    // The host itself still gets in.
    let mut p = plugin.provider(Some(&cert)).await;
    p.get_provider_schema(pb::get_provider_schema::Request {})
        .await
        .unwrap();
}

#[test]
fn refusals_print_nothing_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let cert = client_cert();
    let mut wrong = Launch::new(dir.path(), Some(&cert));
    wrong.cookie = "not-the-cookie";
    let out = wrong.command().output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("this is a plugin for Terraform"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut old = Launch::new(dir.path(), Some(&cert));
    old.versions = "4,5";
    let out = old.command().output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("speaks only version 6"));
    // No cookie, no arguments: the human message.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_choudoufu-live"))
        .env_remove("TF_PLUGIN_MAGIC_COOKIE")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("choudoufu-live --help"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unix_socket_and_plaintext() {
    let dir = tempfile::tempdir().unwrap();
    let cert = client_cert();
    let sockets = tempfile::tempdir().unwrap();
    let mut launch = Launch::new(dir.path(), Some(&cert));
    launch.unix_dir = Some(sockets.path());
    let mut plugin = launch.start();
    assert_eq!(plugin.line.network, "unix");
    assert!(
        plugin
            .line
            .address
            .starts_with(sockets.path().to_str().unwrap())
    );
    let mut p = plugin.provider(Some(&cert)).await;
    p.get_metadata(pb::get_metadata::Request {}).await.unwrap();
    plugin.shutdown(Some(&cert)).await;
    // Without PLUGIN_CLIENT_CERT (TF_DISABLE_PLUGIN_TLS): plaintext, and no certificate in the line.
    let mut plain = Launch::new(dir.path(), None).start();
    assert!(plain.line.cert.is_none());
    let mut p = plain.provider(None).await;
    p.get_metadata(pb::get_metadata::Request {}).await.unwrap();
    plain.shutdown(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_plugin_processes_on_one_estate() {
    let dir = tempfile::tempdir().unwrap();
    let cert = client_cert();
    let (a, b) = (
        Launch::new(dir.path(), Some(&cert)).start(),
        Launch::new(dir.path(), Some(&cert)).start(),
    );
    let (mut pa, mut pb_) = (a.provider(Some(&cert)).await, b.provider(Some(&cert)).await);
    configure(&mut pa, "two", "recs", 8 << 20).await;
    configure(&mut pb_, "two", "recs", 8 << 20).await;
    assert!(
        write(
            &mut pa,
            "default",
            &doc(&[("db", "1"), ("dns", "1")]),
            1 << 20
        )
        .await
        .is_empty()
    );
    // Both runs read; A changes db, B changes dns: both land.
    read(&mut pa, "default").await;
    read(&mut pb_, "default").await;
    assert!(
        write(
            &mut pa,
            "default",
            &doc(&[("db", "A"), ("dns", "1")]),
            1 << 20
        )
        .await
        .is_empty()
    );
    assert!(
        write(
            &mut pb_,
            "default",
            &doc(&[("db", "1"), ("dns", "B")]),
            1 << 20
        )
        .await
        .is_empty()
    );
    let (now, _) = read(&mut pa, "default").await;
    assert_eq!(
        resources_of(&now),
        resources_of(&doc(&[("db", "A"), ("dns", "B")]))
    );
    // Both read again; both change db: the first lands, the second is refused by name.
    read(&mut pb_, "default").await;
    assert!(
        write(
            &mut pa,
            "default",
            &doc(&[("db", "A2"), ("dns", "B")]),
            1 << 20
        )
        .await
        .is_empty()
    );
    let d = write(
        &mut pb_,
        "default",
        &doc(&[("db", "B2"), ("dns", "B")]),
        1 << 20,
    )
    .await;
    assert!(is_error(&d));
    assert_eq!(d[0].summary, "Record store write conflict");
    assert!(
        d[0].detail
            .contains("terraform_data.db (update): expected version")
            && d[0].detail.contains("Nothing was overwritten"),
        "{}",
        d[0].detail
    );
    let (now, _) = read(&mut pa, "default").await;
    assert_eq!(
        resources_of(&now),
        resources_of(&doc(&[("db", "A2"), ("dns", "B")])),
        "the store holds the winner's"
    );
}

/// The real terraform loads the plugin through dev_overrides: handshake and mTLS against the real host.
#[test]
fn real_terraform_loads_the_plugin() {
    let Ok(v) = std::process::Command::new("terraform")
        .arg("version")
        .output()
    else {
        panic!(
            "terraform is not on PATH: this test needs the real terraform binary (1.11.4 ships on this machine kind)"
        );
    };
    assert!(v.status.success());
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_choudoufu-live"),
        bin.join("terraform-provider-live"),
    )
    .unwrap();
    let rc = dir.path().join("cli.tfrc");
    std::fs::write(&rc, format!("provider_installation {{\n  dev_overrides {{\n    \"choudoufu/live\" = \"{}\"\n  }}\n  direct {{}}\n}}\n", bin.display())).unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("main.tf"), "terraform {\n  required_providers {\n    live = { source = \"choudoufu/live\" }\n  }\n}\nprovider \"live\" {}\n").unwrap();
    let out = std::process::Command::new("terraform")
        .args(["providers", "schema", "-json"])
        .current_dir(&root)
        .env("CHECKPOINT_DISABLE", "1")
        .env("TF_CLI_CONFIG_FILE", &rc)
        .env("TF_LOG", "debug")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    let schema: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        schema["provider_schemas"]["registry.terraform.io/choudoufu/live"]["provider"].is_object(),
        "{schema}"
    );
    assert!(
        log.contains("configuring client automatic mTLS"),
        "terraform used AutoMTLS"
    );
    assert!(
        log.contains("\"tls\":true") || log.contains("tls=true"),
        "the plugin served TLS: {log}"
    );
}
