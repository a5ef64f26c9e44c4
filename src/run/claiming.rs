//! The claim step: claim a plan's changes before terraform applies them, or wait (`--wait`) for the runs in the way.

use std::time::{Duration, Instant};

use super::claims::{self, Claim, Hold, Refusal, Runner};
use super::context::{Attempt, Ctx};
use super::error::{EXIT_IN_FLIGHT, RunError};
use super::say;
use crate::cloud::aws::markers::AwsLister;
use crate::engine::claims::Alongside;
use crate::engine::markers::Family;
use crate::engine::plan::ChangeSet;
use crate::telemetry::{self, ConflictKind};

/// What the claim step came to.
pub enum Claimed {
    /// Every change is this run's now (or there was nothing to claim).
    Held(Hold),
    /// The claims in the way were released while this run waited: plan (or claim) again.
    Released,
    /// Refused: the exit status to end the run with (the refusal is printed).
    Refused(i32),
}

/// How long `--wait` may still wait: the whole budget from the run's first refused claim, shared by every attempt after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitBudget {
    /// No `--wait`: a refused claim ends the run.
    None,
    /// `--wait=DURATION`, and no claim was refused yet: the clock has not started.
    Unstarted(Duration),
    /// The first refusal came: waiting ends at this instant.
    Until(Instant),
}

impl WaitBudget {
    /// The budget of `--wait` (none without it).
    pub fn new(wait: Option<Duration>) -> WaitBudget {
        match wait {
            // The cut: the clock starts with the run, as `--wait` once counted.
            Some(w) if crate::cut::cut(crate::cut::Mechanism::WaitFromRefusal) => {
                WaitBudget::Until(Instant::now() + w)
            }
            Some(w) => WaitBudget::Unstarted(w),
            None => WaitBudget::None,
        }
    }

    /// A claim was refused at `now`: when waiting ends (the clock starts at the first refusal), or `None` without `--wait`.
    pub fn refused_at(&mut self, now: Instant) -> Option<Instant> {
        match *self {
            WaitBudget::None => None,
            WaitBudget::Unstarted(w) => {
                let until = now + w;
                *self = WaitBudget::Until(until);
                Some(until)
            }
            WaitBudget::Until(until) => Some(until),
        }
    }
}

/// Claim `set`'s changes for `attempt`; with `--wait`, wait out what is left of `budget` for the claims in the way; `along` as [`claims::claim_set`] takes it.
pub async fn claim<F: Future>(
    ctx: &mut Ctx,
    attempt: &Attempt,
    set: &ChangeSet,
    budget: &mut WaitBudget,
    along: Alongside<F>,
) -> Result<(Claimed, Option<F::Output>), RunError> {
    let run = Runner {
        run_id: &ctx.run_id,
        program: &ctx.program,
    };
    let (claimed, along) = claims::claim_set(
        &mut ctx.heartbeat,
        &ctx.store,
        &ctx.layout,
        run,
        attempt.session(),
        set,
        along,
    )
    .await?;
    let refused = match claimed {
        Claim::Held(hold) => {
            report_takeovers(ctx, &hold).await;
            return Ok((Claimed::Held(hold), along));
        }
        Claim::Refused(refused) => refused,
    };
    telemetry::metrics().conflicts(ConflictKind::InFlight, 1);
    let Some(deadline) = budget.refused_at(Instant::now()) else {
        say::in_flight(&refused);
        return Ok((Claimed::Refused(EXIT_IN_FLIGHT), None));
    };
    Ok((wait_released(ctx, refused, deadline).await?, None))
}

/// Poll, with backoff, until the claims in the way are gone or `deadline` passes (a signal ends the wait).
async fn wait_released(
    ctx: &Ctx,
    refused: Refusal,
    deadline: Instant,
) -> Result<Claimed, RunError> {
    let mut delay = Duration::from_millis(250);
    let mut told = String::new();
    loop {
        let Some(who) = refused.still_held(&ctx.store, &ctx.layout).await? else {
            say::released();
            return Ok(Claimed::Released);
        };
        let now = Instant::now();
        if now >= deadline {
            say::waited_out(&refused, ctx.wait.unwrap_or_default(), &who);
            return Ok(Claimed::Refused(EXIT_IN_FLIGHT));
        }
        if who != told {
            say::waiting(refused.name(), deadline - now, &who);
            told = who;
        }
        let jitter = Duration::from_millis(rand::random_range(0..200));
        let sleep = (delay + jitter).min(deadline - now);
        tokio::select! {
            _ = tokio::time::sleep(sleep) => {}
            _ = ctx.signals.stop() => {
                say::interrupted_waiting();
                return Ok(Claimed::Refused(1));
            }
        }
        delay = (delay * 2).min(Duration::from_secs(2));
    }
}

/// Say which gone runs' claims this run took over, and what it means; list their marked objects when markers are configured.
async fn report_takeovers(ctx: &Ctx, hold: &Hold) {
    let messages = hold.takeover_messages();
    if messages.is_empty() {
        return;
    }
    for message in messages {
        say::took_over(message);
    }
    let Some(listing) = &ctx.config.markers else {
        return;
    };
    let lister = match AwsLister::from_json(&listing.provider_json()).await {
        Ok(l) => l,
        Err(e) => {
            say::no_takeover_listing(e);
            return;
        }
    };
    let estate = &ctx.config.estate;
    for (address, ty) in hold.taken_over() {
        let Some(ty) = ty else {
            continue;
        };
        if Family::of("", &ty) != Some(Family::Aws) {
            continue;
        }
        match lister.with_markers(estate.as_str(), &ty, &address).await {
            Ok(objects) if objects.is_empty() => say::no_marked_object(&address, estate),
            Ok(objects) => {
                for o in objects {
                    say::marked_object(&o.arn, &address, estate);
                }
            }
            Err(e) => say::marker_listing_failed(&address, e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_counts_from_the_first_refusal_and_is_shared_after_it() {
        let start = Instant::now();
        let mut budget = WaitBudget::new(Some(Duration::from_secs(180)));
        // The plan took 20 s before the first refusal: the whole 3m is still left.
        let first = start + Duration::from_secs(20);
        assert_eq!(
            budget.refused_at(first),
            Some(first + Duration::from_secs(180))
        );
        // Released, planned again and refused again: the same end, not a fresh 3m.
        assert_eq!(
            budget.refused_at(first + Duration::from_secs(100)),
            Some(first + Duration::from_secs(180))
        );
        assert_eq!(WaitBudget::new(None).refused_at(first), None);
    }
}
