//! `choudoufu-live iam policy|apply`: the access policy of a role scoped to one estate, for each store kind.

use std::path::Path;

use clap::{Args, Subcommand};

use super::error::CliError;
use crate::cloud::aws::iam::{self, Applied, apply_policy, client};
use crate::cloud::azure::policy as azure_policy;
use crate::cloud::gcs::policy as gcs_policy;
use crate::config::{ConfigError, LiveConfig};
use crate::engine::layout::EstateName;
use crate::store::azure::parse_connection_string;
use crate::store::{StoreKind, StoreSettings};

/// Print or apply the access policy of a role that runs one estate.
#[derive(Debug, Subcommand)]
pub enum IamCommand {
    /// Print the estate's access policy: its records only (s3: and cloud writes only on its tag).
    #[command(
        long_about = "Print the access policy of a role (or identity) that runs one estate: it reaches the estate's records only.\n\ns3 (JSON on stdout): an IAM policy: object reads and writes under tofu-records/<estate>/, listing only with that prefix, the bucket check's three reads, and cloud writes only on resources tagged tofu-estate=<estate>.\nazurerm (JSON on stdout, the `az` command on stderr): a Storage Blob Data Contributor role assignment on the container with a condition: blob reads, writes and deletes only under tofu-records/<estate>/, listings only with a prefix inside it.\ngcs (JSON on stdout, the `gcloud` commands on stderr): a roles/storage.objectUser binding with an IAM condition on the object name prefix (listing cannot be narrowed by IAM: object names of other estates stay visible, their content does not).\n\nThe kind, estate, bucket, account and container default to the root's live block. The azurerm and gcs policies are not proven against a peer: no emulator here evaluates role assignment or IAM conditions."
    )]
    Policy(PolicyArgs),
    /// Put the s3 policy on an IAM role as an inline policy `choudoufu-live-<estate>` (idempotent).
    Apply(ApplyArgs),
}

/// What the policy is for (each defaults to the root's live block).
#[derive(Debug, Args)]
pub struct PolicyArgs {
    /// The record store kind: s3, azurerm or gcs (default: the live block's, else s3).
    #[arg(long, value_name = "KIND")]
    pub kind: Option<String>,
    /// The estate, e.g. prod-eu.
    #[arg(long)]
    pub estate: Option<String>,
    /// s3, gcs: the record store bucket.
    #[arg(long)]
    pub bucket: Option<String>,
    /// s3: allow resource writes and reads only in this region.
    #[arg(long)]
    pub region: Option<String>,
    /// azurerm: the storage account.
    #[arg(long)]
    pub account: Option<String>,
    /// azurerm: the blob container.
    #[arg(long)]
    pub container: Option<String>,
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

/// The store a policy is for, with every name it needs.
enum Target {
    S3 {
        estate: EstateName,
        bucket: String,
        region: Option<String>,
    },
    Azure {
        estate: EstateName,
        account: String,
        container: String,
    },
    Gcs {
        estate: EstateName,
        bucket: String,
    },
}

fn missing(what: &str) -> CliError {
    format!("give {what}, or run in a root whose live block names it (--root DIR)").into()
}

/// The policy's store: the flags, and the root's live block for what they leave out.
fn target(root: &Path, args: &PolicyArgs) -> Result<Target, CliError> {
    let kind = args.kind.as_deref();
    let complete = args.estate.is_some()
        && match kind {
            None | Some("s3") | Some("gcs") => args.bucket.is_some(),
            Some(_) => args.account.is_some() && args.container.is_some(),
        };
    let live = if complete {
        None
    } else {
        match LiveConfig::load(root) {
            Ok(c) => Some(c),
            Err(ConfigError::NoLiveBlock { .. }) => None,
            Err(e) => return Err(e.into()),
        }
    };
    let estate = match (&args.estate, &live) {
        (Some(e), _) => EstateName::parse(e)?,
        (None, Some(c)) => c.estate.clone(),
        (None, None) => return Err(missing("--estate")),
    };
    let store = live.as_ref().map(|c| &c.store);
    let kind = match (kind, store) {
        (Some(k), _) => StoreKind::parse(k)?,
        (None, Some(s)) => s.kind(),
        (None, None) => StoreKind::S3,
    };
    Ok(match kind {
        StoreKind::S3 => {
            let bucket = match (&args.bucket, store) {
                (Some(b), _) => b.clone(),
                (None, Some(StoreSettings::S3(s3))) => s3.bucket.clone(),
                _ => return Err(missing("--bucket")),
            };
            valid_bucket(&bucket)?;
            Target::S3 {
                estate,
                bucket,
                region: args.region.clone(),
            }
        }
        StoreKind::Gcs => {
            let bucket = match (&args.bucket, store) {
                (Some(b), _) => b.clone(),
                (None, Some(StoreSettings::Gcs(g))) => g.bucket.clone(),
                _ => return Err(missing("--bucket")),
            };
            valid_bucket(&bucket)?;
            Target::Gcs { estate, bucket }
        }
        StoreKind::Azure => {
            let live_az = match store {
                Some(StoreSettings::Azure(a)) => Some(a),
                _ => None,
            };
            let account = args
                .account
                .clone()
                .or_else(|| live_az.and_then(|a| a.storage_account_name.clone()))
                .or_else(|| {
                    live_az
                        .and_then(|a| a.connection_string.as_deref())
                        .and_then(|c| parse_connection_string(c).ok())
                        .and_then(|c| c.account)
                })
                .ok_or_else(|| missing("--account"))?;
            let container = args
                .container
                .clone()
                .or_else(|| live_az.map(|a| a.container_name.clone()))
                .ok_or_else(|| missing("--container"))?;
            Target::Azure {
                estate,
                account,
                container,
            }
        }
        StoreKind::Local => {
            return Err(
                "record_store \"local\" has no access policy: a local folder is as private as its file permissions"
                    .into(),
            );
        }
    })
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

/// Run an `iam` command.
pub async fn run(root: &Path, cmd: IamCommand) -> Result<i32, CliError> {
    match cmd {
        IamCommand::Policy(args) => {
            match target(root, &args)? {
                Target::S3 {
                    estate,
                    bucket,
                    region,
                } => println!("{}", iam::policy_json(&estate, &bucket, region.as_deref())),
                Target::Azure {
                    estate,
                    account,
                    container,
                } => {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&azure_policy::azure_assignment(
                            &estate, &account, &container
                        ))?
                    );
                    eprintln!(
                        "Assign it with:\n  {}\nThe run's safety check also reads the blob service properties and the container's ACL before the first write: give the identity that, or set skip_bucket_checks = true (unsafe).\n{}",
                        azure_policy::azure_command(&estate, &account, &container),
                        crate::cloud::POLICY_NOT_PROVEN
                    );
                }
                Target::Gcs { estate, bucket } => {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&gcs_policy::gcs_binding(&estate, &bucket))?
                    );
                    let [objects, check] = gcs_policy::gcs_commands(&estate, &bucket);
                    eprintln!(
                        "Add it with (IAM conditions need uniform bucket-level access on, which `bucket setup` turns on):\n  {objects}\nand, for the run's safety check (bucket metadata only):\n  {check}\nListing is bucket-wide: IAM cannot narrow storage.objects.list by prefix, so the role sees the names of other estates' records, not their content.\n{}",
                        crate::cloud::POLICY_NOT_PROVEN
                    );
                }
            }
            Ok(0)
        }
        IamCommand::Apply(args) => {
            let Target::S3 {
                estate,
                bucket,
                region,
            } = target(root, &args.policy)?
            else {
                return Err("iam apply puts an AWS IAM policy on a role (record_store \"s3\"); for azurerm and gcs, `iam policy` prints the role assignment or IAM binding and the az / gcloud command that applies it".into());
            };
            let policy = iam::policy(&estate, &bucket, region.as_deref());
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
