//! `run` on a root whose backend is `s3`: the run's S3 door, serving the selected workspace
//! through the run's own session and every other workspace through sessions of the run.

use std::path::PathBuf;
use std::sync::Arc;

use super::error::RunError;
use crate::config::backend_s3::{S3Backend, selected_workspace};
use crate::cut::{Mechanism, cut};
use crate::engine::layout::{EstateName, Layout};
use crate::engine::read_cache::ReadCache;
use crate::engine::session::{RunInfo, Session};
use crate::frontdoor::http::{Backend, Tally};
use crate::frontdoor::plugin::state_store::estate_for;
use crate::frontdoor::s3::{self, Door, Estates, OpenSession, StateKeys, adopted};
use crate::store::{DynStore, WriteGuard};

/// What every session of a run is opened with: its store, write guard, identity and root.
pub struct RunSessions {
    /// The record store.
    pub store: DynStore,
    /// The store kind's check before the first write.
    pub guard: Option<Arc<dyn WriteGuard>>,
    /// The run.
    pub run: RunInfo,
    /// The root, whose read cache the sessions share.
    pub root: PathBuf,
}

/// What a run's S3 door serves: the backend's objects, the `default` workspace's estate, and the workspace terraform will use.
#[derive(Clone, Debug)]
pub struct S3Root {
    /// The backend's bucket, key and workspace prefix.
    pub keys: StateKeys,
    /// The estate of the `default` workspace.
    pub base: EstateName,
    /// The workspace terraform will use (`TF_WORKSPACE`, else the one selected).
    pub workspace: String,
    /// Whether the record store is the backend's own bucket (no live.hcl names another).
    pub own_bucket: bool,
    /// The backend block's `profile`, which terraform reads from the run's shared files.
    pub profile: Option<String>,
}

impl S3Root {
    /// The door of `backend` for terraform's arguments `args`, its `default` workspace in estate `base`.
    pub fn new(backend: &S3Backend, base: EstateName, args: &[String], own_bucket: bool) -> Self {
        S3Root {
            keys: StateKeys {
                bucket: backend.bucket.clone(),
                key: backend.key.clone(),
                prefix: backend.workspace_key_prefix.clone(),
            },
            base,
            workspace: selected_workspace(args),
            own_bucket,
            profile: backend.profile.clone(),
        }
    }

    /// The estate the run itself serves: the selected workspace's.
    pub fn estate(&self) -> Result<EstateName, RunError> {
        if cut(Mechanism::S3Workspaces) {
            return Ok(self.base.clone());
        }
        estate_for(&self.base, &self.workspace).map_err(|message| {
            RunError::Config(crate::config::ConfigError::Invalid {
                at: "TF_WORKSPACE or the selected workspace".into(),
                message,
            })
        })
    }

    /// Refuse the run when the backend's bucket (when it is the record store, `store`) holds terraform's
    /// own state at the selected workspace's key: the door serves records only, and terraform
    /// would plan to create everything that state holds again. `init` and `state` commands are
    /// let through: `state push` is how such a state is moved into records.
    pub async fn check_no_stock_state(
        &self,
        store: &DynStore,
        sub: Option<&str>,
    ) -> Result<(), RunError> {
        if !self.own_bucket || matches!(sub, Some("state" | "init")) || cut(Mechanism::S3StockState)
        {
            return Ok(());
        }
        let key = self.keys.state_key(&self.workspace);
        let page = store.list_page(&key, None).await?;
        if !page.items.iter().any(|l| l.key == key) {
            return Ok(());
        }
        // `records import` leaves its marker there: an adopted workspace.
        let found = store.get(&key).await?;
        if found.is_some_and(|s| !adopted::is_marker(&s.bytes)) {
            return Err(RunError::StockState {
                bucket: self.keys.bucket.clone(),
                key,
            });
        }
        Ok(())
    }

    /// Start the door, the selected workspace served by `main`, any other by a session of run
    /// `run` on `store` (with its write guard and the read cache of the root at `root`).
    pub async fn serve(
        &self,
        sessions: RunSessions,
        main: Arc<Backend>,
        tally: Arc<dyn Tally>,
    ) -> Result<s3::Server, RunError> {
        let RunSessions {
            store,
            guard,
            run,
            root,
        } = sessions;
        let open: OpenSession = Arc::new(move |estate: EstateName| {
            Session::new(store.clone(), Layout::new(estate), run.clone())
                .with_guard(guard.clone())
                .with_cache(Some(ReadCache::for_root(&root)))
        });
        let estates = Estates::new(
            self.base.clone(),
            self.workspace.clone(),
            main.clone(),
            open,
            tally,
        );
        let door = Door::new(self.keys.clone(), Arc::new(estates));
        Ok(s3::serve(door, main, self.profile.as_deref()).await?)
    }
}
