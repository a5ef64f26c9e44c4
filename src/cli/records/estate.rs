//! The estate a records command works on: the root's live block, its store and layout, or a read-only session on it.

use std::path::Path;

use crate::cli::error::CliError;
use crate::config::LiveConfig;
use crate::engine::layout::{Layout, RecordKey};
use crate::engine::program::ProgramStamp;
use crate::engine::session::{RunInfo, Session};
use crate::store::{self, DynStore};

/// The root's live block, store and estate layout.
pub(super) struct Estate {
    /// The live block.
    pub(super) config: LiveConfig,
    /// The store, traced.
    pub(super) store: DynStore,
    /// The estate's keys.
    pub(super) layout: Layout,
}

impl Estate {
    /// Read the live block of `root` and open its store.
    pub(super) async fn open(root: &Path) -> Result<Estate, CliError> {
        let config = crate::config::backend_s3::root_config(root)?;
        let store = store::open(&config.store, root).await;
        let layout = Layout::new(config.estate.clone());
        Ok(Estate {
            config,
            store,
            layout,
        })
    }

    /// The store key of an address as the commands take it (`output.NAME` for an output).
    pub(super) fn key_of(&self, address: &str) -> RecordKey {
        match address.strip_prefix("output.") {
            Some(name) => self.layout.output_key(name),
            None => self.layout.resource_key(address),
        }
    }
}

/// Open a read-only session on the root's estate.
pub(super) async fn open_session(root: &Path) -> Result<Session, CliError> {
    let config = crate::config::backend_s3::root_config(root)?;
    let store = store::open(&config.store, root).await;
    let layout = Layout::new(config.estate.clone());
    let run = RunInfo::new(ProgramStamp::detect(root));
    Ok(Session::open(store, layout, run).await?)
}
