//! The warm plugins of one provider: one started before terraform asks, each handed to one terraform connection, and the next started in the background as one is taken; at most one idle.
//!
//! The first plugin also answers the door's own schema call, so that terraform's schema calls
//! are answered from the kept answer and no terraform connection holds a plugin only for the
//! schema. For the run's last terraform process the door is told how many plugins it will
//! take ([`Spares::expect`]): no more are started than that, and the idle one is stopped once
//! that process ended ([`Spares::ended`]). The idle spare also answers the validation calls
//! of connections that hold no plugin ([`Spares::validator`]), so terraform's validate walk
//! holds none.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http2::SendRequest;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::launch::{LaunchError, Launcher, Plugin, START_TIMEOUT, Upstream};
use super::schema_cache::{Answer, SchemaCache, frame};
use crate::cut::{Mechanism, cut};

/// A connection to an idle spare, for the validation calls of terraform connections that hold no plugin.
pub type Validator = SendRequest<BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>>;

/// A plugin started for no connection yet, running or still starting, and its validation connection once it has one; dropping it stops the start (and the plugin).
struct Starting {
    task: JoinHandle<Result<Upstream, LaunchError>>,
    validator: watch::Receiver<Option<Validator>>,
}

impl Drop for Starting {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A spare made by `made`; once it runs, a connection to it is opened for validation calls.
fn spare<F>(made: F) -> Starting
where
    F: std::future::Future<Output = Result<Upstream, LaunchError>> + Send + 'static,
{
    let (tx, validator) = watch::channel(None);
    let task = tokio::spawn(async move {
        let upstream = made.await?;
        match upstream.connect().await {
            Ok(sender) => {
                tx.send_replace(Some(sender));
            }
            Err(e) => {
                tracing::debug!(error = %e, "provider door: no validation connection to a spare; validation calls take a plugin");
            }
        }
        Ok(upstream)
    });
    Starting { task, validator }
}

/// Settles a schema cache when dropped, so its waiters never wait for a schema call that was stopped.
struct SettleOnDrop(Arc<SchemaCache>);

impl Drop for SettleOnDrop {
    fn drop(&mut self) {
        self.0.settle();
    }
}

/// One taken plugin, and whether it was started before the connection asked for it.
pub struct Taken {
    /// The plugin.
    pub upstream: Upstream,
    /// Whether it was started (or starting) before the connection asked.
    pub warm: bool,
}

/// The warm plugins of one provider.
pub struct Spares {
    plugin: Plugin,
    launcher: Arc<Launcher>,
    slot: Mutex<Option<Starting>>,
    /// How many more plugins the run's last terraform process will take (none: no limit).
    budget: Mutex<Option<usize>>,
}

impl Spares {
    /// The spares of `plugin`, the first being `first`, which answers the door's own schema call into `schema` before any connection takes it.
    pub fn new(
        plugin: Plugin,
        launcher: Arc<Launcher>,
        first: Upstream,
        schema: Arc<SchemaCache>,
    ) -> Arc<Spares> {
        let address = plugin.address.clone();
        let first = spare(async move {
            let settle = SettleOnDrop(schema.clone());
            match tokio::time::timeout(START_TIMEOUT, fetch_schema(&first, &schema)).await {
                Ok(Ok(())) => {}
                Ok(Err(why)) => {
                    tracing::warn!(provider = %address, "provider door: the door's own schema call failed ({why}); terraform's go to a plugin");
                }
                Err(_) => {
                    tracing::warn!(provider = %address, "provider door: the door's own schema call gave no answer in time; terraform's go to a plugin");
                }
            }
            drop(settle);
            Ok(first)
        });
        Arc::new(Spares {
            plugin,
            launcher,
            slot: Mutex::new(Some(first)),
            budget: Mutex::new(None),
        })
    }

    /// A plugin for one terraform connection, whose `call` needs one: the spare, else one started now; the next spare starts in the background.
    pub async fn take(self: &Arc<Self>, call: &str) -> Result<Taken, LaunchError> {
        let asked = Instant::now();
        let spare = self.slot.lock().ok().and_then(|mut s| s.take());
        // The next spare starts now, so a connection that asks while this one waits finds it starting.
        self.spend();
        self.refill();
        let taken = match spare {
            Some(mut starting) => match (&mut starting.task).await {
                // A spare that died while it waited is no use: one is started now.
                Ok(Ok(upstream)) if upstream.pid().is_none() => self.cold().await,
                Ok(started) => started.map(|upstream| Taken {
                    upstream,
                    warm: true,
                }),
                Err(e) => {
                    tracing::warn!(provider = %self.plugin.address, error = %e, "provider door: a spare plugin's start stopped; starting one now");
                    self.cold().await
                }
            },
            None => self.cold().await,
        };
        if let Ok(t) = &taken {
            tracing::info!(
                provider = %self.plugin.address,
                pid = t.upstream.pid().unwrap_or(0),
                warm = t.warm,
                call,
                waited_ms = asked.elapsed().as_millis() as u64,
                "provider door: a terraform connection took a plugin"
            );
        }
        taken
    }

    /// A connection to the idle spare, for a validation call of a terraform connection that holds no plugin (none: no spare, or it cannot be reached).
    ///
    /// Validation calls need no configured provider and change nothing in it: the validate
    /// walk's connections, which terraform keeps open to the end of the process but never
    /// configures, then hold no plugin of their own, and the spare stays unconfigured.
    pub async fn validator(&self) -> Option<Validator> {
        if cut(Mechanism::SpareValidates) {
            return None;
        }
        let mut ready = self
            .slot
            .lock()
            .ok()?
            .as_ref()
            .map(|s| s.validator.clone())?;
        let ready = ready.wait_for(Option::is_some).await.ok()?;
        ready.clone()
    }

    /// A plugin started now, for a connection that asked.
    async fn cold(&self) -> Result<Taken, LaunchError> {
        self.launcher
            .start(&self.plugin)
            .await
            .map(|upstream| Taken {
                upstream,
                warm: false,
            })
    }

    /// Count one plugin taken against the last process's budget.
    fn spend(&self) {
        if let Ok(mut budget) = self.budget.lock()
            && let Some(left) = budget.as_mut()
        {
            *left = left.saturating_sub(1);
        }
    }

    /// Start the next spare in the background, unless one is idle or the budget is spent.
    fn refill(&self) {
        if cut(Mechanism::WarmSpares) {
            return;
        }
        let spent = self.budget.lock().map(|b| *b == Some(0)).unwrap_or(false);
        if spent && !cut(Mechanism::SpareBudget) {
            return;
        }
        if let Ok(mut slot) = self.slot.lock()
            && slot.is_none()
        {
            let launcher = self.launcher.clone();
            let plugin = self.plugin.clone();
            *slot = Some(spare(async move { launcher.start(&plugin).await }));
        }
    }

    /// The run's last terraform process starts and will take `needed` plugins: no more are started than that (0: the idle one stops now).
    pub fn expect(&self, needed: usize) {
        tracing::info!(provider = %self.plugin.address, needed, "provider door: the run's last terraform process will take this many plugins");
        if let Ok(mut budget) = self.budget.lock() {
            *budget = Some(needed);
        }
        if needed == 0 {
            self.stop_idle();
        } else {
            self.refill();
        }
    }

    /// The process [`Spares::expect`] was for ended (`ran`) or never started: the idle spare stops when it ran; spares are started again when it did not.
    pub fn ended(&self, ran: bool) {
        if let Ok(mut budget) = self.budget.lock() {
            *budget = if ran { Some(0) } else { None };
        }
        if ran {
            self.stop_idle();
        }
    }

    /// Stop the idle spare, if any.
    fn stop_idle(&self) {
        if cut(Mechanism::SpareBudget) {
            return;
        }
        let idle = self.slot.lock().ok().and_then(|mut s| s.take());
        if idle.is_some() {
            tracing::info!(provider = %self.plugin.address, "provider door: stopped an idle spare plugin no terraform process will take");
        }
    }
}

/// Ask `upstream` for its schema, as terraform would, and keep the answer in `schema`.
async fn fetch_schema(upstream: &Upstream, schema: &SchemaCache) -> Result<(), String> {
    let sender = upstream
        .connect::<Full<Bytes>>()
        .await
        .map_err(|e| e.to_string())?;
    let path = match upstream.protocol() {
        6 => "/tfplugin6.Provider/GetProviderSchema",
        _ => "/tfplugin5.Provider/GetSchema",
    };
    let req = hyper::Request::post(format!("https://localhost{path}"))
        .header(hyper::header::CONTENT_TYPE, "application/grpc")
        .header("te", "trailers")
        .body(Full::new(frame(&[])))
        .map_err(|e| e.to_string())?;
    let resp = sender
        .clone()
        .send_request(req)
        .await
        .map_err(|e| e.to_string())?;
    let (parts, body) = resp.into_parts();
    let collected = body.collect().await.map_err(|e| e.to_string())?;
    let answer = Answer {
        headers: parts.headers,
        trailers: collected.trailers().cloned().unwrap_or_default(),
        body: collected.to_bytes(),
    };
    if !answer.reusable() {
        return Err("its answer cannot stand for terraform's".into());
    }
    schema.offer(&answer);
    Ok(())
}
