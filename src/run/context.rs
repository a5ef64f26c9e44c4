//! What every step of one run shares ([`Ctx`]), and one attempt at serving terraform ([`Attempt`]).

use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use super::claims::{Heartbeat, Hold};
use super::command::TfCommand;
use super::error::RunError;
use super::s3door::{RunSessions, S3Root};
use super::signals::Signals;
use super::tally::{RunSummary, RunTally};
use super::terraform::Terraform;
use crate::config::LiveConfig;
use crate::cut::{Mechanism, cut};
use crate::engine::cone::RefreshMode;
use crate::engine::layout::Layout;
use crate::engine::program::ProgramStamp;
use crate::engine::read_cache::ReadCache;
use crate::engine::session::{RunInfo, Session};
use crate::frontdoor::http::{self, Backend};
use crate::frontdoor::state_server::StateServer as Server;
use crate::store::{DynStore, KeyRange, WriteGuard};

/// terraform's commands that read no state: `run` starts them without checking the store.
const STATELESS: &[&str] = &[
    "version",
    "fmt",
    "validate",
    "get",
    "providers",
    "metadata",
    "login",
    "logout",
    "help",
    "-version",
    "-help",
    "--version",
    "--help",
    "-v",
    "-h",
];

/// What every step of one run shares, its stop token among it.
pub struct Ctx {
    /// The program and its global options.
    pub tf: Terraform,
    /// The command line after the program.
    pub cmd: TfCommand,
    /// The root module folder.
    pub root: PathBuf,
    /// The root's live block.
    pub config: LiveConfig,
    /// The record store.
    pub store: DynStore,
    /// Where the estate's records are in the store.
    pub layout: Layout,
    /// The store as plan stamps and recovery files name it.
    pub store_name: String,
    /// The store kind's check before the run's first write.
    pub guard: Option<Arc<dyn WriteGuard>>,
    /// The program stamp this run writes.
    pub program: ProgramStamp,
    /// This run's id.
    pub run_id: String,
    /// `--wait`.
    pub wait: Option<Duration>,
    /// `--flush-timeout`.
    pub flush_timeout: Duration,
    /// How a plan refreshes: `--refresh` (or `CHOUDOUFU_REFRESH`), else the live block's `refresh`.
    pub refresh: RefreshMode,
    /// This run's liveness while it holds claims.
    pub heartbeat: Heartbeat,
    /// SIGINT and SIGTERM: a step that can be stopped waits on them.
    pub signals: Signals,
    /// For a root whose backend is `s3`: what its S3 door serves (none: the http backend).
    pub s3: Option<S3Root>,
    /// The run's first attempt, reading the estate ahead ([`Ctx::prepare`]), until it is started.
    pub first: std::sync::Mutex<Option<Attempt>>,
}

impl Ctx {
    /// A fresh session of this run (every session of one run shares its run id).
    pub fn session(&self) -> Session {
        Session::new(
            self.store.clone(),
            self.layout.clone(),
            RunInfo {
                run_id: self.run_id.clone(),
                program: self.program.clone(),
            },
        )
        .with_guard(self.guard.clone())
        .with_cache(Some(ReadCache::for_root(&self.root)))
    }

    /// Check once, before terraform starts, that the store answers and the estate can be listed (one listing of at most one key); a store that cannot be used refuses the run.
    ///
    /// A missing bucket, a store that does not answer or refused credentials would otherwise
    /// reach the user only as terraform's "giving up after 3 attempt(s)", minutes later.
    pub async fn check_store(&self) -> Result<(), RunError> {
        let stateless = match self.cmd.sub() {
            None => true,
            Some(sub) => STATELESS.contains(&sub),
        };
        if stateless || cut(Mechanism::StorePreflight) {
            return Ok(());
        }
        self.store
            .list_range_page(&self.layout.prefix(), &KeyRange::default(), 1, None)
            .await
            .map_err(RunError::StoreRefused)?;
        match &self.s3 {
            Some(s3) => s3.check_no_stock_state(&self.store, self.cmd.sub()).await,
            None => Ok(()),
        }
    }

    /// Before terraform starts: check the store ([`Ctx::check_store`]) and, for a command that calls providers, open the provider door (unless it is off), at once; when `read_ahead`, the first attempt starts reading the estate for terraform's first state request meanwhile.
    pub async fn prepare(&self, read_ahead: bool) -> Result<(), RunError> {
        let calls = self
            .cmd
            .sub()
            .is_some_and(|s| super::terraform::DOOR_COMMANDS.contains(&s));
        if read_ahead && calls {
            let first = Attempt::unserved(self.session());
            first.read_ahead();
            if let Ok(mut slot) = self.first.lock() {
                *slot = Some(first);
            }
        }
        let door = async {
            if calls {
                self.tf.open_door().await
            } else {
                Ok(())
            }
        };
        let (checked, opened) = tokio::join!(self.check_store(), door);
        checked?;
        opened
    }

    /// Run terraform with `args` and `env` against `server`, the run's signals passed on.
    pub async fn terraform(
        &self,
        args: &[String],
        server: &Server,
        env: &[(&str, &str)],
    ) -> Result<ExitStatus, RunError> {
        self.tf.run(args, server, env, &self.signals).await
    }
}

/// One session of the run, the claims it holds and, once it serves terraform, its server.
pub struct Attempt {
    backend: Arc<Backend>,
    tally: Arc<RunTally>,
    server: Option<Server>,
    claims: Hold,
}

impl Attempt {
    /// A session serving terraform at once (the one read ahead for it, if any).
    pub async fn start(ctx: &Ctx) -> Result<Attempt, RunError> {
        let first = ctx.first.lock().ok().and_then(|mut f| f.take());
        let mut attempt = first.unwrap_or_else(|| Attempt::unserved(ctx.session()));
        attempt.serve(ctx).await?;
        Ok(attempt)
    }

    /// A session that serves nothing yet.
    pub fn unserved(session: Session) -> Attempt {
        let tally = Arc::new(RunTally::default());
        Attempt {
            backend: Backend::new(session, tally.clone()),
            tally,
            server: None,
            claims: Hold::default(),
        }
    }

    /// Start serving (once) and give the server.
    pub async fn serve(&mut self, ctx: &Ctx) -> Result<&Server, RunError> {
        if self.server.is_none() {
            let server = match &ctx.s3 {
                Some(s3) => Server::S3(
                    s3.serve(
                        RunSessions {
                            store: ctx.store.clone(),
                            guard: ctx.guard.clone(),
                            run: RunInfo {
                                run_id: ctx.run_id.clone(),
                                program: ctx.program.clone(),
                            },
                            root: ctx.root.clone(),
                        },
                        self.backend.clone(),
                        self.tally.clone(),
                    )
                    .await?,
                ),
                None => Server::Http(http::serve(self.backend.clone()).await?),
            };
            tracing::info!(url = %server.url(), estate = %ctx.config.estate, "serving state for this run");
            // The types of the state terraform is served stay in the schema answers the provider door gives.
            let backend = self.backend.clone();
            ctx.tf.serve_state_from(Box::new(move || {
                let backend = backend.clone();
                Box::pin(async move { backend.session().snapshot().await })
            }));
            self.server = Some(server);
        }
        self.server
            .as_ref()
            .ok_or_else(|| RunError::Io(std::io::Error::other("the state server did not start")))
    }

    /// Start reading the estate for terraform's first state request, which waits for the read (nothing when a request came already).
    fn read_ahead(&self) {
        let Some(slot) = self.session().read_ahead_slot() else {
            return;
        };
        let backend = self.backend.clone();
        tokio::spawn(async move { backend.session().read_ahead(slot).await });
    }

    /// The attempt's session.
    pub fn session(&self) -> &Session {
        self.backend.session()
    }

    /// The attempt's backend (its session's door for terraform).
    pub fn backend(&self) -> &Arc<Backend> {
        &self.backend
    }

    /// Hold `claims` until the attempt ends.
    pub fn hold(&mut self, claims: Hold) {
        self.claims = claims;
    }

    /// The claims the attempt holds.
    pub fn claims(&self) -> &Hold {
        &self.claims
    }

    /// End the attempt: release its claims, stop its server; its backend and what it wrote.
    pub async fn end(self) -> (Arc<Backend>, RunSummary) {
        self.claims.release().await;
        if let Some(server) = self.server {
            server.stop().await;
        }
        let summary = self.tally.summary();
        (self.backend, summary)
    }
}
