//! The door of one run: every locked provider checked, started and proxied, and what terraform is told.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use thiserror::Error;

use super::cone::ConeReads;
use super::kept_hash::KeptHashes;
use super::launch::{LaunchError, Launcher, Plugin};
use super::lockfile::{self, LOCK_FILE, LockfileError, ProviderAddress};
use super::marking::Marking;
use super::probe::{Probe, ProbeError};
use super::proxy::{Proxied, Shared};
use super::reattach::{self, REATTACH_ENV};
use super::recorder::Recorder;
use super::used_types::{StateSource, UsedTypes};
use super::validations::Validations;
use crate::engine::plan::Plan;

/// Why the door could not open, or refuses a plan.
#[derive(Debug, Error)]
pub enum DoorError {
    /// The lock file or a package.
    #[error(transparent)]
    Lockfile(Box<LockfileError>),
    /// A plugin could not be started.
    #[error(transparent)]
    Launch(Box<LaunchError>),
    /// The private socket folder could not be made.
    #[error("provider door: cannot make a private folder for its sockets: {0}")]
    Folder(std::io::Error),
    /// A hash check did not finish.
    #[error("provider door: a package hash check stopped: {0}")]
    Join(#[from] tokio::task::JoinError),
    /// A provider of the plan does not pass through the door, and is not built in.
    #[error(
        "ProviderNotProxied: the plan uses provider {provider}, which does not pass through the provider door (it proxies {proxied}); nothing was applied. Run `terraform init` so {LOCK_FILE} names it, or run with --provider-door=off"
    )]
    NotProxied {
        /// The provider the plan names.
        provider: String,
        /// What the door proxies.
        proxied: String,
    },
}

impl From<LockfileError> for DoorError {
    fn from(e: LockfileError) -> Self {
        DoorError::Lockfile(Box::new(e))
    }
}

impl From<LaunchError> for DoorError {
    fn from(e: LaunchError) -> Self {
        DoorError::Launch(Box::new(e))
    }
}

/// The door of one run: its providers, their sockets, and the variable that points terraform at them.
pub struct Door {
    providers: Vec<Proxied>,
    shared: Arc<Shared>,
    reattach: String,
    // Dropped last: the sockets' folder.
    _folder: tempfile::TempDir,
}

/// Terraform's data folder for `root`: `TF_DATA_DIR` (against the root when relative), else `.terraform`.
pub fn data_dir(root: &Path) -> PathBuf {
    match std::env::var_os("TF_DATA_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => root.join(dir),
        None => root.join(".terraform"),
    }
}

impl Door {
    /// Check and start every provider of `root`'s lock file, each behind its own socket.
    ///
    /// With `marking`, each marked provider's configure call and creates carry the live markers ([`super::marking`]).
    pub async fn open(
        root: &Path,
        marking: Option<Marking>,
        state: StateSource,
    ) -> Result<Door, DoorError> {
        let locked = lockfile::read(&root.join(LOCK_FILE))?;
        let data = data_dir(root);
        let kept = KeptHashes::for_data_dir(&data);
        let mut checks = Vec::new();
        for l in locked {
            let package = lockfile::package(&data, &l)?;
            let kept = kept.clone();
            checks.push(tokio::task::spawn_blocking(move || {
                lockfile::verify(&l, &package, |dir| kept.h1(dir).map(|h| h.h1().to_string()))
                    .map(|h1| (l, package, h1))
            }));
        }
        let folder = private_folder().map_err(DoorError::Folder)?;
        let launcher = Arc::new(Launcher::new(folder.path().to_path_buf()));
        // The plugins' certificate is made while the packages are checked.
        let any = !checks.is_empty();
        let identity = async {
            if !any {
                return Ok(());
            }
            launcher.identity().await.map(drop)
        };
        let verified = async {
            let mut packages = Vec::new();
            for check in checks {
                packages.push(check.await??);
            }
            Ok::<_, DoorError>(packages)
        };
        let (packages, identity) = tokio::join!(verified, identity);
        let packages = packages?;
        identity.map_err(|e| DoorError::Launch(Box::new(e)))?;
        let shared = Arc::new(Shared {
            launcher,
            recorder: std::sync::Mutex::new(None),
            marking,
            configs: std::sync::Mutex::new(Vec::new()),
            cone: std::sync::Mutex::new(None),
            used: match UsedTypes::read(root, &data, state) {
                Ok(used) => Some(used),
                Err(e) => {
                    tracing::warn!(error = %e, "provider door: terraform hears each provider's whole schema");
                    None
                }
            },
        });
        // The plugins' environment keys their kept validation answers (a setting's default may come from it).
        let env: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os().collect();
        let opening = packages.into_iter().map(|(l, package, h1)| {
            use std::os::unix::ffi::OsStrExt;
            let validations = Validations::new(
                Some(Validations::dir_for(&data)),
                &h1,
                env.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())),
            );
            Proxied::open(
                Plugin {
                    address: l.address,
                    executable: package.executable,
                    cwd: root.to_path_buf(),
                },
                shared.clone(),
                validations,
            )
        });
        let mut providers = Vec::new();
        for opened in futures::future::join_all(opening).await {
            providers.push(opened?);
        }
        let entries: Vec<reattach::Entry> = providers
            .iter()
            .map(|p| reattach::Entry {
                address: p.address(),
                protocol: p.protocol(),
                socket: p.socket(),
            })
            .collect();
        let reattach = reattach::value(&entries, std::process::id());
        Ok(Door {
            providers,
            shared,
            reattach,
            _folder: folder,
        })
    }

    /// The environment terraform needs to use the door (nothing when no provider passes through it).
    pub fn env(&self) -> Vec<(&'static str, &str)> {
        if self.providers.is_empty() {
            return Vec::new();
        }
        vec![(REATTACH_ENV, self.reattach.as_str())]
    }

    /// The providers that pass through the door.
    pub fn proxied(&self) -> BTreeSet<&ProviderAddress> {
        self.providers.iter().map(Proxied::address).collect()
    }

    /// Record each apply call's return with `recorder` from now on (none: stop recording).
    pub fn record_returns(&self, recorder: Option<Arc<Recorder>>) {
        if let Ok(mut held) = self.shared.recorder.lock() {
            *held = recorder;
        }
    }

    /// Answer resource reads outside a cone plan's cone with `cone` from now on (none: every read goes to the provider).
    pub fn answer_reads(&self, cone: Option<Arc<ConeReads>>) {
        if let Ok(mut held) = self.shared.cone.lock() {
            *held = cone;
        }
    }

    /// The estate whose live markers the door handles, unless markers are off.
    pub fn marking(&self) -> Option<&Marking> {
        self.shared.marking.as_ref()
    }

    /// Every distinct configuration a marked provider was configured with so far (JSON, as `ConfigureProvider` carried it).
    pub fn provider_configs(&self) -> Vec<(ProviderAddress, serde_json::Value)> {
        self.shared
            .configs
            .lock()
            .map(|c| {
                c.iter()
                    .map(|c| (c.provider.clone(), c.config.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A plugin of the door's own for the provider terraform configured with `config`, configured alike, to read live objects with ([`Probe`]).
    pub async fn probe(&self, config: &serde_json::Value) -> Result<Probe, ProbeError> {
        let configured = self
            .shared
            .configs
            .lock()
            .ok()
            .and_then(|c| c.iter().find(|c| c.config == *config).cloned())
            .ok_or(ProbeError::NotConfigured)?;
        let proxied = self
            .providers
            .iter()
            .find(|p| *p.address() == configured.provider)
            .ok_or(ProbeError::NotConfigured)?;
        Probe::start(proxied.plugin(), &self.shared, &configured.message).await
    }

    /// How many plugin processes the door has started.
    pub fn launches(&self) -> usize {
        self.shared.launcher.launches.load(Ordering::Relaxed)
    }

    /// Refuse a plan that uses a provider neither proxied nor built in.
    pub fn check_plan(&self, plan: &Plan) -> Result<(), DoorError> {
        check_plan(&self.proxied(), plan)
    }

    /// The run's last terraform process is about to apply `plan`: each provider gets ready as many plugins as the plan configures it, and no more.
    pub fn last_process(&self, plan: &Plan) {
        let named = plan.providers();
        for p in &self.providers {
            p.spares().expect(plugins_needed(plan, &named, p.address()));
        }
    }

    /// The process [`Door::last_process`] was for ended (`ran`), or never started: once it ran, no plugin is idle.
    pub fn last_process_ended(&self, ran: bool) {
        for p in &self.providers {
            p.spares().ended(ran);
        }
    }
}

/// How many plugins of `provider` terraform takes to apply `plan` (`named`: the providers it names): one per configuration of it that a resource uses, one when none is found, none when the plan does not use it.
fn plugins_needed(plan: &Plan, named: &BTreeSet<String>, provider: &ProviderAddress) -> usize {
    let is = |name: &str| ProviderAddress::parse(name).is_some_and(|a| a == *provider);
    if !named.iter().any(|n| is(n)) {
        return 0;
    }
    let configs = &plan.configuration.provider_config;
    let mut used = BTreeSet::new();
    let mut modules = vec![&plan.configuration.root_module];
    while let Some(m) = modules.pop() {
        modules.extend(m.module_calls.values().map(|c| &c.module));
        used.extend(m.resources.iter().filter_map(|r| {
            let key = r.provider_config_key.as_deref()?;
            configs
                .get(key)?
                .full_name
                .as_deref()
                .is_some_and(is)
                .then_some(key)
        }));
    }
    used.len().max(1)
}

/// Refuse `plan` if it names a provider that is neither in `proxied` nor built in.
fn check_plan(proxied: &BTreeSet<&ProviderAddress>, plan: &Plan) -> Result<(), DoorError> {
    for name in plan.providers() {
        let ok =
            ProviderAddress::parse(&name).is_some_and(|a| a.is_builtin() || proxied.contains(&a));
        if !ok {
            return Err(DoorError::NotProxied {
                provider: name,
                proxied: if proxied.is_empty() {
                    "none".into()
                } else {
                    proxied
                        .iter()
                        .map(|a| a.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                },
            });
        }
    }
    Ok(())
}

const FOLDER_PREFIX: &str = "choudoufu-live-door-";

/// A fresh folder only this user opens (0700), for the door's and the plugins' sockets.
///
/// Its name carries this process's id: folders that killed runs left are removed by the
/// next door of the same user.
fn private_folder() -> std::io::Result<tempfile::TempDir> {
    crate::store::private_folder::create(FOLDER_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_provider_a_plan_names() {
        let plan = Plan::from_value(serde_json::json!({
            "resource_changes": [
                {"address": "aws_s3_bucket.b", "provider_name": "registry.terraform.io/hashicorp/aws"},
                {"address": "terraform_data.t", "provider_name": "terraform.io/builtin/terraform"}
            ],
            "configuration": {"provider_config": {"aws.east": {"full_name": "registry.terraform.io/hashicorp/aws"}}},
            "prior_state": {"values": {"root_module": {"child_modules": [
                {"resources": [{"provider_name": "registry.opentofu.org/hashicorp/random"}]}
            ]}}}
        }))
        .unwrap();
        // The random provider does not pass through a door that proxies only aws: refused by name.
        let aws = ProviderAddress::parse("registry.terraform.io/hashicorp/aws").unwrap();
        let random = ProviderAddress::parse("registry.opentofu.org/hashicorp/random").unwrap();
        let e = check_plan(&BTreeSet::from([&aws]), &plan).unwrap_err();
        assert!(matches!(e, DoorError::NotProxied { .. }), "{e}");
        assert!(
            e.to_string()
                .contains("registry.opentofu.org/hashicorp/random"),
            "{e}"
        );
        // Both proxied, and the builtin one needs no door.
        check_plan(&BTreeSet::from([&aws, &random]), &plan).unwrap();
        // An address key that does not match is no match (a tofu key for a terraform lock file).
        let tf_random = ProviderAddress::parse("registry.terraform.io/hashicorp/random").unwrap();
        assert!(check_plan(&BTreeSet::from([&aws, &tf_random]), &plan).is_err());
        // aws has one configuration no resource uses, random none of its own, tf_random is not used at all: one, one, none.
        let named = plan.providers();
        assert_eq!(plugins_needed(&plan, &named, &aws), 1);
        assert_eq!(plugins_needed(&plan, &named, &random), 1);
        assert_eq!(plugins_needed(&plan, &named, &tf_random), 0);
        // Two aliases each used by a resource, one in a module, and a configuration no resource uses: two.
        let two = Plan::from_value(serde_json::json!({
            "resource_changes": [{"address": "aws_s3_bucket.b", "provider_name": "registry.terraform.io/hashicorp/aws"}],
            "configuration": {
                "provider_config": {
                    "aws": {"full_name": "registry.terraform.io/hashicorp/aws"},
                    "aws.east": {"full_name": "registry.terraform.io/hashicorp/aws"},
                    "aws.west": {"full_name": "registry.terraform.io/hashicorp/aws"}
                },
                "root_module": {
                    "resources": [{"address": "aws_s3_bucket.b", "provider_config_key": "aws.east"}],
                    "module_calls": {"m": {"module": {"resources": [
                        {"address": "aws_s3_bucket.c", "provider_config_key": "aws.west"},
                        {"address": "aws_s3_bucket.d", "provider_config_key": "aws.west"}
                    ]}}}
                }
            }
        }))
        .unwrap();
        assert_eq!(plugins_needed(&two, &two.providers(), &aws), 2);
    }
}
