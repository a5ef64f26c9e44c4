//! The S3 door without terraform: what reaches it unsigned or signed with another secret is
//! refused with 403 and reads or writes nothing; the run's own signature gets the state served
//! from the records (whole and by range), written plainly and in parts, and workspaces listed.

use std::sync::Arc;

use aws_sdk_s3::config::{Credentials, Region};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use choudoufu_live::engine::layout::{EstateName, Layout};
use choudoufu_live::engine::program::ProgramStamp;
use choudoufu_live::engine::session::{RunInfo, Session};
use choudoufu_live::frontdoor::http::{Backend, NoTally};
use choudoufu_live::frontdoor::s3::{self, Door, Estates, OpenSession, StateKeys};
use choudoufu_live::store::DynStore;
use choudoufu_live::store::local::LocalStore;

const BUCKET: &str = "states";
const KEY: &str = "team/app.tfstate";

async fn door(dir: &std::path::Path) -> (s3::Server, DynStore) {
    door_with_limit(dir, None).await
}

/// The door over a local store in `dir`, refusing state objects over `limit` bytes (none: the default).
async fn door_with_limit(dir: &std::path::Path, limit: Option<usize>) -> (s3::Server, DynStore) {
    let store: DynStore = Arc::new(LocalStore::new(dir));
    let base = EstateName::parse("team-app").unwrap();
    let run = RunInfo::new(ProgramStamp::default());
    let open: OpenSession = {
        let (store, run) = (store.clone(), run.clone());
        Arc::new(move |estate| Session::new(store.clone(), Layout::new(estate), run.clone()))
    };
    let main = match limit {
        Some(limit) => Backend::with_max_body(open(base.clone()), Arc::new(NoTally), limit),
        None => Backend::new(open(base.clone()), Arc::new(NoTally)),
    };
    let estates = Estates::new(
        base,
        "default".into(),
        main.clone(),
        open,
        Arc::new(NoTally),
    );
    let keys = StateKeys {
        bucket: BUCKET.into(),
        key: KEY.into(),
        prefix: "env:".into(),
    };
    let server = s3::serve(Door::new(keys, Arc::new(estates)), main, None)
        .await
        .unwrap();
    (server, store)
}

fn env(server: &s3::Server, name: &str) -> String {
    server
        .terraform_env()
        .into_iter()
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
        .unwrap()
}

fn client(server: &s3::Server, secret: &str) -> aws_sdk_s3::Client {
    let config = aws_sdk_s3::Config::builder()
        .behavior_version_latest()
        .endpoint_url(server.endpoint())
        .region(Region::new("us-east-1"))
        .force_path_style(true)
        .credentials_provider(Credentials::new(s3::ACCESS_KEY, secret, None, None, "test"))
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

fn state(output: &str) -> Vec<u8> {
    format!(
        r#"{{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"6d3bd1f5-aaaa-bbbb-cccc-000000000001","outputs":{{"o":{{"value":"{output}","type":"string"}}}},"resources":[],"check_results":null}}"#
    )
    .into_bytes()
}

async fn keys_in(store: &DynStore, prefix: &str) -> Vec<String> {
    choudoufu_live::store::list_all(store.as_ref(), prefix)
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.key)
        .collect()
}

#[tokio::test]
async fn unsigned_and_wrongly_signed_requests_get_403_and_touch_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (server, store) = door(dir.path()).await;
    let url = format!("{}/{BUCKET}/{KEY}", server.endpoint());
    let http = reqwest::Client::new();
    let unsigned = http.get(&url).send().await.unwrap();
    assert_eq!(unsigned.status().as_u16(), 403, "an unsigned GET");
    let unsigned = http.put(&url).body(state("x")).send().await.unwrap();
    assert_eq!(unsigned.status().as_u16(), 403, "an unsigned PUT");
    let wrong = client(&server, "not-the-run-secret");
    let err = wrong
        .put_object()
        .bucket(BUCKET)
        .key(KEY)
        .body(ByteStream::from(state("x")))
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err.raw_response().map(|r| r.status().as_u16()),
        Some(403),
        "{err:?}"
    );
    let err = wrong
        .get_object()
        .bucket(BUCKET)
        .key(KEY)
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err.raw_response().map(|r| r.status().as_u16()),
        Some(403),
        "{err:?}"
    );
    assert!(keys_in(&store, "").await.is_empty(), "nothing was written");
    // The run's own secret gets in: its workspace's fresh state, as the http backend serves it;
    // another workspace with no state yet is not there.
    let ok = client(&server, &env(&server, "AWS_SECRET_ACCESS_KEY"));
    ok.head_object()
        .bucket(BUCKET)
        .key(KEY)
        .send()
        .await
        .unwrap();
    let err = ok
        .head_object()
        .bucket(BUCKET)
        .key(format!("env:/dev/{KEY}"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        err.raw_response().map(|r| r.status().as_u16()),
        Some(404),
        "{err:?}"
    );
    server.stop().await;
}

/// A state object over the door's limit is refused as too large, by name, and nothing is written;
/// many rounds, for the refusal races the client's writing (the door checks the signature over the
/// whole body, so the client has finished writing when it hears the answer).
#[tokio::test]
async fn an_object_over_the_limit_is_refused_by_name_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (server, store) = door_with_limit(dir.path(), Some(64 * 1024)).await;
    let c = client(&server, &env(&server, "AWS_SECRET_ACCESS_KEY"));
    let mut big = state("x");
    big.extend(std::iter::repeat_n(b' ', 100 * 1024));
    for round in 0..20 {
        let err = c
            .put_object()
            .bucket(BUCKET)
            .key(KEY)
            .body(ByteStream::from(big.clone()))
            .send()
            .await
            .expect_err("an object over the limit is refused");
        let service = err
            .as_service_error()
            .unwrap_or_else(|| panic!("round {round}: the client heard no answer: {err:?}"));
        assert_eq!(service.meta().code(), Some("EntityTooLarge"), "{service:?}");
        assert!(
            service
                .meta()
                .message()
                .is_some_and(|m| m.contains("nothing was written")),
            "{service:?}"
        );
    }
    assert!(keys_in(&store, "tofu-records/").await.is_empty());
}

#[tokio::test]
async fn the_state_is_served_from_records_whole_by_range_and_written_in_parts() {
    let dir = tempfile::tempdir().unwrap();
    let (server, store) = door(dir.path()).await;
    let c = client(&server, &env(&server, "AWS_SECRET_ACCESS_KEY"));
    c.put_object()
        .bucket(BUCKET)
        .key(KEY)
        .body(ByteStream::from(state("one")))
        .send()
        .await
        .unwrap();
    assert!(
        keys_in(&store, "tofu-records/team-app/")
            .await
            .contains(&"tofu-records/team-app/o/o".to_string())
    );
    let whole = c.get_object().bucket(BUCKET).key(KEY).send().await.unwrap();
    let whole = whole.body.collect().await.unwrap().into_bytes();
    let doc: serde_json::Value = serde_json::from_slice(&whole).unwrap();
    assert_eq!(doc["outputs"]["o"]["value"], "one");
    let part = c
        .get_object()
        .bucket(BUCKET)
        .key(KEY)
        .range("bytes=0-9")
        .send()
        .await
        .unwrap();
    assert_eq!(
        part.content_range(),
        Some(format!("bytes 0-9/{}", whole.len()).as_str())
    );
    assert_eq!(
        &part.body.collect().await.unwrap().into_bytes()[..],
        &whole[..10]
    );
    // A workspace's state written in two parts lands in its own estate, and is listed.
    let ws_key = format!("env:/dev/{KEY}");
    let doc = state("two");
    let (first, second) = doc.split_at(doc.len() / 2);
    let up = c
        .create_multipart_upload()
        .bucket(BUCKET)
        .key(&ws_key)
        .send()
        .await
        .unwrap();
    let id = up.upload_id().unwrap();
    let mut parts = Vec::new();
    for (n, bytes) in [(1, first), (2, second)] {
        let p = c
            .upload_part()
            .bucket(BUCKET)
            .key(&ws_key)
            .upload_id(id)
            .part_number(n)
            .body(ByteStream::from(bytes.to_vec()))
            .send()
            .await
            .unwrap();
        parts.push(
            CompletedPart::builder()
                .part_number(n)
                .set_e_tag(p.e_tag().map(str::to_string))
                .build(),
        );
    }
    c.complete_multipart_upload()
        .bucket(BUCKET)
        .key(&ws_key)
        .upload_id(id)
        .multipart_upload(
            CompletedMultipartUpload::builder()
                .set_parts(Some(parts))
                .build(),
        )
        .send()
        .await
        .unwrap();
    assert!(
        keys_in(&store, "tofu-records/team-app@dev/")
            .await
            .contains(&"tofu-records/team-app@dev/o/o".to_string())
    );
    let listed = c
        .list_objects_v2()
        .bucket(BUCKET)
        .prefix("env:/")
        .send()
        .await
        .unwrap();
    let keys: Vec<&str> = listed.contents().iter().filter_map(|o| o.key()).collect();
    assert_eq!(keys, vec![ws_key.as_str()]);
    // Nothing but records: no state object was stored.
    assert!(
        keys_in(&store, "")
            .await
            .iter()
            .all(|k| k.starts_with("tofu-records/"))
    );
    server.stop().await;
}
