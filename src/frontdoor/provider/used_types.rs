//! The resource types a run can use, and the schema answer terraform hears: those types only.
//!
//! Terraform decodes a provider's whole schema answer at every plugin it starts: plan, the
//! walk, `show -json` and apply each start one or two. The AWS provider's answer names some
//! 1,500 resource types and 600 data sources, seconds of terraform's CPU each time. A run
//! uses the types its configuration and its state name, so the door answers with those:
//! every resource, data source and ephemeral resource type whose name is a word of the
//! root's or one of its modules' configuration files (a word anywhere: a block's label, an
//! `import` block's `to`, a comment), and every type of the state terraform is served.
//! Everything else in the answer (the provider's own schema, functions, capabilities, fields
//! a newer protocol adds) is passed on byte for byte. When the configuration cannot be read
//! or the state is not known, terraform hears the whole answer.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use thiserror::Error;

use super::cone::Records;
use super::schema_cache::{Answer, frame, framed_message};
use super::wire::retain_map_entries;
use crate::cut::{Mechanism, cut};

/// The schema answer's map fields of type names, alike in protocols 5 and 6: resource (2), data source (3) and ephemeral resource (8) schemas.
const TYPE_MAPS: [u32; 3] = [2, 3, 8];

/// The configuration files terraform (and tofu) read in a module folder.
const CONFIG_SUFFIXES: [&str; 4] = [".tf", ".tf.json", ".tofu", ".tofu.json"];

/// Why a root's configuration words could not be read: the door then answers with the whole schema.
#[derive(Debug, Error)]
pub enum UsedTypesError {
    /// A module folder or one of its files could not be read.
    #[error("cannot read the configuration at {path}: {source}")]
    Read {
        /// The folder or file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// `.terraform/modules/modules.json` is not what `init` writes.
    #[error("{path} is not the module manifest terraform init writes: {source}")]
    Manifest {
        /// The manifest.
        path: PathBuf,
        /// The cause.
        source: serde_json::Error,
    },
}

/// Where the door reads the state terraform is served (set by the run once its state server serves).
pub type StateSource = Arc<Mutex<Option<Records>>>;

/// The words of a root's configuration, and where its state is read: what decides the types terraform hears.
pub struct UsedTypes {
    words: BTreeSet<String>,
    state: StateSource,
}

/// `init`'s module manifest: each module's folder, relative to the root.
#[derive(serde::Deserialize)]
struct Manifest {
    #[serde(rename = "Modules", default)]
    modules: Vec<ManifestModule>,
}

#[derive(serde::Deserialize)]
struct ManifestModule {
    #[serde(rename = "Dir")]
    dir: String,
}

impl UsedTypes {
    /// The words of the configuration of `root` and of every module `init` installed under `data_dir`; the state read from `state`.
    pub fn read(root: &Path, data_dir: &Path, state: StateSource) -> Result<Self, UsedTypesError> {
        let mut folders = vec![root.to_path_buf()];
        let manifest = data_dir.join("modules").join("modules.json");
        match std::fs::read(&manifest) {
            Ok(bytes) => {
                let parsed: Manifest =
                    serde_json::from_slice(&bytes).map_err(|source| UsedTypesError::Manifest {
                        path: manifest.clone(),
                        source,
                    })?;
                folders.extend(parsed.modules.into_iter().map(|m| root.join(m.dir)));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(UsedTypesError::Read {
                    path: manifest,
                    source,
                });
            }
        }
        let mut words = BTreeSet::new();
        for folder in folders {
            add_words(&folder, &mut words)?;
        }
        Ok(UsedTypes { words, state })
    }

    /// `kept` as terraform hears it: only the types the configuration and the state name (the whole answer while the state is not known).
    pub async fn answer(&self, kept: &Answer) -> Answer {
        let reading = match self.state.lock() {
            Ok(source) => source.as_ref().map(|records| records()),
            Err(_) => None,
        };
        let Some(reading) = reading else {
            return kept.clone();
        };
        let snapshot = reading.await;
        let state: BTreeSet<String> = if cut(Mechanism::SchemaStateTypes) {
            BTreeSet::new()
        } else {
            snapshot
                .records
                .values()
                .filter_map(|e| e.resource().map(|r| r.type_name.to_string()))
                .collect()
        };
        let Some(message) = framed_message(&kept.body) else {
            return kept.clone();
        };
        let (mut all, mut kept_types) = (0usize, 0usize);
        let pruned = retain_map_entries(message, &TYPE_MAPS, |name| {
            all += 1;
            let keep = self.words.contains(name) || state.contains(name);
            kept_types += usize::from(keep);
            keep
        });
        match pruned {
            Ok(pruned) => {
                tracing::info!(
                    kept = kept_types,
                    of = all,
                    "provider door: the schema answer holds the types the configuration and state name"
                );
                Answer {
                    body: frame(&pruned),
                    ..kept.clone()
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "provider door: the schema answer could not be narrowed; terraform hears it whole");
                kept.clone()
            }
        }
    }
}

/// Every word (letters, digits, `_`, `-`) of the configuration files in `folder` (not its subfolders: each module is one folder).
fn add_words(folder: &Path, words: &mut BTreeSet<String>) -> Result<(), UsedTypesError> {
    let read_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| UsedTypesError::Read { path, source }
    };
    for entry in std::fs::read_dir(folder).map_err(read_err(folder))? {
        let path = entry.map_err(read_err(folder))?.path();
        let is_config = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| CONFIG_SUFFIXES.iter().any(|s| n.ends_with(s)));
        if !is_config || path.is_dir() {
            continue;
        }
        let text = std::fs::read(&path).map_err(read_err(&path))?;
        for word in text
            .split(|b| !(b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-'))
            .filter(|w| !w.is_empty())
        {
            if let Ok(word) = std::str::from_utf8(word)
                && !words.contains(word)
            {
                words.insert(word.to_string());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_of_the_root_and_its_installed_modules() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(
            root.path().join("main.tf"),
            "resource \"aws_ssm_parameter\" \"p\" {}\nimport {\n  to = aws_iam_role.r\n  id = \"x\"\n}\n",
        )
        .unwrap();
        std::fs::write(root.path().join("notes.txt"), "aws_s3_bucket").unwrap();
        std::fs::create_dir_all(root.path().join("mod")).unwrap();
        std::fs::write(
            root.path().join("mod/x.tf.json"),
            r#"{"data": {"aws_caller_identity": {"me": {}}}}"#,
        )
        .unwrap();
        let data = root.path().join(".terraform");
        std::fs::create_dir_all(data.join("modules")).unwrap();
        std::fs::write(
            data.join("modules/modules.json"),
            r#"{"Modules":[{"Key":"","Source":"","Dir":"."},{"Key":"m","Source":"./mod","Dir":"mod"}]}"#,
        )
        .unwrap();
        let used = UsedTypes::read(root.path(), &data, Arc::default()).unwrap();
        for word in ["aws_ssm_parameter", "aws_iam_role", "aws_caller_identity"] {
            assert!(used.words.contains(word), "{word}");
        }
        assert!(!used.words.contains("aws_s3_bucket"));
        std::fs::write(data.join("modules/modules.json"), "{").unwrap();
        assert!(matches!(
            UsedTypes::read(root.path(), &data, Arc::default()),
            Err(UsedTypesError::Manifest { .. })
        ));
    }
}
