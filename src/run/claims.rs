//! The claim step: claim a plan's changes before terraform applies them, or wait (`--wait`) for the runs in the way.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::terraform::Signals;
use super::{Ctx, EXIT_IN_FLIGHT, RunError};
use crate::cloud::aws::markers::AwsLister;
use crate::engine::markers::Family;
use crate::engine::pending::{self, ClaimRefused, Claims, Holder, Wanted, resource_of};
use crate::telemetry::{self, ConflictKind};

/// What the claim step came to.
pub enum Claimed {
    /// Every change is this run's now.
    Held(Arc<Claims>),
    /// The claims in the way were released while this run waited: plan (or claim) again.
    Released,
    /// Refused: the exit status to end the run with (the refusal is printed).
    Refused(i32),
}

/// Claim `wanted` for this run; with `--wait`, wait until `deadline` for the claims in the way.
pub async fn claim(
    ctx: &mut Ctx,
    wanted: &[Wanted],
    deadline: Option<Instant>,
    signals: &mut Signals,
) -> Result<Claimed, RunError> {
    let live = ctx.alive();
    let refused = match Claims::claim(&ctx.store, &ctx.layout, &live, wanted).await? {
        Ok(claims) => {
            tracing::info!(
                claims = claims.addresses().len(),
                "claimed this plan's changes"
            );
            report_takeovers(ctx, &claims).await;
            return Ok(Claimed::Held(Arc::new(claims)));
        }
        Err(refused) => refused,
    };
    telemetry::metrics().conflicts(ConflictKind::InFlight, 1);
    let Some(deadline) = deadline else {
        eprintln!("choudoufu-live: {refused}");
        eprintln!(
            "choudoufu-live: to wait for it instead of stopping, run with --wait=DURATION (e.g. `choudoufu-live run --wait=10m -- terraform apply`)."
        );
        return Ok(Claimed::Refused(EXIT_IN_FLIGHT));
    };
    wait_released(ctx, refused, deadline, signals).await
}

fn describe(in_the_way: &[(String, Holder)]) -> String {
    let runs: BTreeSet<String> = in_the_way.iter().map(|(_, h)| h.to_string()).collect();
    let addresses: BTreeSet<&str> = in_the_way.iter().map(|(a, _)| a.as_str()).collect();
    format!(
        "{} to release {}",
        runs.into_iter().collect::<Vec<_>>().join(", "),
        addresses.into_iter().collect::<Vec<_>>().join(", ")
    )
}

/// Poll, with backoff, until the claims in the way are gone or `deadline` passes.
async fn wait_released(
    ctx: &Ctx,
    refused: ClaimRefused,
    deadline: Instant,
    signals: &mut Signals,
) -> Result<Claimed, RunError> {
    let mut delay = Duration::from_millis(250);
    let mut told = String::new();
    loop {
        let in_the_way = pending::still_in_the_way(&ctx.store, &ctx.layout, &refused).await?;
        if in_the_way.is_empty() {
            eprintln!(
                "choudoufu-live: the claims in the way were released; planning again from the records as they are now"
            );
            return Ok(Claimed::Released);
        }
        let now = Instant::now();
        if now >= deadline {
            eprintln!("choudoufu-live: {refused}");
            eprintln!(
                "choudoufu-live: waited {} (--wait); {} still hold them.",
                humantime::format_duration(Duration::from_secs(
                    ctx.wait.map_or(0, |w| w.as_secs())
                )),
                describe(&in_the_way)
            );
            return Ok(Claimed::Refused(EXIT_IN_FLIGHT));
        }
        let who = describe(&in_the_way);
        if who != told {
            let left = Duration::from_secs((deadline - now).as_secs());
            eprintln!(
                "choudoufu-live: {}: waiting up to {} for {who}",
                refused.name(),
                humantime::format_duration(left)
            );
            told = who;
        }
        let jitter = Duration::from_millis(rand::random_range(0..200));
        let sleep = (delay + jitter).min(deadline - now);
        tokio::select! {
            _ = tokio::time::sleep(sleep) => {}
            _ = signals.stop() => {
                eprintln!("choudoufu-live: interrupted while waiting; nothing was applied and this run holds no claim");
                return Ok(Claimed::Refused(1));
            }
        }
        delay = (delay * 2).min(Duration::from_secs(2));
    }
}

/// Say which gone runs' claims this run took over, and what it means; list their marked objects when markers are configured.
async fn report_takeovers(ctx: &Ctx, claims: &Claims) {
    let taken = claims.taken_over();
    if taken.is_empty() {
        return;
    }
    for message in pending::takeover_messages(taken) {
        eprintln!("choudoufu-live: warning: {message}");
    }
    let Some(listing) = &ctx.config.markers else {
        return;
    };
    let lister = match AwsLister::from_json(&listing.provider_json()).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "choudoufu-live: warning: no listing of the taken-over objects' markers: {e}"
            );
            return;
        }
    };
    for t in taken {
        let resource = resource_of(&t.address);
        let mut parts = resource.rsplit('.');
        let (_, Some(ty)) = (parts.next(), parts.next()) else {
            continue;
        };
        if Family::of("", ty) != Some(Family::Aws) {
            continue;
        }
        match lister
            .with_markers(ctx.config.estate.as_str(), ty, &t.address)
            .await
        {
            Ok(objects) if objects.is_empty() => eprintln!(
                "choudoufu-live: no live object carries the markers of {} (estate {})",
                t.address, ctx.config.estate
            ),
            Ok(objects) => {
                for o in objects {
                    eprintln!(
                        "choudoufu-live: marked object {} carries the markers of {} (estate {}): the gone run may have made it",
                        o.arn, t.address, ctx.config.estate
                    );
                }
            }
            Err(e) => eprintln!(
                "choudoufu-live: warning: listing the markers of {} failed: {e}",
                t.address
            ),
        }
    }
}
