//! The AWS marker lister as a library (what `run` and the plugin call), against real moto_server.

use choudoufu_live::cloud::aws::markers::{
    AwsLister, AwsProviderConfig, FindError, ListingError, type_filter,
};
use choudoufu_live::engine::markers::Family;
use choudoufu_live::engine::markers::unrecorded::{Recorded, RecordedResource};
use serde_json::json;
use testkit::aws_objects::*;

#[test]
fn endpoints_and_region_come_only_from_the_provider_configuration() {
    // with-moto sets AWS_REGION; no configuration still means no listing.
    assert!(matches!(
        AwsProviderConfig::from_json(&json!(null)),
        Err(ListingError::NoConfiguration { .. })
    ));
    let e = AwsProviderConfig::from_json(
        &json!({"endpoints": {"resourcegroupstaggingapi": "http://127.0.0.1:1"}}),
    )
    .unwrap_err();
    assert!(matches!(e, ListingError::NoRegion), "{e}");
    assert!(e.to_string().contains("NoProviderConfiguration"), "{e}");
    // A custom endpoint for the service wins over the generic one; both as a block or a list of one.
    let c = AwsProviderConfig::from_json(&json!({
        "region": "eu-west-1",
        "endpoint_url": "http://127.0.0.1:2",
        "endpoints": [{"resourcegroupstaggingapi": "http://127.0.0.1:3", "sqs": null}]
    }))
    .unwrap();
    assert_eq!(c.region, "eu-west-1");
    assert_eq!(c.tagging_endpoint.as_deref(), Some("http://127.0.0.1:3"));
    assert_eq!(c.sqs_endpoint.as_deref(), Some("http://127.0.0.1:2"));
    let plain = AwsProviderConfig::from_json(&json!({"region": "eu-west-1"})).unwrap();
    assert_eq!(
        plain.tagging_endpoint, None,
        "the configured region's own endpoint, nothing else"
    );
}

#[test]
fn type_filters() {
    assert_eq!(type_filter("aws_sqs_queue"), Some("sqs:queue"));
    assert_eq!(type_filter("aws_s3_bucket"), Some("s3:bucket"));
    assert_eq!(type_filter("aws_instance"), Some("ec2:instance"));
    assert_eq!(type_filter("aws_iam_role"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn library_binds_one_refuses_two_and_names_the_unrecorded() {
    let estate = unique("lib");
    let lister = AwsLister::from_json(&provider_config()).await.unwrap();
    // Nothing yet: create.
    assert_eq!(
        lister
            .find_by_markers(&estate, "aws_instance", "aws_instance.web[\"a\"]")
            .await
            .unwrap(),
        None
    );
    let web = run_instance(&markers(&estate, "aws_instance.web[\"a\"]")).await;
    let bucket = format!("{estate}-b1");
    create_bucket(&bucket, &markers(&estate, "aws_s3_bucket.logs")).await;
    // One each: bound, with the ID terraform imports by.
    let bound = lister
        .find_by_markers(&estate, "aws_instance", "aws_instance.web[\"a\"]")
        .await
        .unwrap()
        .expect("bound");
    assert_eq!(bound.import_id.as_deref(), Some(web.as_str()));
    assert!(
        bound.arn.ends_with(&format!(":instance/{web}")),
        "{}",
        bound.arn
    );
    let b = lister
        .find_by_markers(&estate, "aws_s3_bucket", "aws_s3_bucket.logs")
        .await
        .unwrap()
        .expect("bound");
    assert_eq!(b.arn, format!("arn:aws:s3:::{bucket}"));
    assert_eq!(b.import_id.as_deref(), Some(bucket.as_str()));
    // A second instance with the same markers: CollisionError naming both.
    let twin = run_instance(&markers(&estate, "aws_instance.web[\"a\"]")).await;
    match lister
        .find_by_markers(&estate, "aws_instance", "aws_instance.web[\"a\"]")
        .await
    {
        Err(FindError::Collision(c)) => {
            assert_eq!(c.ids.len(), 2, "{c}");
            let text = c.to_string();
            assert!(text.contains(&web) && text.contains(&twin), "{text}");
        }
        other => panic!("expected a collision, got {other:?}"),
    }
    assert_eq!(
        instances_tagged("tofu-estate", &estate).await.len(),
        2,
        "nothing created"
    );
    // Records name the bucket and web["a"]: the instances are named, the bucket is named;
    // drop the bucket's record and it is reported, and still there.
    let web_a = RecordedResource {
        address: "aws_instance.web[\"a\"]",
        provider: "provider[\"registry.terraform.io/hashicorp/aws\"]",
        type_name: "aws_instance",
    };
    let unrecorded = lister
        .list_unrecorded(
            &estate,
            &Recorded::of(Family::Aws, [web_a]),
            &["aws_instance".to_string(), "aws_s3_bucket".to_string()],
        )
        .await
        .unwrap();
    assert_eq!(unrecorded.len(), 1, "{unrecorded:?}");
    assert_eq!(unrecorded[0].address(), Some("aws_s3_bucket.logs"));
    assert_eq!(buckets(&bucket).await, vec![bucket.clone()]);
    // A type with no filter: one listing with no type filter still finds it.
    let all = lister
        .list_unrecorded(
            &estate,
            &Recorded::default(),
            &["aws_ssm_parameter".to_string()],
        )
        .await
        .unwrap();
    assert_eq!(all.len(), 3, "{all:?}");
}
