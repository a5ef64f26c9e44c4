//! An s3 root's stock state moved into records when told (`records import` with no file), and
//! written back as a plain state when leaving (`records export --to-backend`).

use std::path::Path;

use thiserror::Error;

use super::out::outln;
use super::transfer::import_bytes;
use crate::cli::error::CliError;
use crate::config::LiveConfig;
use crate::config::backend_s3::{S3Backend, root_config, selected_workspace};
use crate::cut::{Mechanism, cut};
use crate::engine::layout::Layout;
use crate::engine::program::ProgramStamp;
use crate::engine::session::{RunInfo, Session};
use crate::frontdoor::plugin::state_store::estate_for;
use crate::frontdoor::s3::{StateKeys, adopted};
use crate::run::EXIT_CONFLICT;
use crate::store::{self, WriteOutcome};

/// Why a root's backend state cannot be moved in or out.
#[derive(Debug, Error)]
pub enum AdoptError {
    /// The root's backend is not `s3`, or a live.hcl names another store.
    #[error(
        "{0}: records import without a FILE (and export --to-backend) work on a root whose backend is s3 and whose records are in the backend's own bucket (no live.hcl); give a state FILE instead. Nothing was written."
    )]
    NotS3Root(String),
    /// The workspace name makes no estate.
    #[error("{0}; nothing was written")]
    Workspace(String),
    /// A stock state is at the key: leaving would overwrite it.
    #[error(
        "the bucket holds terraform's own state at {0:?}, not choudoufu-live's marker: writing the records' state there would replace it. Nothing was written."
    )]
    StockAtKey(String),
}

/// The backend's bucket and key for the selected workspace of `root`, its estate, and the root's settings.
fn locate(root: &Path) -> Result<(LiveConfig, StateKeys, String, Layout), CliError> {
    let Some(backend) = S3Backend::find(root)? else {
        return Err(AdoptError::NotS3Root(root.display().to_string()).into());
    };
    if LiveConfig::load(root).is_ok() {
        return Err(AdoptError::NotS3Root(root.display().to_string()).into());
    }
    let config = root_config(root)?;
    let ws = selected_workspace(&[format!("-chdir={}", root.display())]);
    let keys = StateKeys {
        bucket: backend.bucket.clone(),
        key: backend.key.clone(),
        prefix: backend.workspace_key_prefix.clone(),
    };
    let estate = estate_for(&config.estate, &ws).map_err(AdoptError::Workspace)?;
    let key = keys.state_key(&ws);
    Ok((config, keys, key, Layout::new(estate)))
}

/// `records import` with no file: the stock state at the selected workspace's key, into records; the marker in its place.
pub async fn import_from_backend(root: &Path) -> Result<i32, CliError> {
    let (config, keys, key, layout) = locate(root)?;
    let store = store::open(&config.store, root).await;
    let Some(stock) = store.get(&key).await? else {
        outln!(
            "s3://{}/{key} holds no state: nothing to import into estate {}.",
            keys.bucket,
            layout.estate()
        );
        return Ok(0);
    };
    if adopted::is_marker(&stock.bytes) {
        outln!(
            "s3://{}/{key} was imported already: estate {} holds its records.",
            keys.bucket,
            layout.estate()
        );
        return Ok(0);
    }
    let name = format!("s3://{}/{key}", keys.bucket);
    let code = import_bytes(root, &stock.bytes, &name, &config, layout).await?;
    if code != 0 || cut(Mechanism::S3AdoptMarker) {
        return Ok(code);
    }
    match store
        .update(&key, &adopted::marker(), &stock.version)
        .await?
    {
        WriteOutcome::Written(_) => {
            outln!(
                "{name} now holds choudoufu-live's marker: terraform without `choudoufu-live run` refuses to plan (\"Invalid Terraform version string\") and changes nothing; the stock state stays in the bucket's object versions."
            );
            Ok(0)
        }
        WriteOutcome::Conflict(_) => {
            eprintln!(
                "choudoufu-live: {name} changed while it was imported (a terraform without run wrote it): the records hold the version read, and the object was left as it is. Import again once nothing else writes it."
            );
            Ok(EXIT_CONFLICT)
        }
    }
}

/// `records export --to-backend`: the records' state written back at the selected workspace's key, in place of the marker.
pub async fn export_to_backend(root: &Path) -> Result<i32, CliError> {
    let (config, keys, key, layout) = locate(root)?;
    let store = store::open(&config.store, root).await;
    let estate = layout.estate().to_string();
    let session = Session::open(
        store.clone(),
        layout,
        RunInfo::new(ProgramStamp::detect(root)),
    )
    .await?;
    let doc = session.state_document().await;
    let name = format!("s3://{}/{key}", keys.bucket);
    let written = match store.get(&key).await? {
        Some(found) if adopted::is_marker(&found.bytes) => {
            store.update(&key, &doc, &found.version).await?
        }
        Some(_) => return Err(AdoptError::StockAtKey(key).into()),
        None => store.create(&key, &doc).await?,
    };
    match written {
        WriteOutcome::Written(_) => {
            outln!(
                "wrote estate {estate}'s state to {name} as a plain state: terraform without `choudoufu-live run` reads it now. The records stay; a later run is refused while that state is there."
            );
            Ok(0)
        }
        WriteOutcome::Conflict(_) => {
            eprintln!(
                "choudoufu-live: {name} changed while the state was written; nothing was written. Export again."
            );
            Ok(EXIT_CONFLICT)
        }
    }
}
