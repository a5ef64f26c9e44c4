//! Security: the run's state server lets in only its own terraform; records, caches and stamps
//! stay private; hostile input at every door gets a refusal by name and changes nothing.

use testkit as common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use choudoufu_live::engine::layout::{EstateName, Layout};
use choudoufu_live::engine::program::ProgramStamp;
use choudoufu_live::engine::session::{RunInfo, Session};
use choudoufu_live::frontdoor::http::{self, Backend};
use common::state::{document, input, terraform_data};
use common::tf::{Records, Root, text, turn, wait};
use common::{Fixture, Kind};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// What a store holds, byte for byte.

/// Every file under `dir`, hidden ones too, with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(dir: &Path, base: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries {
            let path = e.unwrap().path();
            if path.is_dir() {
                out.insert(
                    format!("{}/", path.strip_prefix(base).unwrap().display()),
                    vec![],
                );
                walk(&path, base, out);
            } else {
                let rel = path.strip_prefix(base).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// Everything a fixture's store holds: every file (local), or every object version and delete marker with its bytes (S3).
async fn snapshot(f: &Fixture) -> BTreeMap<String, Vec<u8>> {
    match f.kind {
        Kind::Local => files(&f.dir.as_ref().unwrap().path().join("records")),
        Kind::S3 => {
            let bucket = f.bucket.clone().unwrap();
            let peer = common::s3_peer(&bucket).await;
            let client = peer.client();
            let mut out = BTreeMap::new();
            let (mut key_marker, mut version_marker) = (None, None);
            loop {
                let page = client
                    .list_object_versions()
                    .bucket(&bucket)
                    .set_key_marker(key_marker.clone())
                    .set_version_id_marker(version_marker.clone())
                    .send()
                    .await
                    .unwrap();
                for v in page.versions() {
                    let (key, id) = (v.key().unwrap(), v.version_id().unwrap_or("null"));
                    let body = client
                        .get_object()
                        .bucket(&bucket)
                        .key(key)
                        .version_id(id)
                        .send()
                        .await
                        .unwrap()
                        .body
                        .collect()
                        .await
                        .unwrap()
                        .into_bytes()
                        .to_vec();
                    out.insert(format!("{key}@{id} {}", v.e_tag().unwrap_or("")), body);
                }
                for m in page.delete_markers() {
                    out.insert(
                        format!(
                            "{}@{} delete marker",
                            m.key().unwrap(),
                            m.version_id().unwrap_or("null")
                        ),
                        vec![],
                    );
                }
                if page.is_truncated() != Some(true) {
                    break;
                }
                key_marker = page.next_key_marker().map(str::to_string);
                version_marker = page.next_version_id_marker().map(str::to_string);
            }
            out
        }
        other => panic!("no snapshot for {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// The run's state server during a real apply.

/// The variables a provisioner's `env` dump holds.
fn env_file(path: &Path) -> BTreeMap<String, String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn wait_for(path: &Path, limit: Duration) {
    let started = Instant::now();
    while !path.exists() {
        assert!(
            started.elapsed() < limit,
            "{} did not appear within {limit:?}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

const SECRET: &str = "s3cret-only-the-run-may-read";

/// During `run -- terraform apply`, a second local client without the run's credentials gets
/// 401 on GET, POST, LOCK and DELETE, learns no value and changes no record; with the
/// credentials terraform was given, the same server answers (so the 401s are the check).
#[test]
fn a_client_without_the_runs_credentials_is_refused_during_a_real_apply() {
    let root = Root::new("guarded", "guarded", &Records::Local);
    let _turn = turn();
    let secret_var = format!("secret={SECRET}");
    root.ok(&["init", "-input=false"]);
    root.ok(&[
        "apply",
        "-auto-approve",
        "-input=false",
        "-var",
        &secret_var,
    ]);
    let records = root.path().join(".live-records");
    let env_path = root.path().join("run.env");
    let go = root.path().join("go");
    let vars = [
        secret_var.clone(),
        "wait=true".into(),
        format!("env_file={}", env_path.display()),
        format!("go_file={}", go.display()),
    ];
    let mut args = vec!["apply", "-auto-approve", "-input=false"];
    for v in &vars {
        args.extend(["-var", v.as_str()]);
    }
    // Debug logs on: the password must not appear even there.
    let child = {
        use std::os::unix::process::CommandExt;
        let mut c = root.run_cmd(&args);
        c.env("CHOUDOUFU_LOG", "debug")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0);
        c.spawn().unwrap()
    };
    wait_for(&env_path, Duration::from_secs(60));
    let env = env_file(&env_path);
    let url = env["TF_HTTP_ADDRESS"].clone();
    let (user, password) = (
        env["TF_HTTP_USERNAME"].clone(),
        env["TF_HTTP_PASSWORD"].clone(),
    );
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    assert!(
        password.len() >= 32,
        "the password carries at least 128 bits: {} hex digits",
        password.len()
    );

    // The second client, while the run waits in its provisioner.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let refused = runtime.block_on(async {
        let before = files(&records);
        let client = reqwest::Client::new();
        let lock = reqwest::Method::from_bytes(b"LOCK").unwrap();
        let wipe = document("1.11.4", "l", vec![]);
        let mut refused = 0;
        for (method, body, auth) in [
            (reqwest::Method::GET, vec![], None),
            (reqwest::Method::POST, wipe.clone(), None),
            (lock.clone(), b"{}".to_vec(), None),
            (reqwest::Method::DELETE, vec![], None),
            (
                reqwest::Method::GET,
                vec![],
                Some((user.clone(), "0".repeat(password.len()))),
            ),
            (
                reqwest::Method::POST,
                wipe.clone(),
                Some(("someone".to_string(), password.clone() + "x")),
            ),
        ] {
            let mut req = client.request(method.clone(), &url).body(body);
            if let Some((u, p)) = &auth {
                req = req.basic_auth(u, Some(p));
            }
            let res = req.send().await.unwrap();
            let status = res.status().as_u16();
            let www = res
                .headers()
                .get("www-authenticate")
                .map(|v| v.to_str().unwrap().to_string());
            let answer = res.text().await.unwrap();
            assert_eq!(status, 401, "{method} {auth:?}: {answer}");
            assert!(
                www.is_some_and(|w| w.starts_with("Basic")),
                "{method}: a basic-auth challenge"
            );
            assert!(
                answer.contains("Nothing was read or written"),
                "{method}: the body says why: {answer}"
            );
            assert!(!answer.contains(SECRET), "{method}: no value learnt");
            refused += 1;
        }
        assert_eq!(
            files(&records),
            before,
            "no record, lock or temp file changed for the refused requests"
        );

        // The same server with the run's credentials: it answers, so the 401s above are the check.
        let res = client
            .get(&url)
            .basic_auth(&user, Some(&password))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 200);
        assert!(
            res.text().await.unwrap().contains(SECRET),
            "with the credentials, the state is served"
        );
        let res = client
            .request(lock, &url)
            .basic_auth(&user, Some(&password))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 200);
        refused
    });

    std::fs::write(&go, "").unwrap();
    let out = wait(child, Duration::from_secs(120));
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!("refused {refused} request(s)")),
        "the summary counts the refusals: {stderr}"
    );
    assert!(
        !stdout.contains(&password) && !stderr.contains(&password),
        "the password appears nowhere in the run's output"
    );
    assert_eq!(
        root.stored_input("seed").as_deref(),
        Some(SECRET),
        "the run's own records are as terraform wrote them"
    );
    assert!(
        root.record("waiter[0]").is_some(),
        "the waiter landed once let go"
    );
}

/// The mode bits of a path.
fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// Every folder and file under `dir`: (path, mode).
fn modes(dir: &Path) -> Vec<(PathBuf, u32)> {
    let mut out = vec![(dir.to_path_buf(), mode(dir))];
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(modes(&p));
        } else {
            out.push((p.clone(), mode(&p)));
        }
    }
    out
}

/// A command run under umask 022, so the modes checked are the code's, not a strict umask's.
fn under_umask_022(cmd: Command) -> Command {
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg("umask 022 && exec \"$0\" \"$@\"")
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        sh.current_dir(dir);
    }
    sh
}

/// After a run, the local store's folders are 0700 and its records 0600, the read cache too;
/// a saved plan's stamp holds versions and digests, never a value.
#[test]
fn records_cache_and_stamps_are_private_after_a_run() {
    let root = Root::new("guarded", "private", &Records::Local);
    let _turn = turn();
    let secret_var = format!("secret={SECRET}");
    let ok = |args: &[&str]| {
        let out = under_umask_022(root.run_cmd(args)).output().unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    };
    ok(&["init", "-input=false"]);
    ok(&[
        "apply",
        "-auto-approve",
        "-input=false",
        "-var",
        &secret_var,
    ]);
    ok(&[
        "apply",
        "-auto-approve",
        "-input=false",
        "-var",
        "secret=second-secret",
    ]);
    let records = root.path().join(".live-records");
    let cache = root.path().join(".terraform").join("choudoufu-live-cache");
    for (what, dir) in [("local store", &records), ("read cache", &cache)] {
        let all = modes(dir);
        assert!(
            all.iter().filter(|(p, _)| p.is_file()).count() >= 2,
            "{what}: {all:?}"
        );
        for (p, m) in all {
            let want = if p.is_dir() { 0o700 } else { 0o600 };
            assert_eq!(m, want, "{what}: {} is {m:o}", p.display());
        }
    }
    // Terraform's own state, for comparison, is world-readable under this umask; ours is not.
    let record = files(&records)
        .into_iter()
        .find(|(_, b)| String::from_utf8_lossy(b).contains("second-secret"));
    assert!(
        record.is_some(),
        "the record holds the value (so privacy matters)"
    );

    ok(&["plan", "-input=false", "-var", &secret_var, "-out=p.tfplan"]);
    let stamp = std::fs::read_to_string(root.path().join("p.tfplan.live-stamp")).unwrap();
    assert!(stamp.contains("\"records\""), "{stamp}");
    for value in [SECRET, "second-secret"] {
        assert!(!stamp.contains(value), "the stamp holds no value: {stamp}");
    }
}

/// A backend address stored in `.terraform/terraform.tfstate` by `init -backend-config` would win
/// over the run's own: `run` refuses by name before terraform starts, and `init -reconfigure`
/// through `run` clears it.
#[test]
fn a_stored_backend_address_is_refused_before_terraform_starts() {
    use std::net::TcpListener;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let root = Root::new("guarded", "stored", &Records::Local);
    let _turn = turn();
    // Somewhere else: answers every request 200 with no state, and counts them.
    let elsewhere = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = elsewhere.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    std::thread::spawn(move || {
        for conn in elsewhere.incoming() {
            let Ok(mut conn) = conn else { continue };
            counted.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 65536];
            let _ = conn.set_read_timeout(Some(Duration::from_millis(200)));
            let _ = conn.read(&mut buf);
            let _ = conn
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    let address = format!("address=http://127.0.0.1:{port}/state");
    // Plain terraform, as a user might have run it once.
    let out = Command::new(common::tf::terraform())
        .args(["init", "-input=false", "-backend-config", &address])
        .current_dir(root.path())
        .env("CHECKPOINT_DISABLE", "1")
        .env("TF_CLI_CONFIG_FILE", &root.cli_config)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stored = std::fs::read_to_string(root.path().join(".terraform/terraform.tfstate")).unwrap();
    assert!(stored.contains(&format!("127.0.0.1:{port}")), "{stored}");
    let before = hits.load(Ordering::SeqCst);

    let out = root.run(&["plan", "-input=false"]);
    let stderr = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stderr}\n{}",
        text(&out.stdout)
    );
    assert!(
        stderr.contains("stores backend \"http\" `address`")
            && stderr.contains("terraform was not started")
            && stderr.contains("init -reconfigure"),
        "refused by name, with what to do: {stderr}"
    );
    assert_eq!(
        hits.load(Ordering::SeqCst),
        before,
        "the stored address was never contacted"
    );
    assert!(
        !root.path().join(".live-records").exists(),
        "nothing was written"
    );

    // Through run, init may not store it again ...
    let out = root.run(&[
        "init",
        "-input=false",
        "-reconfigure",
        "-backend-config",
        &address,
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("-backend-config sets `address`"),
        "{}",
        text(&out.stderr)
    );
    // ... and init -reconfigure through run clears it: the next plan runs against the run's server.
    root.ok(&["init", "-input=false", "-reconfigure"]);
    root.ok(&["plan", "-input=false"]);
    assert_eq!(hits.load(Ordering::SeqCst), before);
}

/// A `backend "http"` block that sets credentials or lock addresses would win over the run's own: refused by name.
#[test]
fn a_backend_block_that_sets_credentials_is_refused() {
    let root = Root::new("guarded", "block", &Records::Local);
    let main = root.path().join("main.tf");
    let text_of_main = std::fs::read_to_string(&main).unwrap();
    for (setting, value) in [
        ("username", "\"me\""),
        ("password", "\"pw\""),
        ("lock_address", "\"http://127.0.0.1:9/lock\""),
    ] {
        std::fs::write(
            &main,
            text_of_main.replace(
                "backend \"http\" {}",
                &format!("backend \"http\" {{\n    {setting} = {value}\n  }}"),
            ),
        )
        .unwrap();
        let out = root.run(&["plan", "-input=false"]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{setting}: {stderr}");
        assert!(
            stderr.contains(&format!("backend \"http\" sets `{setting}`"))
                && stderr.contains("main.tf:"),
            "{setting}: named with its file and line: {stderr}"
        );
        assert!(
            !root.path().join(".terraform").exists(),
            "{setting}: terraform was not started"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The HTTP door, in process: bad documents with the run's credentials.

/// A state server for `estate` on the fixture's store, as `run` starts it, with its credentials.
struct Door {
    server: http::Server,
    url: String,
    user: String,
    password: String,
    client: reqwest::Client,
}

impl Door {
    async fn open(f: &Fixture, estate: &str, max_body: usize) -> Door {
        let layout = Layout::new(EstateName::parse(estate).unwrap());
        let session = Session::new(
            f.store.clone(),
            layout,
            RunInfo::new(ProgramStamp::default()),
        );
        let server = http::serve(Backend::with_max_body(
            session,
            Arc::new(http::NoTally),
            max_body,
        ))
        .await
        .unwrap();
        let env: BTreeMap<&str, String> = server.terraform_env().into_iter().collect();
        Door {
            url: env["TF_HTTP_ADDRESS"].clone(),
            user: env["TF_HTTP_USERNAME"].clone(),
            password: env["TF_HTTP_PASSWORD"].clone(),
            server,
            client: reqwest::Client::new(),
        }
    }

    async fn get(&self) -> Value {
        let res = self
            .client
            .get(&self.url)
            .basic_auth(&self.user, Some(&self.password))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 200);
        res.json().await.unwrap()
    }

    async fn post(&self, body: Vec<u8>) -> (u16, String) {
        let res = self
            .client
            .post(&self.url)
            .basic_auth(&self.user, Some(&self.password))
            .body(body)
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), res.text().await.unwrap())
    }
}

fn data(name: &str, value: &str) -> Value {
    terraform_data(
        name,
        json!({"id": format!("id-{name}"), "input": input(value)}),
    )
}

/// An estate with two records written through the door; the lineage it was served.
async fn seeded(f: &Fixture) -> (Door, String) {
    let door = Door::open(f, "bad-input", 64 * 1024).await;
    let lineage = door.get().await["lineage"].as_str().unwrap().to_string();
    let (status, body) = door
        .post(document(
            "1.11.4",
            &lineage,
            vec![data("a", "secret-a"), data("b", "secret-b")],
        ))
        .await;
    assert_eq!(status, 200, "{body}");
    door.get().await;
    (door, lineage)
}

/// POST `body`: a 4xx whose text has `reason`, the store byte for byte as before, the records still served.
async fn refused_and_unchanged(f: &Fixture, door: &Door, body: Vec<u8>, status: u16, reason: &str) {
    let before = snapshot(f).await;
    assert!(!before.is_empty());
    let (got, text) = door.post(body).await;
    assert_eq!(got, status, "{text}");
    assert!(
        text.contains(reason),
        "the answer says why ({reason}): {text}"
    );
    assert!(text.contains("nothing was written"), "{text}");
    assert_eq!(
        snapshot(f).await,
        before,
        "the store is byte for byte unchanged"
    );
    let served = door.get().await;
    let values: Vec<&str> = served["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["instances"][0]["attributes"]["input"]["value"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(values, ["secret-a", "secret-b"]);
}

async fn oversized_body_is_refused_and_writes_nothing(kind: Kind) {
    let f = Fixture::new(kind, "oversize").await;
    let (door, lineage) = seeded(&f).await;
    let big = document(
        "1.11.4",
        &lineage,
        vec![data("a", &"x".repeat(100 * 1024)), data("b", "changed")],
    );
    refused_and_unchanged(&f, &door, big, 413, "over the 65536-byte limit").await;
    // A declared length over twice the limit is refused before a byte of the body is read.
    let before = snapshot(&f).await;
    let addr = door.server.addr;
    let auth = base64_basic(&door.user, &door.password);
    let answer = tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        write!(
            s,
            "POST /state HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Basic {auth}\r\nContent-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n{{"
        )
        .unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        read_answer(&mut s).unwrap()
    })
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("1000000000 bytes is over"), "{answer}");
    assert_eq!(snapshot(&f).await, before);
    door.server.stop().await;
}

/// One HTTP/1.1 answer read from `s`: its head and body (the body as long as its Content-Length).
fn read_answer(s: &mut std::net::TcpStream) -> std::io::Result<String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if got.len() >= end + 4 + len {
                return Ok(String::from_utf8_lossy(&got[..end + 4 + len]).into_owned());
            }
        }
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("the connection closed after {} bytes", got.len()),
            ));
        }
        got.extend_from_slice(&buf[..n]);
    }
}

/// A body over the limit but under twice it is read to its end before the 413: the client, still
/// writing it slowly, is not cut off, hears why, and its connection answers the next request.
async fn an_oversized_body_is_read_to_its_end_before_the_answer(kind: Kind) {
    let f = Fixture::new(kind, "drain").await;
    let (door, _) = seeded(&f).await;
    let before = snapshot(&f).await;
    let addr = door.server.addr;
    let auth = base64_basic(&door.user, &door.password);
    let outcome = tokio::task::spawn_blocking(move || -> Result<(String, String), String> {
        let mut s = std::net::TcpStream::connect(addr).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(|e| e.to_string())?;
        let len = 100 * 1024;
        write!(
            s,
            "POST /state HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Basic {auth}\r\nContent-Type: application/json\r\nContent-Length: {len}\r\n\r\n"
        )
        .map_err(|e| format!("the head: {e}"))?;
        // The body comes slowly, in four parts: an answer given at its head would come first.
        for part in 0..4 {
            std::thread::sleep(Duration::from_millis(100));
            s.write_all(&vec![b' '; len / 4])
                .map_err(|e| format!("the server cut the body off at part {part}: {e}"))?;
        }
        let refused = read_answer(&mut s).map_err(|e| format!("no answer to the POST: {e}"))?;
        write!(
            s,
            "GET /state HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Basic {auth}\r\n\r\n"
        )
        .map_err(|e| format!("the next request: {e}"))?;
        let next = read_answer(&mut s)
            .map_err(|e| format!("the same connection did not answer again: {e}"))?;
        Ok((refused, next))
    })
    .await
    .unwrap();
    let (refused, next) = outcome.unwrap_or_else(|e| panic!("{kind:?}: {e}"));
    assert!(refused.starts_with("HTTP/1.1 413"), "{refused}");
    assert!(refused.contains("nothing was written"), "{refused}");
    assert!(next.starts_with("HTTP/1.1 200"), "{next}");
    assert_eq!(
        snapshot(&f).await,
        before,
        "the store is byte for byte unchanged"
    );
    door.server.stop().await;
}

fn base64_basic(user: &str, password: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

async fn truncated_json_is_refused_and_writes_nothing(kind: Kind) {
    let f = Fixture::new(kind, "truncated").await;
    let (door, lineage) = seeded(&f).await;
    let mut doc = document("1.11.4", &lineage, vec![data("a", "x"), data("c", "new")]);
    doc.truncate(doc.len() / 2);
    refused_and_unchanged(&f, &door, doc, 400, "not valid JSON").await;
    door.server.stop().await;
}

async fn another_lineage_is_refused_and_writes_nothing(kind: Kind) {
    let f = Fixture::new(kind, "lineage").await;
    let (door, lineage) = seeded(&f).await;
    let other = document(
        "1.11.4",
        "0b6f0c1e-another-state",
        vec![data("a", "from another state")],
    );
    refused_and_unchanged(&f, &door, other, 400, &format!("has lineage {lineage:?}")).await;
    door.server.stop().await;
}

async fn one_address_twice_is_refused_and_writes_nothing(kind: Kind) {
    let f = Fixture::new(kind, "twice").await;
    let (door, lineage) = seeded(&f).await;
    let twice = document(
        "1.11.4",
        &lineage,
        vec![data("a", "one"), data("a", "two"), data("b", "changed")],
    );
    refused_and_unchanged(&f, &door, twice, 400, "holds terraform_data.a twice").await;
    door.server.stop().await;
}

async fn opentofu_encrypted_state_is_refused_by_name_and_writes_nothing(kind: Kind) {
    let f = Fixture::new(kind, "encrypted").await;
    let (door, _) = seeded(&f).await;
    // The envelope OpenTofu writes when `encryption { state { ... } }` is set.
    let envelope = serde_json::to_vec(&json!({
        "meta": {"key_provider.pbkdf2.mine": "eyJzYWx0IjoiLi4uIn0="},
        "encrypted_data": "q83vASNFZ4mrze8BI0VniavN7wEjRWeJq83vASNFZ4k=",
        "encryption_version": "v0"
    }))
    .unwrap();
    refused_and_unchanged(&f, &door, envelope, 400, "OpenTofu-encrypted").await;
    let (_, text) = door
        .post(b"{\"encrypted_data\":\"AAAA\",\"encryption_version\":\"v0\",\"meta\":{}}".to_vec())
        .await;
    assert!(
        text.contains("kms_key_id") && text.contains("SSE-KMS"),
        "it says what to do instead: {text}"
    );
    door.server.stop().await;
}

testkit::per_kind!(
    local => Local, s3 => S3;
    [
        oversized_body_is_refused_and_writes_nothing,
        an_oversized_body_is_read_to_its_end_before_the_answer,
        truncated_json_is_refused_and_writes_nothing,
        another_lineage_is_refused_and_writes_nothing,
        one_address_twice_is_refused_and_writes_nothing,
        opentofu_encrypted_state_is_refused_by_name_and_writes_nothing,
    ]
);

// ---------------------------------------------------------------------------------------------
// The plugin doors, called in process: a diagnostic naming the field, never a panic.

/// A package's `h1:` hash kept from an earlier run is used again only while its files are
/// unchanged: a file changed in place to another of the same size is hashed again, and the
/// package is refused by name (ProviderHashMismatch).
#[test]
fn a_package_changed_after_its_hash_was_kept_is_refused_by_name() {
    use choudoufu_live::frontdoor::provider::kept_hash::{Hashed, KeptHashes};
    use choudoufu_live::frontdoor::provider::lockfile::{self, LockfileError, Package};
    let pkg = tempfile::tempdir().unwrap();
    let exe = pkg.path().join("terraform-provider-aws_v5.100.0_x5");
    std::fs::write(&exe, b"the plugin").unwrap();
    std::fs::write(pkg.path().join("LICENSE.txt"), b"license\n").unwrap();
    let h1 = lockfile::h1(pkg.path()).unwrap();
    let root = tempfile::tempdir().unwrap();
    let lock = root.path().join(lockfile::LOCK_FILE);
    std::fs::write(
        &lock,
        format!(
            "provider \"registry.terraform.io/hashicorp/aws\" {{\n  version = \"5.100.0\"\n  hashes = [\"{h1}\"]\n}}\n"
        ),
    )
    .unwrap();
    let locked = lockfile::read(&lock).unwrap().remove(0);
    let package = Package {
        dir: pkg.path().to_path_buf(),
        executable: exe,
    };
    // Kept at once (the files here are seconds old; a run keeps a hash only after 2 s).
    let kept = KeptHashes::new(root.path().join("kept"), Duration::ZERO);
    let verify = |kept: &KeptHashes| {
        lockfile::verify(&locked, &package, |dir| {
            kept.h1(dir).map(|h| h.h1().to_string())
        })
    };
    assert_eq!(verify(&kept).unwrap(), h1);
    assert_eq!(kept.h1(pkg.path()).unwrap(), Hashed::Kept(h1.clone()));
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(pkg.path().join("LICENSE.txt"), b"LICENSE\n").unwrap();
    let e = verify(&kept).unwrap_err();
    assert!(matches!(e, LockfileError::Mismatch { .. }), "{e}");
    assert!(e.to_string().contains("ProviderHashMismatch"), "{e}");
    assert!(
        mode(&root.path().join("kept")) & 0o077 == 0,
        "the kept hashes are private"
    );
}

mod plugin_doors {
    use super::*;
    use choudoufu_live::frontdoor::plugin::live::LiveService;
    use choudoufu_live::frontdoor::plugin::proto::live as lpb;
    use choudoufu_live::frontdoor::plugin::proto::live::live_server::Live;
    use choudoufu_live::frontdoor::plugin::proto::tfplugin6 as tpb;
    use choudoufu_live::frontdoor::plugin::proto::tfplugin6::provider_server::Provider;
    use choudoufu_live::frontdoor::plugin::state_store::{STORE_TYPE, StateStoreProvider};
    use futures::StreamExt;
    use tonic::Request;

    fn msgpack(v: &rmpv::Value) -> Vec<u8> {
        let mut out = Vec::new();
        rmpv::encode::write_value(&mut out, v).unwrap();
        out
    }

    fn map(entries: Vec<(&str, rmpv::Value)>) -> rmpv::Value {
        rmpv::Value::Map(
            entries
                .into_iter()
                .map(|(k, v)| (rmpv::Value::from(k), v))
                .collect(),
        )
    }

    async fn configure(p: &StateStoreProvider, config: tpb::DynamicValue) -> Vec<tpb::Diagnostic> {
        p.configure_state_store(Request::new(tpb::configure_state_store::Request {
            type_name: STORE_TYPE.into(),
            config: Some(config),
            capabilities: None,
        }))
        .await
        .unwrap()
        .into_inner()
        .diagnostics
    }

    fn attribute(d: &tpb::Diagnostic) -> Option<String> {
        use tpb::attribute_path::step::Selector;
        match d.attribute.as_ref()?.steps.first()?.selector.as_ref()? {
            Selector::AttributeName(n) => Some(n.clone()),
            _ => None,
        }
    }

    /// A state store configuration that is not msgpack, not an object, or has the wrong types:
    /// an error diagnostic naming the attribute (when there is one), and no store opened.
    #[tokio::test]
    async fn state_store_configs_that_are_not_msgpack_or_have_wrong_types_name_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let p = StateStoreProvider::new(dir.path().to_path_buf());
        let mp = |v: rmpv::Value| tpb::DynamicValue {
            msgpack: msgpack(&v),
            json: vec![],
        };
        let cases: Vec<(tpb::DynamicValue, Option<&str>, &str)> = vec![
            (
                tpb::DynamicValue {
                    msgpack: vec![0x81, 0xa6, b'e'],
                    json: vec![],
                },
                None,
                "not valid msgpack",
            ),
            (
                tpb::DynamicValue {
                    msgpack: vec![0x80, 0x00],
                    json: vec![],
                },
                None,
                "after its value",
            ),
            (
                tpb::DynamicValue {
                    msgpack: vec![0xdf, 0xff, 0xff, 0xff, 0xff],
                    json: vec![],
                },
                None,
                "not valid msgpack",
            ),
            (mp(rmpv::Value::from(7)), None, "not an object"),
            (
                mp(rmpv::Value::Map(vec![(
                    rmpv::Value::from(1),
                    rmpv::Value::from("x"),
                )])),
                None,
                "key that is not a string",
            ),
            (
                mp(map(vec![("estate", rmpv::Value::from(5))])),
                Some("estate"),
                "must be a string",
            ),
            (
                mp(map(vec![("estate", rmpv::Value::from(""))])),
                Some("estate"),
                "invalid estate name",
            ),
            (
                mp(map(vec![("estate", rmpv::Value::from("a/b"))])),
                Some("estate"),
                "invalid estate name",
            ),
            (
                mp(map(vec![("estate", rmpv::Value::from("x".repeat(64)))])),
                Some("estate"),
                "invalid estate name",
            ),
            (
                mp(map(vec![
                    ("estate", rmpv::Value::from("prod")),
                    ("skip_bucket_checks", rmpv::Value::from("yes")),
                    ("store", rmpv::Value::from("s3")),
                    ("bucket", rmpv::Value::from("b")),
                ])),
                Some("skip_bucket_checks"),
                "true or false",
            ),
            (
                mp(map(vec![
                    ("estate", rmpv::Value::from("prod")),
                    ("path", rmpv::Value::Array(vec![rmpv::Value::from(1)])),
                ])),
                Some("path"),
                "must be a string",
            ),
            (
                mp(map(vec![
                    ("estate", rmpv::Value::from("prod")),
                    ("store", rmpv::Value::from("tape")),
                ])),
                Some("store"),
                "tape",
            ),
            (
                tpb::DynamicValue {
                    msgpack: vec![],
                    json: b"{\"estate\": ".to_vec(),
                },
                None,
                "not valid JSON",
            ),
        ];
        for (config, field, says) in cases {
            let d = configure(&p, config).await;
            assert_eq!(d.len(), 1, "{field:?} {says}: {d:?}");
            assert_eq!(d[0].severity, tpb::diagnostic::Severity::Error as i32);
            assert!(d[0].detail.contains(says), "{says}: {}", d[0].detail);
            assert_eq!(attribute(&d[0]).as_deref(), field, "{says}: {d:?}");
        }
        assert!(
            std::fs::read_dir(dir.path()).unwrap().next().is_none(),
            "nothing was written"
        );
    }

    /// Workspace names with `/` or `..` (or empty, or too long) are refused by name; nothing is read or written.
    #[tokio::test]
    async fn state_store_workspace_names_with_slashes_or_dots_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = StateStoreProvider::new(dir.path().to_path_buf());
        let ok = configure(
            &p,
            tpb::DynamicValue {
                msgpack: msgpack(&map(vec![("estate", rmpv::Value::from("ws"))])),
                json: vec![],
            },
        )
        .await;
        assert!(ok.is_empty(), "{ok:?}");
        let long = "w".repeat(64);
        for ws in [
            "a/b",
            "..",
            "../prod",
            "",
            ".hidden",
            long.as_str(),
            "a\u{0}b",
        ] {
            let mut stream = p
                .read_state_bytes(Request::new(tpb::read_state_bytes::Request {
                    type_name: STORE_TYPE.into(),
                    state_id: ws.into(),
                }))
                .await
                .unwrap()
                .into_inner();
            let first = stream.next().await.unwrap().unwrap();
            assert_eq!(first.diagnostics.len(), 1, "{ws:?}");
            let d = &first.diagnostics[0];
            assert_eq!(d.summary, "Invalid workspace name", "{ws:?}");
            assert!(d.detail.contains("field `state_id`"), "{}", d.detail);
            let deleted = p
                .delete_state(Request::new(tpb::delete_state::Request {
                    type_name: STORE_TYPE.into(),
                    state_id: ws.into(),
                }))
                .await
                .unwrap()
                .into_inner();
            assert_eq!(deleted.diagnostics.len(), 1, "{ws:?}");
        }
        assert!(
            !dir.path().join(".live-records").exists(),
            "nothing was written"
        );
    }

    fn detail(d: &[lpb::Diagnostic]) -> String {
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].severity, lpb::diagnostic::Severity::Error as i32);
        d[0].detail.clone()
    }

    /// Live-protocol requests with an estate that is empty, too long or holds `/` or `..`, an
    /// address that does not parse, or a dependency that does not: a diagnostic naming the
    /// field, and the store byte for byte unchanged.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn live_requests_with_bad_fields_name_them_and_write_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let svc = LiveService::new(dir.path().to_path_buf());
        let store = lpb::StoreSettings {
            kind: "local".into(),
            path: "records".into(),
            ..Default::default()
        };
        let long = "e".repeat(64);
        for estate in ["", long.as_str(), "a/b", "..", "../x", "prod@ws"] {
            let r = svc
                .configure(Request::new(lpb::ConfigureRequest {
                    estate: estate.into(),
                    store: Some(store.clone()),
                    ..Default::default()
                }))
                .await
                .unwrap()
                .into_inner();
            assert!(
                detail(&r.diagnostics).contains("field `estate`"),
                "{estate:?}: {:?}",
                r.diagnostics
            );
        }
        let r = svc
            .configure(Request::new(lpb::ConfigureRequest {
                estate: "prod".into(),
                store: Some(lpb::StoreSettings {
                    kind: "local".into(),
                    bucket: "b".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_inner();
        assert!(detail(&r.diagnostics).contains("field `store.bucket`"));
        assert!(
            !dir.path().join("records").exists(),
            "a refused Configure writes nothing"
        );

        let r = svc
            .configure(Request::new(lpb::ConfigureRequest {
                estate: "prod".into(),
                store: Some(store),
                heartbeat_millis: 600_000,
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_inner();
        assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
        let content = serde_json::to_vec(&json!({
            "resource": {"mode": "managed", "type": "terraform_data", "name": "a", "provider": "provider[\"terraform.io/builtin/terraform\"]"},
            "instance": {"schema_version": 0, "attributes": {"id": "x"}}
        }))
        .unwrap();
        let write = |address: &str, kind: lpb::RecordKind| lpb::RecordWrite {
            address: address.into(),
            kind: kind as i32,
            op: lpb::record_write::Op::Create as i32,
            content: content.clone(),
            ..Default::default()
        };
        let landed = svc
            .write_records(Request::new(lpb::WriteRecordsRequest {
                writes: vec![write("terraform_data.a", lpb::RecordKind::Resource)],
            }))
            .await
            .unwrap()
            .into_inner();
        assert!(landed.diagnostics.is_empty(), "{:?}", landed.diagnostics);
        let records = dir.path().join("records");
        let before = files(&records);

        let bad_writes: Vec<(Vec<lpb::RecordWrite>, &str)> = vec![
            (
                vec![
                    write("terraform_data.b", lpb::RecordKind::Resource),
                    write("../../escape", lpb::RecordKind::Resource),
                ],
                "writes[1].address",
            ),
            (
                vec![write("terraform_data.", lpb::RecordKind::Resource)],
                "writes[0].address",
            ),
            (
                vec![write("", lpb::RecordKind::Output)],
                "writes[0].address",
            ),
            (
                vec![write("o/x", lpb::RecordKind::Output)],
                "writes[0].address",
            ),
            (
                vec![write("provider.aws", lpb::RecordKind::Provider)],
                "writes[0].address",
            ),
            (
                vec![write("terraform_data.c", lpb::RecordKind::Unspecified)],
                "writes[0].kind",
            ),
            (
                vec![lpb::RecordWrite {
                    expected: None,
                    op: lpb::record_write::Op::Delete as i32,
                    ..write("terraform_data.a", lpb::RecordKind::Resource)
                }],
                "writes[0].expected",
            ),
            (
                vec![lpb::RecordWrite {
                    content: b"{".to_vec(),
                    ..write("terraform_data.c", lpb::RecordKind::Resource)
                }],
                "writes[0].content",
            ),
        ];
        for (writes, field) in bad_writes {
            let r = svc
                .write_records(Request::new(lpb::WriteRecordsRequest { writes }))
                .await
                .unwrap()
                .into_inner();
            assert!(r.results.is_empty(), "{field}: no write was tried");
            let d = detail(&r.diagnostics);
            assert!(d.contains(&format!("field `{field}`")), "{field}: {d}");
            assert!(d.contains("nothing was read or written"), "{d}");
        }
        let r = svc
            .begin_change(Request::new(lpb::BeginChangeRequest {
                address: "terraform_data.a".into(),
                operation: "update".into(),
                dependencies: vec!["terraform_data.db".into(), "db".into()],
            }))
            .await
            .unwrap()
            .into_inner();
        assert!(detail(&r.diagnostics).contains("field `dependencies[1]`"));
        let r = svc
            .begin_change(Request::new(lpb::BeginChangeRequest {
                address: "terraform_data.a".into(),
                operation: "obliterate".into(),
                dependencies: vec![],
            }))
            .await
            .unwrap()
            .into_inner();
        assert!(detail(&r.diagnostics).contains("field `operation`"));
        let r = svc
            .check_plan(Request::new(lpb::CheckPlanRequest {
                stamp: b"{}".to_vec(),
                changed_addresses: vec!["terraform_data.a[\"open".into()],
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_inner();
        assert!(detail(&r.diagnostics).contains("field `changed_addresses[0]`"));
        let r = svc
            .inject_markers(Request::new(lpb::InjectMarkersRequest {
                provider: "registry.terraform.io/hashicorp/aws".into(),
                resource_type: "aws_sqs_queue".into(),
                address: "aws_sqs_queue".into(),
                config_json: b"{}".to_vec(),
            }))
            .await
            .unwrap()
            .into_inner();
        assert!(detail(&r.diagnostics).contains("field `address`"));
        let r = svc
            .find_by_markers(Request::new(lpb::FindByMarkersRequest {
                provider: "registry.terraform.io/hashicorp/aws".into(),
                resource_type: "aws_sqs_queue".into(),
                address: "\u{7}".into(),
                provider_config_json: b"{}".to_vec(),
            }))
            .await
            .unwrap()
            .into_inner();
        assert!(detail(&r.diagnostics).contains("field `address`"));
        assert_eq!(
            files(&records),
            before,
            "the store is byte for byte unchanged"
        );
    }
}
