//! The estates an S3 door serves: the run's own workspace through the run's backend (its
//! claims, markers and summary), and any other workspace terraform names (`workspace new`,
//! `list`, `delete`) through a backend of its own, opened when first named.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use tokio::sync::Mutex;

use crate::cut::{Mechanism, cut};
use crate::engine::layout::{EstateName, ROOT_PREFIX};
use crate::engine::session::Session;
use crate::frontdoor::http::{Backend, Tally};
use crate::frontdoor::plugin::state_store::estate_for;
use crate::store::{DynStore, StoreError, list_all};

use super::keys::DEFAULT_WORKSPACE;

/// Opens a session of the run on an estate (the run's store, run id, write guard and cache).
pub type OpenSession = Arc<dyn Fn(EstateName) -> Session + Send + Sync>;

/// Every workspace's backend: the run's own, and the others, opened when first named.
pub struct Estates {
    base: EstateName,
    current: String,
    main: Arc<Backend>,
    open: OpenSession,
    tally: Arc<dyn Tally>,
    store: DynStore,
    others: Mutex<HashMap<String, Arc<Backend>>>,
}

impl fmt::Debug for Estates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Estates")
            .field("base", &self.base)
            .field("current", &self.current)
            .finish_non_exhaustive()
    }
}

impl Estates {
    /// The estates of `base`: workspace `current` served by `main`, any other opened with `open`.
    pub fn new(
        base: EstateName,
        current: String,
        main: Arc<Backend>,
        open: OpenSession,
        tally: Arc<dyn Tally>,
    ) -> Self {
        let store = main.session().store().clone();
        Estates {
            base,
            current,
            main,
            open,
            tally,
            store,
            others: Mutex::new(HashMap::new()),
        }
    }

    /// The backend of workspace `ws`, or why its name is refused.
    pub async fn backend(&self, ws: &str) -> Result<Arc<Backend>, String> {
        if ws == self.current || cut(Mechanism::S3Workspaces) {
            return Ok(self.main.clone());
        }
        let estate = estate_for(&self.base, ws)?;
        let mut others = self.others.lock().await;
        Ok(others
            .entry(ws.to_string())
            .or_insert_with(|| Backend::new((self.open)(estate), self.tally.clone()))
            .clone())
    }

    /// Whether `ws` is the workspace the run itself serves.
    pub fn is_main(&self, ws: &str) -> bool {
        ws == self.current || cut(Mechanism::S3Workspaces)
    }

    /// The run's own backend.
    pub fn main(&self) -> &Arc<Backend> {
        &self.main
    }

    /// Every workspace that exists: `default`, and each whose estate has its meta record.
    pub async fn workspaces(&self) -> Result<Vec<String>, StoreError> {
        let prefix = format!("{ROOT_PREFIX}{}@", self.base);
        let mut names = vec![DEFAULT_WORKSPACE.to_string()];
        for listed in list_all(self.store.as_ref(), &prefix).await? {
            if let Some(ws) = listed
                .key
                .strip_prefix(&prefix)
                .and_then(|r| r.strip_suffix("/_estate"))
            {
                names.push(ws.to_string());
            }
        }
        names.sort();
        names.dedup();
        Ok(names)
    }
}
