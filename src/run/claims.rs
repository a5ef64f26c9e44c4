//! Every use `run` makes of the engine's claims, in this one file: this run's liveness, the
//! claims an attempt holds, a refusal, and the gone runs' claims taken over.

use std::sync::Arc;
use std::time::Duration;

use super::error::RunError;
use super::say;
use crate::cut::{Mechanism, cut};
use crate::engine::address::resource_of;
use crate::engine::claims::{self, Alongside, ClaimRefused, Claims, Liveness};
use crate::engine::layout::Layout;
use crate::engine::plan::ChangeSet;
use crate::engine::program::ProgramStamp;
use crate::engine::session::Session;
use crate::store::{DynStore, StoreError};

/// This run's liveness: its heartbeat starts with its first claim and ends with the run.
pub struct Heartbeat {
    interval: Duration,
    live: Option<Arc<Liveness>>,
}

impl Heartbeat {
    /// A heartbeat every `interval`, not started yet.
    pub fn new(interval: Duration) -> Heartbeat {
        Heartbeat {
            interval,
            live: None,
        }
    }

    /// This run's liveness, its heartbeat started on first use.
    fn live(&mut self, store: &DynStore, layout: &Layout, run: &Runner<'_>) -> Arc<Liveness> {
        let interval = self.interval;
        self.live
            .get_or_insert_with(|| {
                Liveness::start(
                    store.clone(),
                    layout.clone(),
                    run.run_id,
                    run.program.clone(),
                    interval,
                )
            })
            .clone()
    }

    /// Say this run has ended (its run record, if a heartbeat wrote one, is removed).
    pub async fn end(&mut self) {
        if let Some(live) = self.live.take()
            && let Err(e) = live.end().await
        {
            say::run_record_left(e);
        }
    }
}

/// The run that claims: its id and program stamp.
pub struct Runner<'a> {
    /// The run's id.
    pub run_id: &'a str,
    /// Its program stamp.
    pub program: &'a ProgramStamp,
}

/// The claims an attempt holds: none (nothing to claim), or every change of its plan.
#[derive(Default)]
pub struct Hold(Option<Arc<Claims>>);

impl Hold {
    /// Let `session` write the held changes' records (its writes then keep the claims in place).
    pub async fn lend(&self, session: &Session) {
        if let Some(c) = &self.0 {
            session.hold(c.clone()).await;
        }
    }

    /// Release the claims; a failure is said, and the claims are taken over once the heartbeat stops.
    pub async fn release(self) {
        if let Some(c) = self.0
            && let Err(e) = c.release().await
        {
            say::claims_not_released(e);
        }
    }

    /// What taking over gone runs' claims means, one message per gone run (none when nothing was taken over).
    pub fn takeover_messages(&self) -> Vec<String> {
        self.0
            .as_ref()
            .map(|c| claims::takeover_messages(c.taken_over()))
            .unwrap_or_default()
    }

    /// The addresses of the gone runs' claims taken over, with their resource type.
    pub fn taken_over(&self) -> Vec<(String, Option<String>)> {
        let Some(c) = &self.0 else {
            return Vec::new();
        };
        c.taken_over()
            .iter()
            .map(|t| {
                let resource = resource_of(&t.address);
                let mut parts = resource.rsplit('.');
                let ty = match (parts.next(), parts.next()) {
                    (_, Some(ty)) => Some(ty.to_string()),
                    _ => None,
                };
                (t.address.clone(), ty)
            })
            .collect()
    }
}

/// Claims refused: another live run holds some of the changes, or a resource they depend on.
pub struct Refusal(ClaimRefused);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl Refusal {
    /// The refusal's error name.
    pub fn name(&self) -> &'static str {
        self.0.name()
    }

    /// Who still holds the claims in the way (`RUNS to release ADDRESSES`); none once they are all released.
    pub async fn still_held(
        &self,
        store: &DynStore,
        layout: &Layout,
    ) -> Result<Option<String>, StoreError> {
        let in_the_way = claims::still_in_the_way(store, layout, &self.0).await?;
        Ok((!in_the_way.is_empty())
            .then(|| say::holders(in_the_way.iter().map(|(a, h)| (a.as_str(), h.to_string())))))
    }
}

/// What a claim came to.
pub enum Claim {
    /// Every change is the run's now (or there was nothing to claim).
    Held(Hold),
    /// Refused: nothing of it is held.
    Refused(Refusal),
}

/// Claim `set`'s changes for `run`, after `session`'s write guard passed (nothing to claim: an empty hold); `along` as [`Claims::claim_with`] takes it, its work given back when it ran.
pub async fn claim_set<F: Future>(
    heartbeat: &mut Heartbeat,
    store: &DynStore,
    layout: &Layout,
    run: Runner<'_>,
    session: &Session,
    set: &ChangeSet,
    along: Alongside<F>,
) -> Result<(Claim, Option<F::Output>), RunError> {
    let wanted = set.wanted();
    if wanted.is_empty() || cut(Mechanism::Claims) {
        return Ok((Claim::Held(Hold::default()), None));
    }
    // An unsafe store gets nothing written, not even this run's record or a claim.
    session.check_guard().await?;
    let live = heartbeat.live(store, layout, &run);
    let (claimed, along) = Claims::claim_with(store, layout, &live, &wanted, along).await?;
    let claim = match claimed {
        Ok(claims) => {
            tracing::info!(
                claims = claims.addresses().len(),
                "claimed this plan's changes"
            );
            Claim::Held(Hold(Some(Arc::new(claims))))
        }
        Err(refused) => Claim::Refused(Refusal(refused)),
    };
    Ok((claim, along))
}
