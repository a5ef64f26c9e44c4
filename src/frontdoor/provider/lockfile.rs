//! The root's `.terraform.lock.hcl`, the provider packages `init` installed, and their `h1:` hashes.
//!
//! Terraform checks neither the lock file nor the package of a provider it reattaches to, so the
//! door checks each package it launches against the lock file itself, as `init` would.

use std::path::{Path, PathBuf};

use base64::Engine;
use sha2::{Digest, Sha256};
use thiserror::Error;

/// The lock file's name in the root.
pub const LOCK_FILE: &str = ".terraform.lock.hcl";

/// Why the lock file or a provider package cannot be used.
#[derive(Debug, Error)]
pub enum LockfileError {
    /// The lock file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The lock file is not HCL.
    #[error("{path} is not a lock file terraform wrote: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: hcl::Error,
    },
    /// A provider block that is not `provider "HOST/NAMESPACE/TYPE" { version = "..." }`.
    #[error("{path}: {why}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The installed package of a locked provider is missing or holds no plugin.
    #[error(
        "provider {address} {version} is locked but not installed at {dir} ({why}); run `terraform init`"
    )]
    NotInstalled {
        /// The provider.
        address: String,
        /// Its locked version.
        version: String,
        /// Where it should be.
        dir: PathBuf,
        /// What was missing.
        why: String,
    },
    /// A package file could not be read while hashing.
    #[error("cannot hash the package of provider {address} at {dir}: {source}")]
    Hash {
        /// The provider.
        address: String,
        /// Its package folder.
        dir: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The installed package is not the one the lock file names.
    #[error(
        "ProviderHashMismatch: the installed package of provider {address} {version} ({dir}) hashes to {found}, which {LOCK_FILE} does not list ({locked}); nothing was run. Run `terraform init` again, or find who changed the package"
    )]
    Mismatch {
        /// The provider.
        address: String,
        /// Its locked version.
        version: String,
        /// Its package folder.
        dir: PathBuf,
        /// The hash of what is installed.
        found: String,
        /// The `h1:` hashes the lock file lists, comma-separated.
        locked: String,
    },
}

/// A provider address as the lock file and `TF_REATTACH_PROVIDERS` write it: `HOST/NAMESPACE/TYPE`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProviderAddress {
    host: String,
    namespace: String,
    kind: String,
}

impl ProviderAddress {
    /// Read `HOST/NAMESPACE/TYPE`; `None` for any other shape.
    pub fn parse(text: &str) -> Option<ProviderAddress> {
        let mut parts = text.split('/');
        let (Some(host), Some(namespace), Some(kind), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        let ok = |p: &str| {
            !p.is_empty()
                && p != "."
                && p != ".."
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
        };
        if !(ok(host) && ok(namespace) && ok(kind)) {
            return None;
        }
        Some(ProviderAddress {
            host: host.to_ascii_lowercase(),
            namespace: namespace.to_ascii_lowercase(),
            kind: kind.to_ascii_lowercase(),
        })
    }

    /// The provider type (`aws`), which names its plugin binary.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// Whether terraform serves it in process (`terraform.io/builtin/...`), never through a plugin.
    pub fn is_builtin(&self) -> bool {
        self.host == "terraform.io" && self.namespace == "builtin"
    }
}

impl std::fmt::Display for ProviderAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.host, self.namespace, self.kind)
    }
}

/// One provider the lock file names: its version and the hashes its packages may have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Locked {
    /// The provider.
    pub address: ProviderAddress,
    /// The selected version.
    pub version: String,
    /// Every hash listed (`h1:` and `zh:`).
    pub hashes: Vec<String>,
}

/// Read the providers of the lock file at `path` (none when there is no lock file).
pub fn read(path: &Path) -> Result<Vec<Locked>, LockfileError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(LockfileError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    parse(path, &text)
}

fn parse(path: &Path, text: &str) -> Result<Vec<Locked>, LockfileError> {
    let malformed = |why: String| LockfileError::Malformed {
        path: path.to_path_buf(),
        why,
    };
    let body: hcl::Body = hcl::from_str(text).map_err(|source| LockfileError::Parse {
        path: path.to_path_buf(),
        source,
    })?;
    let mut locked = Vec::new();
    for block in body.blocks().filter(|b| b.identifier() == "provider") {
        let [label] = block.labels() else {
            return Err(malformed(
                "a provider block takes one label, its address".into(),
            ));
        };
        let address = ProviderAddress::parse(label.as_str())
            .ok_or_else(|| malformed(format!("{:?} is not a provider address", label.as_str())))?;
        let mut version = None;
        let mut hashes = Vec::new();
        for attr in block.body().attributes() {
            match (attr.key(), attr.expr()) {
                ("version", hcl::Expression::String(v)) => version = Some(v.clone()),
                ("hashes", hcl::Expression::Array(items)) => {
                    for item in items {
                        if let hcl::Expression::String(h) = item {
                            hashes.push(h.clone());
                        }
                    }
                }
                _ => {}
            }
        }
        let version =
            version.ok_or_else(|| malformed(format!("provider {address} has no version")))?;
        locked.push(Locked {
            address,
            version,
            hashes,
        });
    }
    Ok(locked)
}

/// The plugin terraform would run for `locked`: its package folder and executable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Package {
    /// The package folder (symbolic links resolved).
    pub dir: PathBuf,
    /// The plugin executable in it.
    pub executable: PathBuf,
}

/// The platform folder name terraform installs for (`linux_amd64`).
pub fn platform() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "arm" => "arm",
        other => other,
    };
    format!("{}_{arch}", std::env::consts::OS)
}

/// Find the installed package of `locked` under terraform's data folder (`.terraform`).
pub fn package(data_dir: &Path, locked: &Locked) -> Result<Package, LockfileError> {
    let address = &locked.address;
    let dir = data_dir
        .join("providers")
        .join(&address.host)
        .join(&address.namespace)
        .join(&address.kind)
        .join(&locked.version)
        .join(platform());
    let not_installed = |why: String| LockfileError::NotInstalled {
        address: address.to_string(),
        version: locked.version.clone(),
        dir: dir.clone(),
        why,
    };
    let real = std::fs::canonicalize(&dir).map_err(|e| not_installed(e.to_string()))?;
    let prefix = format!("terraform-provider-{}", address.kind);
    let entries = std::fs::read_dir(&real).map_err(|e| not_installed(e.to_string()))?;
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| not_installed(e.to_string()))?;
        let name = entry.file_name().to_string_lossy().to_string();
        if !name.starts_with(&prefix) {
            continue;
        }
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(entry.path()).map_err(|e| not_installed(e.to_string()))?;
        if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
            found.push(entry.path());
        }
    }
    found.sort();
    match found.as_slice() {
        [one] => Ok(Package {
            dir: real.clone(),
            executable: one.clone(),
        }),
        [] => Err(not_installed(format!("no executable {prefix}*"))),
        _ => Err(not_installed(format!("more than one executable {prefix}*"))),
    }
}

/// The `h1:` hash of a package folder: Go's dirhash "Hash1", as terraform computes it.
///
/// SHA-256 over the lines `"<sha256 hex of the file>  <path relative to dir, with />\n"` of
/// every file under `dir`, sorted by path; base64 with padding, after `h1:`.
pub fn h1(dir: &Path) -> Result<String, std::io::Error> {
    let mut files = Vec::new();
    collect(dir, dir, &mut files)?;
    files.sort();
    let mut sum = Sha256::new();
    for (name, path) in files {
        if name.contains('\n') {
            return Err(std::io::Error::other(format!(
                "a file name with a newline: {name:?}"
            )));
        }
        let mut file = std::fs::File::open(&path)?;
        let mut one = Sha256::new();
        std::io::copy(&mut file, &mut one)?;
        sum.update(format!("{}  {name}\n", hex::encode(one.finalize())));
    }
    Ok(format!(
        "h1:{}",
        base64::engine::general_purpose::STANDARD.encode(sum.finalize())
    ))
}

/// Every non-folder entry under `dir` (links to folders are not followed, as Go's `filepath.Walk`).
pub(super) fn collect(
    base: &Path,
    dir: &Path,
    out: &mut Vec<(String, PathBuf)>,
) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            collect(base, &path, out)?;
            continue;
        }
        let rel = path
            .strip_prefix(base)
            .map_err(std::io::Error::other)?
            .components()
            .map(|c| c.as_os_str().to_string_lossy().to_string())
            .collect::<Vec<_>>()
            .join("/");
        out.push((rel, path));
    }
    Ok(())
}

/// Check the package of `locked` against the lock file's `h1:` hashes, its hash found by `hash` ([`h1`], or one kept from an earlier run); give its hash.
pub fn verify(
    locked: &Locked,
    package: &Package,
    hash: impl FnOnce(&Path) -> std::io::Result<String>,
) -> Result<String, LockfileError> {
    if crate::cut::cut(crate::cut::Mechanism::ProviderHashCheck) {
        return Ok(String::new());
    }
    let found = hash(&package.dir).map_err(|source| LockfileError::Hash {
        address: locked.address.to_string(),
        dir: package.dir.clone(),
        source,
    })?;
    let listed: Vec<&str> = locked
        .hashes
        .iter()
        .map(String::as_str)
        .filter(|h| h.starts_with("h1:"))
        .collect();
    if listed.contains(&found.as_str()) {
        return Ok(found);
    }
    Err(LockfileError::Mismatch {
        address: locked.address.to_string(),
        version: locked.version.clone(),
        dir: package.dir.clone(),
        found,
        locked: if listed.is_empty() {
            "no h1: hash".into()
        } else {
            listed.join(", ")
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCK: &str = r#"
# This file is maintained automatically by "terraform init".
provider "registry.terraform.io/hashicorp/aws" {
  version     = "5.100.0"
  constraints = "5.100.0"
  hashes = [
    "h1:edXOJWE4ORX8Fm+dpVpICzMZJat4AX0VRCAy/xkcOc0=",
    "zh:0123",
  ]
}
"#;

    #[test]
    fn reads_the_lock_file_terraform_writes() {
        let locked = parse(Path::new("x"), LOCK).unwrap();
        assert_eq!(locked.len(), 1);
        assert_eq!(
            locked[0].address.to_string(),
            "registry.terraform.io/hashicorp/aws"
        );
        assert_eq!(locked[0].version, "5.100.0");
        assert_eq!(locked[0].hashes.len(), 2);
    }

    #[test]
    fn addresses() {
        assert!(ProviderAddress::parse("hashicorp/aws").is_none());
        assert!(ProviderAddress::parse("a/../b").is_none());
        assert!(ProviderAddress::parse("a/b/c/d").is_none());
        let b = ProviderAddress::parse("terraform.io/builtin/terraform").unwrap();
        assert!(b.is_builtin());
        assert_eq!(b.kind(), "terraform");
    }

    /// The dirhash "h1" of a folder, as `sha256sum`, `sort` and `base64` give it by hand.
    #[test]
    fn h1_is_dirhash_hash1() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b"), b"two\n").unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        std::fs::write(dir.path().join("a").join("x"), b"one\n").unwrap();
        let line =
            |name: &str, body: &[u8]| format!("{}  {name}\n", hex::encode(Sha256::digest(body)));
        let listing = line("a/x", b"one\n") + &line("b", b"two\n");
        let want = format!(
            "h1:{}",
            base64::engine::general_purpose::STANDARD.encode(Sha256::digest(listing.as_bytes()))
        );
        assert_eq!(h1(dir.path()).unwrap(), want);
    }

    #[test]
    fn a_package_the_lock_file_does_not_list_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("terraform-provider-aws_v5.100.0_x5"), b"x").unwrap();
        let locked = parse(Path::new("x"), LOCK).unwrap().remove(0);
        let pkg = Package {
            dir: dir.path().to_path_buf(),
            executable: dir.path().join("terraform-provider-aws_v5.100.0_x5"),
        };
        let e = verify(&locked, &pkg, h1).unwrap_err();
        assert!(matches!(e, LockfileError::Mismatch { .. }), "{e}");
        let text = e.to_string();
        assert!(
            text.contains("registry.terraform.io/hashicorp/aws 5.100.0"),
            "{text}"
        );
        assert!(text.contains("h1:edXOJWE4ORX8Fm"), "{text}");
    }
}
