//! Live objects on moto_server, made as a provider makes them (the tags ride the create call),
//! and counted through each service's own API (never through the Tagging API under test).
//!
//! SQS (JSON protocol) and EC2 (query protocol) are plain HTTP calls; moto_server serves every
//! service on the one loopback endpoint `scripts/with-moto` started, and routes a request by
//! the service named in its SigV4 credential scope. S3 uses the SDK the crate already has.

use std::collections::BTreeMap;

use aws_sdk_s3::config::Region;
use aws_sdk_s3::types::{Tag, Tagging};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The moto_server endpoint; a loud failure when there is none.
pub fn endpoint() -> String {
    crate::s3_endpoint()
}

/// The AWS provider configuration a host would pass for moto: region and custom endpoints.
pub fn provider_config() -> Value {
    let e = endpoint();
    json!({
        "region": "us-east-1",
        "access_key": "testing",
        "secret_key": "testing",
        "endpoints": [{"resourcegroupstaggingapi": e, "sqs": e, "ec2": e, "s3": e}],
        "skip_credentials_validation": true,
        "profile": null
    })
}

async fn http(method: &str, path: &str, headers: &[(&str, String)], body: &str) -> (u16, String) {
    let e = endpoint();
    let hostport = e.trim_start_matches("http://").to_string();
    let mut s = tokio::net::TcpStream::connect(&hostport)
        .await
        .expect("connect to moto");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {hostport}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let status: u16 = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    (status, body)
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

fn auth(service: &str) -> (&'static str, String) {
    (
        "Authorization",
        format!(
            "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/{service}/aws4_request, SignedHeaders=host, Signature=0"
        ),
    )
}

async fn sqs(action: &str, body: Value) -> Value {
    let (status, text) = http(
        "POST",
        "/",
        &[
            auth("sqs"),
            ("X-Amz-Target", format!("AmazonSQS.{action}")),
            ("Content-Type", "application/x-amz-json-1.0".into()),
        ],
        &body.to_string(),
    )
    .await;
    assert_eq!(status, 200, "sqs {action}: {text}");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

async fn ec2(params: &[(String, String)]) -> String {
    let mut body = String::from("Version=2016-11-15");
    for (k, v) in params {
        body.push_str(&format!(
            "&{}={}",
            utf8_percent_encode(k, NON_ALPHANUMERIC),
            utf8_percent_encode(v, NON_ALPHANUMERIC)
        ));
    }
    let (status, text) = http(
        "POST",
        "/",
        &[
            auth("ec2"),
            (
                "Content-Type",
                "application/x-www-form-urlencoded; charset=utf-8".into(),
            ),
        ],
        &body,
    )
    .await;
    assert_eq!(status, 200, "ec2 {params:?}: {text}");
    text
}

fn between<'a>(text: &'a str, open: &str, close: &str) -> Vec<&'a str> {
    text.split(open)
        .skip(1)
        .filter_map(|p| p.split_once(close).map(|(v, _)| v))
        .collect()
}

/// Marker tags for `address` in `estate`.
pub fn markers(estate: &str, address: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("tofu-estate".to_string(), estate.to_string()),
        ("tofu-address".to_string(), address.to_string()),
    ])
}

/// `CreateQueue` with its tags in the call, as the AWS provider does; the queue URL.
pub async fn create_queue(name: &str, tags: &BTreeMap<String, String>) -> String {
    let out = sqs("CreateQueue", json!({"QueueName": name, "tags": tags})).await;
    out["QueueUrl"].as_str().expect("QueueUrl").to_string()
}

/// Queue URLs whose name starts with `prefix`.
pub async fn queues(prefix: &str) -> Vec<String> {
    let out = sqs("ListQueues", json!({"QueueNamePrefix": prefix})).await;
    out["QueueUrls"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|u| u.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// A queue's ARN.
pub async fn queue_arn(url: &str) -> String {
    let out = sqs(
        "GetQueueAttributes",
        json!({"QueueUrl": url, "AttributeNames": ["QueueArn"]}),
    )
    .await;
    out["Attributes"]["QueueArn"]
        .as_str()
        .expect("QueueArn")
        .to_string()
}

/// `RunInstances` with a `TagSpecification` for the instance, as the AWS provider does; its ID.
pub async fn run_instance(tags: &BTreeMap<String, String>) -> String {
    let mut p: Vec<(String, String)> = vec![
        ("Action".into(), "RunInstances".into()),
        ("ImageId".into(), "ami-12c6146b".into()),
        ("InstanceType".into(), "t2.micro".into()),
        ("MinCount".into(), "1".into()),
        ("MaxCount".into(), "1".into()),
        ("TagSpecification.1.ResourceType".into(), "instance".into()),
    ];
    for (i, (k, v)) in tags.iter().enumerate() {
        p.push((format!("TagSpecification.1.Tag.{}.Key", i + 1), k.clone()));
        p.push((format!("TagSpecification.1.Tag.{}.Value", i + 1), v.clone()));
    }
    let text = ec2(&p).await;
    between(&text, "<instanceId>", "</instanceId>")
        .first()
        .expect("an instance id")
        .to_string()
}

/// IDs of the instances whose tag `key` is `value`.
pub async fn instances_tagged(key: &str, value: &str) -> Vec<String> {
    let text = ec2(&[
        ("Action".into(), "DescribeInstances".into()),
        ("Filter.1.Name".into(), format!("tag:{key}")),
        ("Filter.1.Value.1".into(), value.into()),
    ])
    .await;
    let mut ids: Vec<String> = between(&text, "<instanceId>", "</instanceId>")
        .into_iter()
        .map(String::from)
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// An S3 client on moto.
pub async fn s3() -> aws_sdk_s3::Client {
    let shared = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .load()
        .await;
    let conf = aws_sdk_s3::config::Builder::from(&shared)
        .endpoint_url(endpoint())
        .force_path_style(true)
        .build();
    aws_sdk_s3::Client::from_conf(conf)
}

/// `CreateBucket`, then `PutBucketTagging` right after it, as the AWS provider does for a bucket.
pub async fn create_bucket(name: &str, tags: &BTreeMap<String, String>) {
    let c = s3().await;
    c.create_bucket()
        .bucket(name)
        .send()
        .await
        .expect("create bucket");
    let mut t = Tagging::builder();
    for (k, v) in tags {
        t = t.tag_set(Tag::builder().key(k).value(v).build().unwrap());
    }
    c.put_bucket_tagging()
        .bucket(name)
        .tagging(t.build().unwrap())
        .send()
        .await
        .expect("tag bucket");
}

/// Bucket names starting with `prefix`.
pub async fn buckets(prefix: &str) -> Vec<String> {
    let out = s3()
        .await
        .list_buckets()
        .send()
        .await
        .expect("list buckets");
    out.buckets()
        .iter()
        .filter_map(|b| b.name())
        .filter(|n| n.starts_with(prefix))
        .map(String::from)
        .collect()
}

/// A name no other test uses (lowercase, for bucket names too).
pub fn unique(tag: &str) -> String {
    format!("{tag}-{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}
