//! Split and assemble round-trip state documents the real terraform wrote (terraform-fixtures/states).

use std::path::{Path, PathBuf};
use std::process::Command;

use choudoufu_live::engine::digest::canonical;
use choudoufu_live::engine::state::{Header, Item, assemble, parse};
use serde_json::Value;

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("terraform-fixtures/states");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("terraform-fixtures/states")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "tfstate"))
        .collect();
    out.sort();
    assert!(out.len() >= 6, "expected the six fixtures, found {out:?}");
    out
}

#[test]
fn every_fixture_round_trips() {
    for path in fixtures() {
        let bytes = std::fs::read(&path).unwrap();
        let original: Value = serde_json::from_slice(&bytes).unwrap();
        let split = parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let header = Header {
            lineage: split.lineage.clone(),
            serial: split.serial,
            terraform_version: split.terraform_version.clone(),
        };
        let again = assemble(&header, &split.items);
        for field in [
            "version",
            "terraform_version",
            "serial",
            "lineage",
            "outputs",
            "resources",
        ] {
            assert_eq!(
                canonical(&again[field]),
                canonical(&original[field]),
                "{}: field {field} differs after split and assemble",
                path.display()
            );
        }
        // Assembling is deterministic whatever order the records come in.
        let mut reversed = split.items.clone();
        reversed.reverse();
        assert_eq!(assemble(&header, &reversed), again, "{}", path.display());
    }
}

#[test]
fn one_item_per_instance_object_with_its_provider_and_mode() {
    let bytes = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("terraform-fixtures/states/modules.tfstate"),
    )
    .unwrap();
    let split = parse(&bytes).unwrap();
    let resources: Vec<_> = split
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Resource { address, meta, .. } => Some((address.clone(), meta.clone())),
            _ => None,
        })
        .collect();
    assert!(
        resources
            .iter()
            .any(|(a, m)| a.starts_with("data.") && m.mode == "data")
    );
    assert!(
        resources
            .iter()
            .any(|(a, _)| a.starts_with("module.net[1].module.inner[\"beta\"]."))
    );
    assert!(
        resources
            .iter()
            .all(|(_, m)| m.provider.starts_with("provider["))
    );
}

/// The addresses we derive are the ones the real terraform prints (`terraform state list`).
#[test]
fn addresses_match_terraform_state_list() {
    let Ok(out) = Command::new("terraform").arg("version").output() else {
        panic!(
            "terraform is not on PATH: this test needs the real terraform binary (1.11.4 ships on this machine kind)"
        );
    };
    assert!(out.status.success());
    let scratch = tempfile::tempdir().unwrap();
    let cli_config = scratch.path().join("cli.tfrc");
    std::fs::write(&cli_config, "").unwrap();
    for path in fixtures() {
        let out = Command::new("terraform")
            .args(["state", "list"])
            .arg(format!("-state={}", path.display()))
            .current_dir(scratch.path())
            .env("CHECKPOINT_DISABLE", "1")
            .env("TF_CLI_CONFIG_FILE", &cli_config)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let mut theirs: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        let split = parse(&std::fs::read(&path).unwrap()).unwrap();
        let mut ours: Vec<String> = split
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Resource { address, .. } if !address.contains(" (deposed ") => {
                    Some(address.clone())
                }
                _ => None,
            })
            .collect();
        ours.dedup();
        theirs.sort();
        ours.sort();
        assert_eq!(ours, theirs, "{}", path.display());
    }
}

#[test]
fn deposed_objects_get_their_own_record() {
    let bytes = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("terraform-fixtures/states/tainted_deposed.tfstate"),
    )
    .unwrap();
    let split = parse(&bytes).unwrap();
    let cbd: Vec<_> = split
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Resource { address, .. } if address.starts_with("terraform_data.cbd") => {
                Some(address.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(cbd.len(), 2, "{cbd:?}");
    assert!(cbd.iter().any(|a| a.contains(" (deposed ")));
}
