//! Live markers on AWS: find live objects by their `tofu-estate` and `tofu-address` tags.
//!
//! One listing is used, the Resource Groups Tagging API (`GetResources` with `TagFilters` and,
//! where the terraform type is in [`TYPE_FILTERS`], `ResourceTypeFilters`). Where it is sent
//! comes only from the provider configuration the host passes: its `region`, and a custom
//! endpoint (`endpoints { resourcegroupstaggingapi = ... }`, or a generic `endpoint_url`).
//! Nothing is taken from the environment or the shared AWS config files for the region or the
//! endpoint, and there is no default region: no configuration, no listing ([`ListingError`]).
//!
//! The listing is eventually consistent (see docs/markers.md): a found object binds, but an
//! empty answer does not prove that no other create landed a moment ago.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_iam::error::DisplayErrorContext as IamErrorContext;
use aws_sdk_resourcegroupstagging::Client;
use aws_sdk_resourcegroupstagging::config::{
    BehaviorVersion, Credentials, Region, SharedCredentialsProvider,
};
use aws_sdk_resourcegroupstagging::error::DisplayErrorContext;
use aws_sdk_resourcegroupstagging::types::TagFilter;
use serde_json::Value;
use thiserror::Error;

use crate::cut::{Mechanism, cut};
pub use crate::engine::markers::instance_address;
use crate::engine::markers::unrecorded::Recorded;
use crate::engine::markers::{ADDRESS_TAG, ESTATE_TAG, Family};

/// Two or more live objects carry one resource's live markers: none is bound, nothing is created.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error(
    "CollisionError: {address} (estate {estate:?}): {} live objects carry its markers (tofu-estate, tofu-address): {}. None was bound and nothing was created; delete the extra object(s), or import the right one, and apply again.",
    ids.len(),
    ids.join(", ")
)]
pub struct CollisionError {
    /// The resource instance address.
    pub address: String,
    /// The estate.
    pub estate: String,
    /// Every object found (ARNs), in order.
    pub ids: Vec<String>,
}

/// Terraform resource types and the Tagging API resource type that lists them.
///
/// A type not in this table is listed with no type filter (its markers alone select it).
pub const TYPE_FILTERS: &[(&str, &str)] = &[
    ("aws_sqs_queue", "sqs:queue"),
    ("aws_s3_bucket", "s3:bucket"),
    ("aws_instance", "ec2:instance"),
    ("aws_vpc", "ec2:vpc"),
    ("aws_subnet", "ec2:subnet"),
    ("aws_security_group", "ec2:security-group"),
    ("aws_ebs_volume", "ec2:volume"),
    ("aws_internet_gateway", "ec2:internet-gateway"),
    ("aws_route_table", "ec2:route-table"),
    ("aws_nat_gateway", "ec2:natgateway"),
    ("aws_dynamodb_table", "dynamodb:table"),
    ("aws_lambda_function", "lambda:function"),
];

/// The terraform type listed by IAM itself, not by the Tagging API.
pub const IAM_ROLE: &str = "aws_iam_role";

/// The Tagging API resource type for a terraform resource type, when the table has one.
pub fn type_filter(resource_type: &str) -> Option<&'static str> {
    TYPE_FILTERS
        .iter()
        .find(|(t, _)| *t == resource_type)
        .map(|(_, f)| *f)
}

/// Why no listing was made.
#[derive(Clone, Debug, Error)]
pub enum ListingError {
    /// The host passed no provider configuration: nothing is listed, and no default is used.
    #[error(
        "NoProviderConfiguration: {what}: no AWS provider configuration was passed, so no live objects were listed (the endpoint and region come only from the provider configuration; there is no default and no public cloud fallback)"
    )]
    NoConfiguration {
        /// What the listing was for (an address, or the estate).
        what: String,
    },
    /// The provider configuration names no region.
    #[error(
        "NoProviderConfiguration: the AWS provider configuration has no region, so no live objects were listed (the region is not taken from the environment or from a default)"
    )]
    NoRegion,
    /// The provider configuration is not a JSON object of the expected shape.
    #[error("the AWS provider configuration cannot be read: {0}; no live objects were listed")]
    BadConfiguration(String),
    /// The Tagging API answered with an error.
    #[error("tagging:GetResources at {endpoint} failed: {message}")]
    Api {
        /// Where the call went.
        endpoint: String,
        /// What came back.
        message: String,
    },
}

/// Why the collision check did not answer with zero or one object.
#[derive(Debug, Error)]
pub enum FindError {
    /// Nothing could be listed.
    #[error(transparent)]
    Listing(#[from] ListingError),
    /// Two or more objects carry the markers: none is bound.
    #[error(transparent)]
    Collision(#[from] CollisionError),
}

/// The parts of an AWS provider configuration the listing uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AwsProviderConfig {
    /// `region`.
    pub region: String,
    /// `endpoints { resourcegroupstaggingapi = ... }`, else the generic `endpoint_url`.
    pub tagging_endpoint: Option<String>,
    /// `endpoints { sqs = ... }`, else the generic `endpoint_url`: for SQS queue URLs.
    pub sqs_endpoint: Option<String>,
    /// `endpoints { iam = ... }`, else the generic `endpoint_url`: for IAM roles, which the Tagging API does not list.
    pub iam_endpoint: Option<String>,
    /// `endpoints { s3 = ... }`, else the generic `endpoint_url`: for a bucket's tags.
    pub s3_endpoint: Option<String>,
    /// `s3_use_path_style`: bucket requests name the bucket in the path, not the host.
    pub s3_path_style: bool,
    /// `access_key`, `secret_key`, `token`, when the configuration sets them.
    pub static_credentials: Option<(String, String, Option<String>)>,
    /// `profile`, for the credentials chain.
    pub profile: Option<String>,
}

fn text(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

impl AwsProviderConfig {
    /// Read the provider configuration (the `provider "aws"` block's values as JSON).
    ///
    /// `endpoints` may be an object or a list holding one (terraform's JSON of a nested block).
    pub fn from_json(config: &Value) -> Result<Self, ListingError> {
        let obj = match config {
            Value::Object(o) => o,
            Value::Null => {
                return Err(ListingError::NoConfiguration {
                    what: "the provider".into(),
                });
            }
            other => {
                return Err(ListingError::BadConfiguration(format!(
                    "expected a JSON object, got {other}"
                )));
            }
        };
        let region = text(obj.get("region")).ok_or(ListingError::NoRegion)?;
        let endpoints = match obj.get("endpoints") {
            Some(Value::Array(items)) => items.iter().find(|v| v.is_object()).cloned(),
            Some(v @ Value::Object(_)) => Some(v.clone()),
            Some(Value::Null) | None => None,
            Some(other) => {
                return Err(ListingError::BadConfiguration(format!(
                    "endpoints must be a block, got {other}"
                )));
            }
        };
        let endpoint = |names: &[&str]| {
            let e = endpoints.as_ref();
            names.iter().find_map(|n| text(e.and_then(|e| e.get(*n))))
        };
        let generic = text(obj.get("endpoint_url"));
        let tagging_endpoint = endpoint(&["resourcegroupstaggingapi", "resourcegroupstagging"])
            .or_else(|| generic.clone());
        let sqs_endpoint = endpoint(&["sqs"]).or_else(|| generic.clone());
        let s3_endpoint = endpoint(&["s3"]).or_else(|| generic.clone());
        let iam_endpoint = endpoint(&["iam"]).or(generic);
        let static_credentials = match (text(obj.get("access_key")), text(obj.get("secret_key"))) {
            (Some(a), Some(s)) => Some((a, s, text(obj.get("token")))),
            _ => None,
        };
        Ok(AwsProviderConfig {
            region,
            tagging_endpoint,
            sqs_endpoint,
            iam_endpoint,
            s3_endpoint,
            s3_path_style: obj.get("s3_use_path_style").and_then(Value::as_bool) == Some(true),
            static_credentials,
            profile: text(obj.get("profile")),
        })
    }
}

/// One live object the listing found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveObject {
    /// Its ARN.
    pub arn: String,
    /// The ID terraform imports it by, where the type's rule is known (bucket name, instance ID, queue URL).
    pub import_id: Option<String>,
    /// Its tags.
    pub tags: BTreeMap<String, String>,
}

impl LiveObject {
    /// The value of its `tofu-address` tag.
    pub fn address(&self) -> Option<&str> {
        self.tags.get(ADDRESS_TAG).map(String::as_str)
    }
}

/// A Tagging API client set up from one provider configuration.
#[derive(Clone, Debug)]
pub struct AwsLister {
    client: Client,
    iam: aws_sdk_iam::Client,
    s3: aws_sdk_s3::Client,
    config: AwsProviderConfig,
}

impl AwsLister {
    /// A client for the configuration's region and endpoint; credentials from the configuration,
    /// else the standard credentials chain (the chain is never asked for a region or endpoint).
    pub async fn new(config: AwsProviderConfig) -> Self {
        let region = Region::new(config.region.clone());
        let credentials = match &config.static_credentials {
            Some((access, secret, token)) => SharedCredentialsProvider::new(Credentials::new(
                access,
                secret,
                token.clone(),
                None,
                "choudoufu-live provider configuration",
            )),
            None => {
                let mut chain =
                    aws_config::default_provider::credentials::DefaultCredentialsChain::builder()
                        .region(region.clone());
                if let Some(p) = &config.profile {
                    chain = chain.profile_name(p);
                }
                SharedCredentialsProvider::new(chain.build().await)
            }
        };
        let mut b = aws_sdk_resourcegroupstagging::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(region.clone())
            .credentials_provider(credentials.clone());
        if let Some(e) = &config.tagging_endpoint {
            b = b.endpoint_url(e);
        }
        // IAM is global: its requests are signed for the configured region, as the provider's are.
        let mut iam = aws_sdk_iam::Config::builder()
            .behavior_version(aws_sdk_iam::config::BehaviorVersion::latest())
            .region(aws_sdk_iam::config::Region::new(config.region.clone()))
            .credentials_provider(credentials.clone());
        if let Some(e) = &config.iam_endpoint {
            iam = iam.endpoint_url(e);
        }
        let mut s3 = aws_sdk_s3::Config::builder()
            .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
            .region(aws_sdk_s3::config::Region::new(config.region.clone()))
            .credentials_provider(credentials.clone())
            .force_path_style(config.s3_path_style);
        if let Some(e) = &config.s3_endpoint {
            s3 = s3.endpoint_url(e);
        }
        AwsLister {
            client: Client::from_conf(b.build()),
            s3: aws_sdk_s3::Client::from_conf(s3.build()),
            iam: aws_sdk_iam::Client::from_conf(iam.build()),
            config,
        }
    }

    /// A lister from the provider configuration JSON the host passed.
    pub async fn from_json(config: &Value) -> Result<Self, ListingError> {
        Ok(Self::new(AwsProviderConfig::from_json(config)?).await)
    }

    /// The configuration it lists with.
    pub fn config(&self) -> &AwsProviderConfig {
        &self.config
    }

    fn endpoint_name(&self) -> String {
        self.config.tagging_endpoint.clone().unwrap_or_else(|| {
            format!(
                "the regional endpoint of {} (from the provider configuration)",
                self.config.region
            )
        })
    }

    /// Every live object whose tags hold each `(key, value)` of `tags`, of `resource_type` when given.
    pub async fn list(
        &self,
        tags: &[(&str, &str)],
        resource_type: Option<&str>,
    ) -> Result<Vec<LiveObject>, ListingError> {
        let mut out = Vec::new();
        if cut(Mechanism::Listing) {
            return Ok(out);
        }
        let mut token: Option<String> = None;
        loop {
            let mut req = self.client.get_resources();
            for (k, v) in tags {
                req = req.tag_filters(TagFilter::builder().key(*k).values(*v).build());
            }
            if let Some(t) = resource_type {
                req = req.resource_type_filters(t);
            }
            if let Some(t) = &token {
                req = req.pagination_token(t);
            }
            let page = req.send().await.map_err(|e| ListingError::Api {
                endpoint: self.endpoint_name(),
                message: format!("{}", DisplayErrorContext(&e)),
            })?;
            for m in page.resource_tag_mapping_list() {
                let Some(arn) = m.resource_arn() else {
                    continue;
                };
                let tags: BTreeMap<String, String> = m
                    .tags()
                    .iter()
                    .map(|t| (t.key().to_string(), t.value().to_string()))
                    .collect();
                out.push(LiveObject {
                    arn: arn.to_string(),
                    import_id: self.import_id(arn),
                    tags,
                });
            }
            token = page
                .pagination_token()
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        // The service filtered already; check again, so a loose filter never binds.
        out.retain(|o| {
            tags.iter()
                .all(|(k, v)| o.tags.get(*k).map(String::as_str) == Some(*v))
        });
        out.sort_by(|a, b| a.arn.cmp(&b.arn));
        out.dedup_by(|a, b| a.arn == b.arn);
        Ok(out)
    }

    /// The ID terraform imports an object by, derived from its ARN where the rule is known.
    pub fn import_id(&self, arn: &str) -> Option<String> {
        let parts: Vec<&str> = arn.splitn(6, ':').collect();
        let [_, _, service, region, account, resource] = parts.as_slice() else {
            return None;
        };
        match *service {
            "s3" if !resource.contains('/') => Some(resource.to_string()),
            "ec2" => resource.rsplit_once('/').map(|(_, id)| id.to_string()),
            // A role's name is the last part of `role/PATH/NAME`.
            "iam" if resource.starts_with("role/") => {
                resource.rsplit_once('/').map(|(_, name)| name.to_string())
            }
            // A parameter with a hierarchy is named `/a/b`; its ARN drops the leading slash.
            "ssm" => resource.strip_prefix("parameter/").map(|name| {
                if name.contains('/') {
                    format!("/{name}")
                } else {
                    name.to_string()
                }
            }),
            "sqs" => {
                let base = self
                    .config
                    .sqs_endpoint
                    .clone()
                    .unwrap_or_else(|| format!("https://sqs.{region}.amazonaws.com"));
                Some(format!(
                    "{}/{account}/{resource}",
                    base.trim_end_matches('/')
                ))
            }
            _ => None,
        }
    }

    /// Every IAM role whose tags hold each `(key, value)` of `tags`: `iam:ListRoles`, then `iam:ListRoleTags` of each role (the Tagging API lists no IAM object).
    pub async fn roles(&self, tags: &[(&str, &str)]) -> Result<Vec<LiveObject>, ListingError> {
        let mut out = Vec::new();
        if cut(Mechanism::Listing) {
            return Ok(out);
        }
        let failed = |e: String| ListingError::Api {
            endpoint: self
                .config
                .iam_endpoint
                .clone()
                .unwrap_or_else(|| "the IAM endpoint".into()),
            message: e,
        };
        let mut marker: Option<String> = None;
        loop {
            let mut req = self.iam.list_roles();
            if let Some(m) = &marker {
                req = req.marker(m);
            }
            let page = req
                .send()
                .await
                .map_err(|e| failed(format!("iam:ListRoles: {}", IamErrorContext(&e))))?;
            for role in page.roles() {
                let listed = self
                    .iam
                    .list_role_tags()
                    .role_name(role.role_name())
                    .send()
                    .await
                    .map_err(|e| failed(format!("iam:ListRoleTags: {}", IamErrorContext(&e))))?;
                let role_tags: BTreeMap<String, String> = listed
                    .tags()
                    .iter()
                    .map(|t| (t.key().to_string(), t.value().to_string()))
                    .collect();
                if tags
                    .iter()
                    .all(|(k, v)| role_tags.get(*k).map(String::as_str) == Some(*v))
                {
                    out.push(LiveObject {
                        arn: role.arn().to_string(),
                        import_id: Some(role.role_name().to_string()),
                        tags: role_tags,
                    });
                }
            }
            marker = page
                .marker()
                .filter(|m| page.is_truncated() && !m.is_empty())
                .map(str::to_string);
            if marker.is_none() {
                break;
            }
        }
        out.sort_by(|a, b| a.arn.cmp(&b.arn));
        Ok(out)
    }

    /// Every live object carrying the markers of `address` (type `resource_type`) in `estate`.
    pub async fn with_markers(
        &self,
        estate: &str,
        resource_type: &str,
        address: &str,
    ) -> Result<Vec<LiveObject>, ListingError> {
        let estate_v = Family::Aws.encode(estate);
        let address_v = Family::Aws.encode(instance_address(address));
        if resource_type == IAM_ROLE {
            return self
                .roles(&[(ESTATE_TAG, &estate_v), (ADDRESS_TAG, &address_v)])
                .await;
        }
        self.list(
            &[(ESTATE_TAG, &estate_v), (ADDRESS_TAG, &address_v)],
            type_filter(resource_type),
        )
        .await
    }

    /// The live objects carrying the markers of each `(resource_type, address)` of `creates` in `estate`, in their order: one Tagging API listing per create, and one IAM role listing for all the role creates together.
    pub async fn with_markers_each(
        &self,
        estate: &str,
        creates: &[(&str, &str)],
    ) -> Vec<Result<Vec<LiveObject>, ListingError>> {
        let roles = if creates.iter().any(|(t, _)| *t == IAM_ROLE) && !cut(Mechanism::IamOnce) {
            let estate_v = Family::Aws.encode(estate);
            Some(self.roles(&[(ESTATE_TAG, &estate_v)]).await)
        } else {
            None
        };
        let mut out = Vec::with_capacity(creates.len());
        for (resource_type, address) in creates {
            let found = match &roles {
                Some(listed) if *resource_type == IAM_ROLE => {
                    let wanted = Family::Aws.encode(instance_address(address));
                    listed.clone().map(|all| {
                        all.into_iter()
                            .filter(|o| o.address() == Some(wanted.as_str()))
                            .collect()
                    })
                }
                _ => self.with_markers(estate, resource_type, address).await,
            };
            out.push(found);
        }
        out
    }

    /// The collision check before a create of `address` (type `resource_type`) in `estate`.
    ///
    /// `Ok(None)`: nothing carries the markers (create). `Ok(Some(object))`: exactly one does:
    /// bind it (the host adopts it instead of creating). Two or more: [`CollisionError`] naming
    /// every one; nothing is created.
    pub async fn find_by_markers(
        &self,
        estate: &str,
        resource_type: &str,
        address: &str,
    ) -> Result<Option<LiveObject>, FindError> {
        let found = self.with_markers(estate, resource_type, address).await?;
        Ok(decide(estate, address, found)?)
    }

    /// Live objects carrying `estate`'s marker whose `tofu-address` no record names.
    ///
    /// `recorded` is what the estate's resource records tell (the engine's one account of
    /// them); `resource_types` are the terraform types to list ([`AwsLister::list_marked`]).
    /// Nothing is deleted.
    pub async fn list_unrecorded(
        &self,
        estate: &str,
        recorded: &Recorded,
        resource_types: &[String],
    ) -> Result<Vec<LiveObject>, ListingError> {
        let mut listed = self.list_marked(estate, resource_types).await?;
        listed.retain(|o| recorded.unrecorded(o.address()));
        Ok(listed)
    }

    /// Every live object carrying `estate`'s marker, of the terraform types `resource_types`.
    ///
    /// Each type in [`TYPE_FILTERS`] is listed with its filter; if any type has none, one
    /// listing without a type filter covers them all; IAM roles are listed by IAM.
    pub async fn list_marked(
        &self,
        estate: &str,
        resource_types: &[String],
    ) -> Result<Vec<LiveObject>, ListingError> {
        let estate_v = Family::Aws.encode(estate);
        let filters: Option<BTreeSet<&str>> =
            resource_types.iter().map(|t| type_filter(t)).collect();
        let mut listed = Vec::new();
        match filters {
            Some(fs) => {
                for f in fs {
                    listed.extend(self.list(&[(ESTATE_TAG, &estate_v)], Some(f)).await?);
                }
            }
            None => listed.extend(self.list(&[(ESTATE_TAG, &estate_v)], None).await?),
        }
        if resource_types.iter().any(|t| t == IAM_ROLE) {
            listed.extend(self.roles(&[(ESTATE_TAG, &estate_v)]).await?);
        }
        listed.sort_by(|a, b| a.arn.cmp(&b.arn));
        listed.dedup_by(|a, b| a.arn == b.arn);
        Ok(listed)
    }

    /// Put `object`'s `tofu-address` marker right: it names `address` from now on (its other tags kept).
    ///
    /// IAM roles and policies through IAM, S3 buckets through their tag set, anything else
    /// through the Tagging API's `TagResources`.
    pub async fn remark(&self, object: &LiveObject, address: &str) -> Result<(), RemarkError> {
        let value = Family::Aws.encode(instance_address(address));
        let failed = |call: &'static str, message: String| RemarkError {
            arn: object.arn.clone(),
            call,
            message,
        };
        let parts: Vec<&str> = object.arn.splitn(6, ':').collect();
        let (service, resource) = match parts.as_slice() {
            [_, _, service, _, _, resource] => (*service, *resource),
            _ => return Err(failed("parse", "not an ARN".into())),
        };
        match service {
            "iam" if resource.starts_with("role/") => {
                let name = resource.rsplit('/').next().unwrap_or(resource);
                let tag = aws_sdk_iam::types::Tag::builder()
                    .key(ADDRESS_TAG)
                    .value(&value)
                    .build()
                    .map_err(|e| failed("iam:TagRole", e.to_string()))?;
                self.iam
                    .tag_role()
                    .role_name(name)
                    .tags(tag)
                    .send()
                    .await
                    .map_err(|e| failed("iam:TagRole", IamErrorContext(&e).to_string()))?;
            }
            "iam" if resource.starts_with("policy/") => {
                let tag = aws_sdk_iam::types::Tag::builder()
                    .key(ADDRESS_TAG)
                    .value(&value)
                    .build()
                    .map_err(|e| failed("iam:TagPolicy", e.to_string()))?;
                self.iam
                    .tag_policy()
                    .policy_arn(&object.arn)
                    .tags(tag)
                    .send()
                    .await
                    .map_err(|e| failed("iam:TagPolicy", IamErrorContext(&e).to_string()))?;
            }
            "s3" if !resource.contains('/') => self.remark_bucket(resource, &value).await?,
            _ => {
                let answer = self
                    .client
                    .tag_resources()
                    .resource_arn_list(&object.arn)
                    .tags(ADDRESS_TAG, &value)
                    .send()
                    .await
                    .map_err(|e| {
                        failed("tagging:TagResources", DisplayErrorContext(&e).to_string())
                    })?;
                if let Some(why) = answer
                    .failed_resources_map()
                    .and_then(|m| m.get(&object.arn))
                {
                    return Err(failed(
                        "tagging:TagResources",
                        why.error_message().unwrap_or("refused").to_string(),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Set a bucket's `tofu-address` tag to `value`, keeping its other tags (S3 replaces a bucket's tag set whole).
    async fn remark_bucket(&self, bucket: &str, value: &str) -> Result<(), RemarkError> {
        use aws_sdk_s3::error::DisplayErrorContext as S3ErrorContext;
        use aws_sdk_s3::types::{Tag, Tagging};
        let failed = |call: &'static str, message: String| RemarkError {
            arn: format!("arn:aws:s3:::{bucket}"),
            call,
            message,
        };
        let held = self
            .s3
            .get_bucket_tagging()
            .bucket(bucket)
            .send()
            .await
            .map_err(|e| failed("s3:GetBucketTagging", S3ErrorContext(&e).to_string()))?;
        let mut tags: Vec<Tag> = held
            .tag_set()
            .iter()
            .filter(|t| t.key() != ADDRESS_TAG)
            .cloned()
            .collect();
        tags.push(
            Tag::builder()
                .key(ADDRESS_TAG)
                .value(value)
                .build()
                .map_err(|e| failed("s3:PutBucketTagging", e.to_string()))?,
        );
        let tagging = Tagging::builder()
            .set_tag_set(Some(tags))
            .build()
            .map_err(|e| failed("s3:PutBucketTagging", e.to_string()))?;
        self.s3
            .put_bucket_tagging()
            .bucket(bucket)
            .tagging(tagging)
            .send()
            .await
            .map_err(|e| failed("s3:PutBucketTagging", S3ErrorContext(&e).to_string()))?;
        Ok(())
    }
}

/// A marker that could not be put right.
#[derive(Clone, Debug, Error)]
#[error("{call} on {arn} failed: {message}")]
pub struct RemarkError {
    /// The object.
    pub arn: String,
    /// The call that failed.
    pub call: &'static str,
    /// What came back.
    pub message: String,
}

/// What a listing of one resource's markers means: none (create), one (bind), more (collision).
pub fn decide(
    estate: &str,
    address: &str,
    mut found: Vec<LiveObject>,
) -> Result<Option<LiveObject>, CollisionError> {
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop()),
        _ => Err(CollisionError {
            address: address.to_string(),
            estate: estate.to_string(),
            ids: found.into_iter().map(|o| o.arn).collect(),
        }),
    }
}
