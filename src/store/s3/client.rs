//! The S3 store's client: its SDK client, bucket and policy, and the requests its record
//! calls are made of.

use std::time::Duration;

use aws_sdk_s3::Client;
use aws_sdk_s3::config::{Region, RequestChecksumCalculation, ResponseChecksumValidation};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::ServerSideEncryption;

use super::agent::OneUserAgent;
use super::settings::S3Settings;
use super::unreached::UnreachedBudget;
use crate::cut::{Mechanism, cut};
use crate::store::call::StoreCall;
use crate::store::error::{Reason, StoreError};
use crate::store::key;
use crate::store::record_store::{
    Listed, Page, Precondition, RecordStore, Stored, Version, WriteOutcome,
};
use crate::store::retry::{self, RetryPolicy, Verdict};

/// How many tries one store call gets (the store's retry policy), unless `AWS_MAX_ATTEMPTS` says otherwise.
pub const MAX_ATTEMPTS: u32 = retry::TRIES;
/// The AWS standard variable that sets how many tries one store call gets.
pub const MAX_ATTEMPTS_ENV: &str = "AWS_MAX_ATTEMPTS";
/// How long one try may take before it is abandoned and tried again.
pub const DEFAULT_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);
/// Environment variable that sets the per-try timeout in milliseconds.
pub const ATTEMPT_TIMEOUT_ENV: &str = "CHOUDOUFU_S3_ATTEMPT_TIMEOUT_MS";

/// The tag key every write log entry is created with (beside `tofu-estate`), which the
/// lifecycle rule `bucket setup` adds filters on: a prefix cannot match `tofu-records/*/wlog/`.
pub const LOG_TAG_KEY: &str = "tofu-log";
/// That tag's value.
pub const LOG_TAG_VALUE: &str = "entry";

/// Records in an S3 bucket.
#[derive(Debug, Clone)]
pub struct S3Store {
    pub(super) client: Client,
    pub(super) bucket: String,
    pub(super) kms_key_id: Option<String>,
    pub(super) page_size: i32,
    /// The custom endpoint, for messages (none: the region's AWS endpoint).
    pub(super) endpoint: Option<String>,
    /// The tries of a write answered 409 `ConditionalRequestConflict`, which the SDK does not retry.
    pub(super) policy: RetryPolicy,
}

/// The S3 kind's retry policy: the store's, with `AWS_MAX_ATTEMPTS` tries when it is set.
pub fn policy() -> RetryPolicy {
    let tries = std::env::var(MAX_ATTEMPTS_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .filter(|n| *n >= 1)
        .unwrap_or(MAX_ATTEMPTS);
    RetryPolicy::configured().with_tries(tries)
}

/// Whether S3 answered that the key is not there (404), as against the bucket not being there (404 `NoSuchBucket`).
pub(super) fn absent<E: ProvideErrorMetadata>(err: &SdkError<E>) -> bool {
    status(err) == Some(404) && !no_such_bucket(err)
}

/// Whether S3 answered that the bucket does not exist.
pub(super) fn no_such_bucket<E: ProvideErrorMetadata>(err: &SdkError<E>) -> bool {
    matches!(err, SdkError::ServiceError(e) if e.err().code() == Some("NoSuchBucket"))
}

/// One line of what an SDK call's failure was: the service's code and message, or the root cause of no answer.
pub(crate) fn sdk_message<E>(err: &SdkError<E>) -> String
where
    E: std::error::Error + ProvideErrorMetadata + Send + Sync + 'static,
{
    match err {
        SdkError::ServiceError(e) => {
            let status = e.raw().status().as_u16();
            match (e.err().code(), e.err().message()) {
                (Some(code), Some(message)) => format!("{code}: {message} (HTTP {status})"),
                (Some(code), None) => format!("{code} (HTTP {status})"),
                (None, _) => format!("HTTP {status}"),
            }
        }
        SdkError::TimeoutError(_) => "timed out".to_string(),
        SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            crate::store::error::root_cause(err)
        }
        _ => crate::store::error::chain_text(err),
    }
}

/// What an S3 answer says about trying again, beyond the SDK's own retry: a 409
/// `ConditionalRequestConflict` (another conditional write to the key in progress) is tried again.
pub(super) fn conflict_verdict<T, E>(outcome: &Result<T, SdkError<E>>) -> Verdict {
    match outcome {
        Err(e) if status(e) == Some(409) => Verdict::Busy,
        _ => Verdict::Final,
    }
}

impl S3Store {
    /// A store on the bucket in `settings`, with credentials from the standard chain (its profile, and the role it assumes, when set).
    pub async fn connect(settings: &S3Settings) -> Self {
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
        if let Some(region) = &settings.region {
            loader = loader.region(Region::new(region.clone()));
        }
        if let Some(profile) = &settings.profile {
            loader = loader.profile_name(profile);
        }
        let mut shared = loader.load().await;
        if let Some(role) = &settings.role_arn {
            // The role's credentials, renewed before they expire, from the chain's (or the profile's).
            let assumed = aws_config::sts::AssumeRoleProvider::builder(role.clone())
                .session_name("choudoufu-live")
                .configure(&shared)
                .build()
                .await;
            shared = shared
                .into_builder()
                .credentials_provider(aws_sdk_s3::config::SharedCredentialsProvider::new(assumed))
                .build();
        }
        let attempt_timeout = std::env::var(ATTEMPT_TIMEOUT_ENV)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(DEFAULT_ATTEMPT_TIMEOUT, Duration::from_millis);
        // Cut: a store that hangs holds each call until the whole deadline.
        let attempt_timeout = if crate::cut::cut(crate::cut::Mechanism::StalledStore) {
            policy().deadline
        } else {
            attempt_timeout
        };
        let policy = policy();
        let mut builder = aws_sdk_s3::config::Builder::from(&shared)
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(ResponseChecksumValidation::WhenRequired)
            // The SDK's standard retry, from the store's policy: the same tries and waits.
            .retry_config(
                aws_sdk_s3::config::retry::RetryConfig::standard()
                    .with_max_attempts(policy.tries)
                    .with_initial_backoff(policy.backoff.initial)
                    .with_max_backoff(policy.backoff.cap),
            )
            // The SDK's default retry quota is one token bucket per process that forgets a
            // permit each time a further retry replaces it: under sustained faults a long run
            // would stop retrying before its tries are spent. Every call gets its tries.
            .retry_partition(
                aws_sdk_s3::config::retry::RetryPartition::custom("choudoufu-live-s3")
                    .token_bucket(aws_sdk_s3::config::retry::TokenBucket::unlimited())
                    .build(),
            )
            // A store it cannot connect to is given up on its shorter budget, not tried for minutes.
            .interceptor(UnreachedBudget { policy })
            .interceptor(OneUserAgent)
            .timeout_config(
                aws_sdk_s3::config::timeout::TimeoutConfig::builder()
                    .connect_timeout(retry::connect_timeout())
                    .operation_attempt_timeout(attempt_timeout)
                    .operation_timeout(policy.deadline)
                    .build(),
            );
        if shared.region().is_none() {
            builder = builder.region(Region::new("us-east-1"));
        }
        if let Some(endpoint) = &settings.endpoint {
            builder = builder.endpoint_url(endpoint);
        }
        let path_style = settings
            .use_path_style
            .unwrap_or(settings.endpoint.is_some());
        builder = builder.force_path_style(path_style);
        S3Store {
            client: Client::from_conf(builder.build()),
            bucket: settings.bucket.clone(),
            kms_key_id: settings.kms_key_id.clone(),
            page_size: 1000,
            endpoint: settings.endpoint.clone(),
            policy,
        }
    }

    /// The same store with another listing page size (at most 1000).
    pub fn with_page_size(mut self, page_size: i32) -> Self {
        self.page_size = page_size.clamp(1, 1000);
        self
    }

    /// The SDK client, for bucket administration.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The bucket name.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The endpoint requests go to: the custom one, else the region's AWS endpoint.
    pub fn endpoint(&self) -> String {
        match (&self.endpoint, self.client.config().region()) {
            (Some(url), _) => url.clone(),
            (None, Some(region)) => format!("https://s3.{region}.amazonaws.com"),
            (None, None) => "https://s3.amazonaws.com".to_string(),
        }
    }

    pub(super) fn fail<E>(&self, op: StoreCall, key: &str, err: SdkError<E>) -> StoreError
    where
        E: std::error::Error + ProvideErrorMetadata + Send + Sync + 'static,
    {
        let reason = sdk_reason(&err);
        // One line; the SDK's whole context (a debug dump) only with CHOUDOUFU_VERBOSE.
        let message = sdk_message(&err);
        let e = StoreError::new(self.name(), op, key, err)
            .with_message(message)
            .at(self.endpoint());
        match reason {
            Some(r) => e.because(r),
            None => e,
        }
    }

    pub(super) async fn head_version(&self, key: &str) -> Result<Option<Version>, StoreError> {
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => Ok(out.e_tag.map(|t| Version {
                token: t,
                version_id: out.version_id,
            })),
            Err(e) if absent(&e) => Ok(None),
            Err(e) => Err(self.fail(StoreCall::Head, key, e)),
        }
    }

    pub(super) async fn put_object(
        &self,
        key: &str,
        bytes: &[u8],
        precondition: &Precondition,
    ) -> Result<WriteOutcome<Version>, StoreError> {
        let op = StoreCall::from(precondition);
        let send = || {
            let mut req = self
                .client
                .put_object()
                .bucket(&self.bucket)
                .key(key)
                .content_type("application/json")
                .body(ByteStream::from(bytes.to_vec()));
            if let Some(estate) = key::estate_of(key) {
                let mut tags = format!("tofu-estate={}", urlencode(estate));
                if key::is_log_entry(key) && !cut(Mechanism::LogLifecycle) {
                    tags.push_str(&format!("&{LOG_TAG_KEY}={LOG_TAG_VALUE}"));
                }
                req = req.tagging(tags);
            }
            req = match &self.kms_key_id {
                Some(kms) => req
                    .server_side_encryption(ServerSideEncryption::AwsKms)
                    .ssekms_key_id(kms),
                None => req.server_side_encryption(ServerSideEncryption::Aes256),
            };
            req = match precondition {
                _ if cut(Mechanism::Conditions) => req,
                Precondition::Absent => req.if_none_match("*"),
                Precondition::Matches(v) => req.if_match(&v.token),
            };
            req.send()
        };
        match self.policy.run(send, conflict_verdict).await {
            Ok(out) => {
                let version = match out.e_tag {
                    Some(token) => Version {
                        token,
                        version_id: out.version_id,
                    },
                    None => self.head_version(key).await?.ok_or_else(|| {
                        StoreError::new(
                            self.name(),
                            op,
                            key,
                            "the write landed but the record has no version (it vanished at once)",
                        )
                    })?,
                };
                Ok(WriteOutcome::Written(version))
            }
            Err(e) if status(&e) == Some(412) || absent(&e) => {
                Ok(WriteOutcome::Conflict(precondition.conflict(None)))
            }
            Err(e) => Err(self.fail(op, key, e)),
        }
    }
}

impl S3Store {
    /// One ListObjectsV2 page under `prefix`: after `start_after` (first page) or from `token`.
    pub(super) async fn list_v2(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        token: Option<String>,
        max_keys: i32,
    ) -> Result<Page, StoreError> {
        let out = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(prefix)
            .max_keys(max_keys)
            .set_start_after(start_after.map(str::to_string))
            .set_continuation_token(token)
            .send()
            .await
            .map_err(|e| self.fail(StoreCall::List, prefix, e))?;
        let items = out
            .contents
            .unwrap_or_default()
            .into_iter()
            .filter_map(|o| {
                Some(Listed {
                    key: o.key?,
                    version: Version::new(o.e_tag?),
                })
            })
            .collect();
        let next = if out.is_truncated == Some(true) {
            out.next_continuation_token
        } else {
            None
        };
        Ok(Page { items, next })
    }
}

impl S3Store {
    /// A GetObject answer as stored bytes with their version (ETag and version id); `op` names the call.
    pub(crate) async fn stored(
        &self,
        op: StoreCall,
        key: &str,
        out: aws_sdk_s3::operation::get_object::GetObjectOutput,
    ) -> Result<Stored, StoreError> {
        let token = out.e_tag.clone().unwrap_or_default();
        let version_id = out.version_id.clone();
        let body = out
            .body
            .collect()
            .await
            .map_err(|e| StoreError::new(self.name(), op, key, e))?;
        // One copy of the answer's segments into a vector of its size (an image is megabytes:
        // `into_bytes` then `to_vec` copied it twice).
        let segments: Vec<_> = body.into_segments().collect();
        let mut bytes = Vec::with_capacity(segments.iter().map(|s| s.len()).sum());
        for segment in &segments {
            bytes.extend_from_slice(segment);
        }
        Ok(Stored {
            bytes,
            version: Version { token, version_id },
        })
    }
}

/// Why an SDK call failed, when its kind says more than its cause chain: no answer, the credentials refused, or no such bucket.
pub(crate) fn sdk_reason<E: ProvideErrorMetadata>(err: &SdkError<E>) -> Option<Reason> {
    match err {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            Some(Reason::Unreachable)
        }
        SdkError::ServiceError(e) if e.err().code() == Some("NoSuchBucket") => {
            Some(Reason::Missing)
        }
        SdkError::ServiceError(e)
            if matches!(e.raw().status().as_u16(), 401 | 403)
                || matches!(
                    e.err().code(),
                    Some(
                        "ExpiredToken"
                            | "InvalidAccessKeyId"
                            | "InvalidToken"
                            | "TokenRefreshRequired"
                    )
                ) =>
        {
            Some(Reason::CredentialsRefused)
        }
        _ => None,
    }
}

pub(super) fn urlencode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

pub(super) fn status<E>(err: &SdkError<E>) -> Option<u16> {
    err.raw_response().map(|r| r.status().as_u16())
}
