//! The IAM policy a per-estate role needs (its own records only, and cloud writes on its own tag),
//! and putting it on a role.
//!
//! Three parts:
//! - records: get/put/delete (and object tagging) on `arn:aws:s3:::B/tofu-records/E/*` only,
//!   and `s3:ListBucket` on the bucket only for `s3:prefix` like `tofu-records/E/*`;
//!   plus reading the bucket's three safety settings (the run checks them before writing);
//! - resource writes: a fixed list of mutating actions (EC2, RDS, Lambda) allowed only where
//!   `aws:ResourceTag/tofu-estate` is E (and tag changes never touch the `tofu-estate` key);
//!   creates allowed only when the request tags the new resource with
//!   `aws:RequestTag/tofu-estate` = E (and `ec2:CreateTags` with it only as part of a create);
//! - reads for plans: `Describe`/`List`/`Get` calls of the same services (they take no tag
//!   condition in AWS, so they are unconditioned).
//!
//! The lists are a starting point: extend [`TAGGED_WRITE_ACTIONS`] and [`CREATE_ACTIONS`]
//! with the actions of the services an estate uses, keeping the conditions.

use aws_sdk_iam::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use serde_json::{Value, json};

use crate::cut::{Mechanism, cut};
use crate::engine::layout::{EstateName, ROOT_PREFIX};

/// The tag that names the estate a cloud resource belongs to.
pub const ESTATE_TAG: &str = "tofu-estate";

/// The S3 actions on an estate's record objects.
pub const RECORD_OBJECT_ACTIONS: &[&str] = &[
    "s3:GetObject",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:GetObjectTagging",
    "s3:PutObjectTagging",
];

/// Read-only bucket settings a run reads for its safety check before the first write.
pub const BUCKET_CHECK_ACTIONS: &[&str] = &[
    "s3:GetBucketVersioning",
    "s3:GetLifecycleConfiguration",
    "s3:GetBucketPublicAccessBlock",
];

/// Actions that change or delete an existing resource: allowed only on resources tagged with the estate.
pub const TAGGED_WRITE_ACTIONS: &[&str] = &[
    "ec2:StartInstances",
    "ec2:StopInstances",
    "ec2:RebootInstances",
    "ec2:TerminateInstances",
    "ec2:ModifyInstanceAttribute",
    "ec2:AttachVolume",
    "ec2:DetachVolume",
    "ec2:ModifyVolume",
    "ec2:DeleteVolume",
    "ec2:AuthorizeSecurityGroupIngress",
    "ec2:AuthorizeSecurityGroupEgress",
    "ec2:RevokeSecurityGroupIngress",
    "ec2:RevokeSecurityGroupEgress",
    "ec2:DeleteSecurityGroup",
    "ec2:CreateTags",
    "ec2:DeleteTags",
    "rds:ModifyDBInstance",
    "rds:DeleteDBInstance",
    "rds:AddTagsToResource",
    "rds:RemoveTagsFromResource",
    "lambda:UpdateFunctionCode",
    "lambda:UpdateFunctionConfiguration",
    "lambda:DeleteFunction",
    "lambda:TagResource",
    "lambda:UntagResource",
];

/// Actions that create a resource: allowed only when the request tags it with the estate.
pub const CREATE_ACTIONS: &[&str] = &[
    "ec2:RunInstances",
    "ec2:CreateVolume",
    "ec2:CreateSecurityGroup",
    "rds:CreateDBInstance",
    "lambda:CreateFunction",
];

/// Tagging calls the live markers need: each marked type's own tag calls (the create's tags, read back on refresh).
///
/// S3 buckets are left out, as every S3 action is: the policy grants S3 only on the record bucket.
pub const MARKER_TAGGING_ACTIONS: &[&str] = &[
    "ssm:AddTagsToResource",
    "ssm:ListTagsForResource",
    "iam:TagRole",
    "iam:ListRoleTags",
];

/// The listing `run` makes before a create and after a plan: the Tagging API's, which takes no resource or tag condition.
pub const MARKER_LISTING_ACTIONS: &[&str] = &["tag:GetResources"];

/// Read-only calls a plan's refresh makes (AWS evaluates no resource tag for these).
pub const READ_ACTIONS: &[&str] = &[
    "ec2:Describe*",
    "rds:Describe*",
    "rds:ListTagsForResource",
    "lambda:Get*",
    "lambda:List*",
];

/// The key prefix of an estate's records: `tofu-records/E/`.
pub fn record_prefix(estate: &EstateName) -> String {
    format!("{ROOT_PREFIX}{estate}/")
}

/// The inline policy name `iam apply` uses for an estate.
pub fn policy_name(estate: &EstateName) -> String {
    format!("choudoufu-live-{estate}")
}

/// The policy document for a role that runs estate `estate` with records in `bucket`.
///
/// With `region`, resource writes, creates and reads are allowed only in that region
/// (`aws:RequestedRegion`); record access is not region-bound (the bucket names itself).
pub fn policy(estate: &EstateName, bucket: &str, region: Option<&str>) -> Value {
    let prefix = record_prefix(estate);
    let with_region = |mut cond: Value| {
        if let Some(r) = region {
            cond["StringEquals"]["aws:RequestedRegion"] = json!(r);
        }
        cond
    };
    let tag_on_create: Vec<&str> = CREATE_ACTIONS
        .iter()
        .filter_map(|a| a.strip_prefix("ec2:"))
        .collect();
    let mut statements = vec![
        json!({
            "Sid": "EstateRecordObjects",
            "Effect": "Allow",
            "Action": RECORD_OBJECT_ACTIONS,
            "Resource": if cut(Mechanism::PolicyScope) {
                format!("arn:aws:s3:::{bucket}/*")
            } else {
                format!("arn:aws:s3:::{bucket}/{prefix}*")
            },
        }),
        json!({
            "Sid": "EstateRecordListing",
            "Effect": "Allow",
            "Action": "s3:ListBucket",
            "Resource": format!("arn:aws:s3:::{bucket}"),
            "Condition": {"StringLike": {"s3:prefix": format!("{prefix}*")}},
        }),
        json!({
            "Sid": "RecordBucketSafetyCheck",
            "Effect": "Allow",
            "Action": BUCKET_CHECK_ACTIONS,
            "Resource": format!("arn:aws:s3:::{bucket}"),
        }),
        json!({
            "Sid": "EstateTaggedResourceWrites",
            "Effect": "Allow",
            "Action": TAGGED_WRITE_ACTIONS,
            "Resource": "*",
            "Condition": with_region(json!({
                "StringEquals": {format!("aws:ResourceTag/{ESTATE_TAG}"): estate.as_str()},
                // Tag changes may not touch the estate tag: no handing a resource to another estate.
                "ForAllValues:StringNotEquals": {"aws:TagKeys": [ESTATE_TAG]},
            })),
        }),
        json!({
            "Sid": "EstateCreatesTagged",
            "Effect": "Allow",
            "Action": CREATE_ACTIONS,
            "Resource": "*",
            "Condition": with_region(json!({
                "StringEquals": {format!("aws:RequestTag/{ESTATE_TAG}"): estate.as_str()}
            })),
        }),
        json!({
            "Sid": "EstateTagOnCreate",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": "*",
            "Condition": with_region(json!({
                "StringEquals": {
                    "ec2:CreateAction": tag_on_create,
                    format!("aws:RequestTag/{ESTATE_TAG}"): estate.as_str(),
                }
            })),
        }),
    ];
    statements.push(json!({
        "Sid": "LiveMarkerTagging",
        "Effect": "Allow",
        "Action": MARKER_TAGGING_ACTIONS,
        "Resource": "*",
        "Condition": with_region(json!({
            "StringEquals": {format!("aws:ResourceTag/{ESTATE_TAG}"): estate.as_str()},
        })),
    }));
    statements.push(json!({
        "Sid": "LiveMarkerListing",
        "Effect": "Allow",
        "Action": MARKER_LISTING_ACTIONS,
        "Resource": "*",
    }));
    let reads = match region {
        Some(r) => json!({
            "Sid": "PlanReads",
            "Effect": "Allow",
            "Action": READ_ACTIONS,
            "Resource": "*",
            "Condition": {"StringEquals": {"aws:RequestedRegion": r}},
        }),
        None => json!({
            "Sid": "PlanReads",
            "Effect": "Allow",
            "Action": READ_ACTIONS,
            "Resource": "*",
        }),
    };
    statements.push(reads);
    json!({
        "Version": "2012-10-17",
        "Statement": statements,
    })
}

/// The policy as pretty-printed JSON.
pub fn policy_json(estate: &EstateName, bucket: &str, region: Option<&str>) -> String {
    let value = policy(estate, bucket, region);
    serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string())
}

/// An IAM call failed.
#[derive(Debug, thiserror::Error)]
#[error("IAM {op} on role {role} failed: {message}")]
pub struct IamError {
    /// The operation.
    pub op: &'static str,
    /// The role.
    pub role: String,
    /// What IAM said.
    pub message: String,
}

/// IAM's answer for a stored inline policy: URL-encoded JSON (some peers send it plain).
fn parse_stored(doc: &str) -> Option<serde_json::Value> {
    serde_json::from_str(doc).ok().or_else(|| {
        let decoded = percent_encoding::percent_decode_str(doc)
            .decode_utf8()
            .ok()?;
        serde_json::from_str(&decoded).ok()
    })
}

fn fail<E>(op: &'static str, role: &str, err: &SdkError<E>) -> IamError
where
    E: std::error::Error + ProvideErrorMetadata + Send + Sync + 'static,
{
    IamError {
        op,
        role: role.to_string(),
        message: format!("{}", DisplayErrorContext(err)),
    }
}

/// What `apply` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// The role had no such inline policy.
    Created,
    /// The role's inline policy differed and was replaced.
    Updated,
    /// The role's inline policy was already this one.
    Unchanged,
}

/// Put `policy` on `role` as inline policy `name`, unless it is there already.
pub async fn apply_policy(
    client: &aws_sdk_iam::Client,
    role: &str,
    name: &str,
    policy: &serde_json::Value,
) -> Result<Applied, IamError> {
    let existing = match client
        .get_role_policy()
        .role_name(role)
        .policy_name(name)
        .send()
        .await
    {
        Ok(out) => Some(out.policy_document),
        Err(e) if matches!(&e, SdkError::ServiceError(s) if s.err().is_no_such_entity_exception()) => {
            None
        }
        Err(e) => return Err(fail("GetRolePolicy", role, &e)),
    };
    let outcome = match &existing {
        Some(doc) if parse_stored(doc).as_ref() == Some(policy) => return Ok(Applied::Unchanged),
        Some(_) => Applied::Updated,
        None => Applied::Created,
    };
    client
        .put_role_policy()
        .role_name(role)
        .policy_name(name)
        .policy_document(policy.to_string())
        .send()
        .await
        .map_err(|e| fail("PutRolePolicy", role, &e))?;
    Ok(outcome)
}

/// An IAM client with credentials from the standard chain, on `endpoint` when given.
pub async fn client(endpoint: Option<&str>) -> aws_sdk_iam::Client {
    let shared = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .load()
        .await;
    let mut builder = aws_sdk_iam::config::Builder::from(&shared);
    if shared.region().is_none() {
        builder = builder.region(aws_sdk_iam::config::Region::new("us-east-1"));
    }
    if let Some(endpoint) = endpoint {
        builder = builder.endpoint_url(endpoint);
    }
    aws_sdk_iam::Client::from_conf(builder.build())
}
