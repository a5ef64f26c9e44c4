//! `choudoufu-live iam policy|apply`: the policy of a role scoped to one estate.

use std::path::Path;

use aws_sdk_iam::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use clap::{Args, Subcommand};

use super::CliError;
use crate::cloud::aws::iam;
use crate::config::{ConfigError, LiveConfig};
use crate::engine::layout::EstateName;
use crate::store::StoreSettings;

/// Print or apply the IAM policy of a role that runs one estate.
#[derive(Debug, Subcommand)]
pub enum IamCommand {
    /// Print the policy JSON: the estate's records only, cloud writes only on its tag.
    Policy(PolicyArgs),
    /// Put the policy on a role as an inline policy `choudoufu-live-<estate>` (idempotent).
    Apply(ApplyArgs),
}

/// What the policy is for.
#[derive(Debug, Args)]
pub struct PolicyArgs {
    /// The estate, e.g. prod-eu.
    #[arg(long)]
    pub estate: String,
    /// The record store bucket.
    #[arg(long)]
    pub bucket: String,
    /// Allow resource writes and reads only in this region.
    #[arg(long)]
    pub region: Option<String>,
}

/// The policy and the role to put it on.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// What the policy is for.
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// The IAM role name.
    #[arg(long)]
    pub role: String,
    /// The IAM endpoint (default: the live block's `endpoint`, else AWS).
    #[arg(long)]
    pub endpoint: Option<String>,
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

fn valid_bucket(bucket: &str) -> Result<(), CliError> {
    let ok = (3..=63).contains(&bucket.len())
        && bucket
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid bucket name {bucket:?}: use 3 to 63 lowercase letters, digits, '-' or '.'"
        )
        .into())
    }
}

fn document(args: &PolicyArgs) -> Result<(EstateName, serde_json::Value), CliError> {
    let estate = EstateName::parse(&args.estate)?;
    valid_bucket(&args.bucket)?;
    let policy = iam::policy(&estate, &args.bucket, args.region.as_deref());
    Ok((estate, policy))
}

/// The endpoint of the root's live block, when it has one.
fn live_endpoint(root: &Path) -> Result<Option<String>, CliError> {
    match LiveConfig::load(root) {
        Ok(config) => Ok(match config.store {
            StoreSettings::S3(s3) => s3.endpoint,
            _ => None,
        }),
        Err(ConfigError::NoLiveBlock { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
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

/// Run an `iam` command.
pub async fn run(root: &Path, cmd: IamCommand) -> Result<i32, CliError> {
    match cmd {
        IamCommand::Policy(args) => {
            let (estate, _) = document(&args)?;
            println!(
                "{}",
                iam::policy_json(&estate, &args.bucket, args.region.as_deref())
            );
            Ok(0)
        }
        IamCommand::Apply(args) => {
            let (estate, policy) = document(&args.policy)?;
            let endpoint = match args.endpoint {
                Some(e) => Some(e),
                None => live_endpoint(root)?,
            };
            let client = client(endpoint.as_deref()).await;
            let name = iam::policy_name(&estate);
            let applied = apply_policy(&client, &args.role, &name, &policy).await?;
            let what = match applied {
                Applied::Created => "created",
                Applied::Updated => "updated",
                Applied::Unchanged => "unchanged",
            };
            println!("{what}: inline policy {name} on role {}", args.role);
            Ok(0)
        }
    }
}
