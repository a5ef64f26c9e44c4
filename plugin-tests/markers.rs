//! Live markers on AWS over the real plugin (go-plugin handshake, mTLS) and real moto_server:
//! FindByMarkers binds what a killed run created, refuses two, never binds another estate's;
//! ListUnrecorded names marked objects no record names and deletes nothing.

use std::path::Path;
use std::time::{Duration, Instant};

use choudoufu_live::frontdoor::plugin::proto::live as pb;
use choudoufu_live::frontdoor::plugin::proto::live::live_client::LiveClient;
use serde_json::{Value, json};
use tonic::transport::Channel;

use crate::choudoufu::read;
use crate::host::{ClientCert, Launch, Plugin, client_cert};
use testkit::aws_objects::*;

const AWS: &str = "registry.terraform.io/hashicorp/aws";
const AWS_CONFIG_ADDR: &str = "provider[\"registry.terraform.io/hashicorp/aws\"]";

type Client = LiveClient<Channel>;

async fn start(dir: &Path, cert: &ClientCert, estate: &str) -> (Client, Plugin) {
    let plugin = Launch::new(dir, Some(cert)).start();
    let mut client = LiveClient::new(plugin.channel_with(Some(cert)).await.expect("connect"));
    let r = client
        .configure(pb::ConfigureRequest {
            estate: estate.into(),
            store: Some(pb::StoreSettings {
                kind: "local".into(),
                path: "recs".into(),
                ..Default::default()
            }),
            heartbeat_millis: 200,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
    (client, plugin)
}

async fn find(
    c: &mut Client,
    ty: &str,
    address: &str,
    config: &Value,
) -> pb::FindByMarkersResponse {
    c.find_by_markers(pb::FindByMarkersRequest {
        provider: AWS.into(),
        resource_type: ty.into(),
        address: address.into(),
        provider_config_json: if config.is_null() {
            vec![]
        } else {
            serde_json::to_vec(config).unwrap()
        },
    })
    .await
    .unwrap()
    .into_inner()
}

fn outcome(r: &pb::FindByMarkersResponse) -> pb::find_by_markers_response::Outcome {
    pb::find_by_markers_response::Outcome::try_from(r.outcome).unwrap()
}

/// The tags InjectMarkers puts into the create's config.
async fn injected_tags(
    c: &mut Client,
    ty: &str,
    address: &str,
) -> std::collections::BTreeMap<String, String> {
    let r = c
        .inject_markers(pb::InjectMarkersRequest {
            provider: AWS.into(),
            resource_type: ty.into(),
            address: address.into(),
            config_json: br#"{"tags": {"team": "db"}}"#.to_vec(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
    let config: Value = serde_json::from_slice(&r.config_json).unwrap();
    serde_json::from_value(config["tags"].clone()).unwrap()
}

/// The resource's three kinds in this test: its type, address and how it is made on moto.
#[derive(Clone, Copy, Debug)]
enum Made {
    Queue,
    Bucket,
    Instance,
}

impl Made {
    fn ty(self) -> &'static str {
        match self {
            Made::Queue => "aws_sqs_queue",
            Made::Bucket => "aws_s3_bucket",
            Made::Instance => "aws_instance",
        }
    }
    fn address(self) -> String {
        format!("{}.this", self.ty())
    }
    /// Create it on moto as the provider would; the ID terraform imports it by.
    async fn create(
        self,
        estate: &str,
        tags: &std::collections::BTreeMap<String, String>,
        n: usize,
    ) -> String {
        match self {
            Made::Queue => create_queue(&format!("{estate}-q{n}"), tags).await,
            Made::Bucket => {
                let name = format!("{estate}-b{n}");
                create_bucket(&name, tags).await;
                name
            }
            Made::Instance => run_instance(tags).await,
        }
    }
    /// How many of it exist on moto, counted through the service's own API.
    async fn count(self, estate: &str) -> usize {
        match self {
            Made::Queue => queues(&format!("{estate}-q")).await.len(),
            Made::Bucket => buckets(&format!("{estate}-b")).await.len(),
            Made::Instance => instances_tagged("tofu-estate", estate).await.len(),
        }
    }
}

/// What the patched tofu does for a planned create once BeginChange marked it: ask
/// FindByMarkers, and adopt the one object found, or create, or stop on a collision.
/// Returns the ID the record will hold, or the response that stopped it.
async fn create_or_bind(
    c: &mut Client,
    made: Made,
    estate: &str,
    n: usize,
) -> Result<String, pb::FindByMarkersResponse> {
    let address = made.address();
    let found = find(c, made.ty(), &address, &provider_config()).await;
    use pb::find_by_markers_response::Outcome as O;
    match outcome(&found) {
        O::Bind => Ok(found.objects[0].import_id.clone()),
        O::NotFound => {
            let tags = injected_tags(c, made.ty(), &address).await;
            Ok(made.create(estate, &tags, n).await)
        }
        _ => Err(found),
    }
}

async fn begin_create(c: &mut Client, address: &str) {
    let started = Instant::now();
    loop {
        let r = c
            .begin_change(pb::BeginChangeRequest {
                address: address.into(),
                operation: "create".into(),
                dependencies: vec![],
            })
            .await
            .unwrap()
            .into_inner();
        if r.outcome == pb::begin_change_response::Outcome::Marked as i32 {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{address} was never marked: {:?}",
            r.diagnostics
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn record(
    made: Made,
    id: &str,
    tags: &std::collections::BTreeMap<String, String>,
) -> pb::RecordWrite {
    pb::RecordWrite {
        address: made.address(),
        kind: pb::RecordKind::Resource as i32,
        op: pb::record_write::Op::Create as i32,
        content: serde_json::to_vec(&json!({
            "resource": {"mode": "managed", "type": made.ty(), "name": "this", "provider": AWS_CONFIG_ADDR},
            "instance": {"schema_version": 0, "attributes": {"id": id, "tags": tags}}
        }))
        .unwrap(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_killed_run_created_is_bound_by_the_next_run_not_created_again() {
    let dir = tempfile::tempdir().unwrap();
    let cert = client_cert();
    let estate = unique("mk");
    let all = [Made::Queue, Made::Bucket, Made::Instance];
    // Run 1: marks each create, finds nothing, creates each object with its markers on moto
    // as the provider would ... and is killed (SIGKILL) before any record write.
    let (mut first, mut first_plugin) = start(dir.path(), &cert, &estate).await;
    read(&mut first).await;
    let mut created = Vec::new();
    for made in all {
        begin_create(&mut first, &made.address()).await;
        let id = create_or_bind(&mut first, made, &estate, 1)
            .await
            .expect("the first run creates");
        created.push(id);
    }
    first_plugin.child.kill().unwrap();
    first_plugin.child.wait().unwrap();
    drop(first);
    for made in all {
        assert_eq!(made.count(&estate).await, 1, "{made:?} was created once");
    }
    // Run 2: no records, only the dead run's marks; the collision check binds each object.
    let (mut next, _next_plugin) = start(dir.path(), &cert, &estate).await;
    let entries = read(&mut next).await;
    for made in all {
        let e = entries
            .iter()
            .find(|e| e.address == made.address())
            .unwrap_or_else(|| panic!("{made:?}: the dead run's mark is there"));
        assert!(e.pending_only, "{made:?} has a mark and no record");
    }
    for (i, made) in all.into_iter().enumerate() {
        begin_create(&mut next, &made.address()).await;
        let found = find(&mut next, made.ty(), &made.address(), &provider_config()).await;
        assert_eq!(
            outcome(&found),
            pb::find_by_markers_response::Outcome::Bind,
            "{made:?}: {found:?}"
        );
        assert_eq!(found.objects.len(), 1);
        assert_eq!(
            found.objects[0].import_id, created[i],
            "{made:?} binds the object the dead run created"
        );
        assert_eq!(found.objects[0].address, made.address());
        assert!(
            !found.empty_proves_absent,
            "AWS listing consistency is not claimed"
        );
        let id = create_or_bind(&mut next, made, &estate, 2).await.unwrap();
        assert_eq!(id, created[i]);
        let tags = markers(&estate, &made.address());
        let w = next
            .write_records(pb::WriteRecordsRequest {
                writes: vec![record(made, &id, &tags)],
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            w.results[0].outcome,
            pb::record_result::Outcome::Written as i32,
            "{w:?}"
        );
    }
    // No second object of any kind was created.
    for made in all {
        assert_eq!(made.count(&estate).await, 1, "{made:?}: no second object");
    }
    // Every marked object now has its record: nothing unrecorded.
    let u = next
        .list_unrecorded(pb::ListUnrecordedRequest {
            providers: vec![pb::ProviderConfiguration {
                address: AWS_CONFIG_ADDR.into(),
                config_json: serde_json::to_vec(&provider_config()).unwrap(),
            }],
            resource_types: vec![],
        })
        .await
        .unwrap()
        .into_inner();
    assert!(u.objects.is_empty(), "{u:?}");
    assert!(u.diagnostics.is_empty(), "{u:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_objects_with_the_same_markers_are_a_collision_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let cert = client_cert();
    let estate = unique("mc");
    let tags = markers(&estate, "aws_sqs_queue.this");
    let a = create_queue(&format!("{estate}-q1"), &tags).await;
    let b = create_queue(&format!("{estate}-q2"), &tags).await;
    let (arn_a, arn_b) = (queue_arn(&a).await, queue_arn(&b).await);
    let (mut c, _p) = start(dir.path(), &cert, &estate).await;
    begin_create(&mut c, "aws_sqs_queue.this").await;
    let stopped = create_or_bind(&mut c, Made::Queue, &estate, 3)
        .await
        .expect_err("two objects carry the markers: no create, no bind");
    assert_eq!(
        outcome(&stopped),
        pb::find_by_markers_response::Outcome::Collision
    );
    let ids: Vec<&str> = stopped.objects.iter().map(|o| o.id.as_str()).collect();
    assert!(
        ids.contains(&arn_a.as_str()) && ids.contains(&arn_b.as_str()),
        "{ids:?}"
    );
    let d = &stopped.diagnostics[0];
    assert_eq!(d.severity, pb::diagnostic::Severity::Error as i32);
    assert!(d.detail.contains("CollisionError"), "{}", d.detail);
    assert!(
        d.detail.contains(&arn_a) && d.detail.contains(&arn_b),
        "{}",
        d.detail
    );
    assert_eq!(Made::Queue.count(&estate).await, 2, "nothing was created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_marked_for_another_estate_is_never_bound() {
    let dir = tempfile::tempdir().unwrap();
    let cert = client_cert();
    let estate = unique("me");
    let other = format!("{estate}-other");
    // The same address, marked for another estate.
    create_queue(
        &format!("{estate}-q1"),
        &markers(&other, "aws_sqs_queue.this"),
    )
    .await;
    let (mut c, _p) = start(dir.path(), &cert, &estate).await;
    let found = find(
        &mut c,
        "aws_sqs_queue",
        "aws_sqs_queue.this",
        &provider_config(),
    )
    .await;
    assert_eq!(
        outcome(&found),
        pb::find_by_markers_response::Outcome::NotFound,
        "{found:?}"
    );
    assert!(found.objects.is_empty());
    // Nor is it reported as this estate's unrecorded object.
    let u = c
        .list_unrecorded(pb::ListUnrecordedRequest {
            providers: vec![pb::ProviderConfiguration {
                address: AWS_CONFIG_ADDR.into(),
                config_json: serde_json::to_vec(&provider_config()).unwrap(),
            }],
            resource_types: vec!["aws_sqs_queue".into()],
        })
        .await
        .unwrap()
        .into_inner();
    assert!(u.objects.is_empty(), "{u:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_marked_object_no_record_names_is_reported_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let cert = client_cert();
    let estate = unique("mu");
    let (mut c, _p) = start(dir.path(), &cert, &estate).await;
    // A recorded queue...
    let kept_tags = markers(&estate, "aws_sqs_queue.this");
    let kept = create_queue(&format!("{estate}-q1"), &kept_tags).await;
    let w = c
        .write_records(pb::WriteRecordsRequest {
            writes: vec![record(Made::Queue, &kept, &kept_tags)],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        w.results[0].outcome,
        pb::record_result::Outcome::Written as i32
    );
    // ... and one marked by this estate that no record names.
    let orphan = create_queue(
        &format!("{estate}-q2"),
        &markers(&estate, "aws_sqs_queue.orphan"),
    )
    .await;
    let orphan_arn = queue_arn(&orphan).await;
    let u = c
        .list_unrecorded(pb::ListUnrecordedRequest {
            providers: vec![pb::ProviderConfiguration {
                address: AWS_CONFIG_ADDR.into(),
                config_json: serde_json::to_vec(&provider_config()).unwrap(),
            }],
            resource_types: vec![],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(u.objects.len(), 1, "{u:?}");
    assert_eq!(u.objects[0].id, orphan_arn);
    assert_eq!(u.objects[0].address, "aws_sqs_queue.orphan");
    assert_eq!(u.objects[0].import_id, orphan);
    let warn = &u.diagnostics[0];
    assert_eq!(warn.severity, pb::diagnostic::Severity::Warning as i32);
    assert!(
        warn.detail.contains(&orphan_arn) && warn.detail.contains("aws_sqs_queue.orphan"),
        "{}",
        warn.detail
    );
    assert!(warn.detail.contains("not deleted"), "{}", warn.detail);
    // Both queues still exist.
    let left = queues(&format!("{estate}-q")).await;
    assert!(left.contains(&orphan) && left.contains(&kept), "{left:?}");
    // Without the provider configuration, nothing is listed, and the plugin says so.
    let none = c
        .list_unrecorded(pb::ListUnrecordedRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(none.objects.is_empty());
    assert!(
        none.diagnostics[0]
            .detail
            .contains("NoProviderConfiguration"),
        "{:?}",
        none.diagnostics
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_provider_configuration_no_listing() {
    let dir = tempfile::tempdir().unwrap();
    let cert = client_cert();
    let (mut c, _p) = start(dir.path(), &cert, &unique("mn")).await;
    // AWS_REGION is set in the plugin's environment; it is not used.
    for config in [
        Value::Null,
        json!({"endpoints": [{"resourcegroupstaggingapi": endpoint()}]}),
    ] {
        let r = find(&mut c, "aws_sqs_queue", "aws_sqs_queue.this", &config).await;
        assert_eq!(
            outcome(&r),
            pb::find_by_markers_response::Outcome::NotListed
        );
        assert_eq!(
            r.diagnostics[0].severity,
            pb::diagnostic::Severity::Error as i32
        );
        assert!(
            r.diagnostics[0].detail.contains("NoProviderConfiguration"),
            "{:?}",
            r.diagnostics
        );
    }
    // A family with no lister yet says so.
    let g = c
        .find_by_markers(pb::FindByMarkersRequest {
            provider: "registry.terraform.io/hashicorp/google".into(),
            resource_type: "google_storage_bucket".into(),
            address: "google_storage_bucket.b".into(),
            provider_config_json: br#"{"project": "p"}"#.to_vec(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        outcome(&g),
        pb::find_by_markers_response::Outcome::NotListed
    );
}
