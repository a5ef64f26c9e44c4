//! Outputs are not claimed: when an output's write meets another run's newer value, `run` plans again from the records and applies the outputs alone.

use std::collections::BTreeSet;

use super::command::ApplySplit;
use super::summary::list;
use super::terraform::{PlanDir, Signals};
use super::{Attempt, Ctx, RunError};
use crate::engine::plan_stamp::{ChangeSet, PlanStamp};

/// How to plan and apply the outputs again.
pub struct Reconcile {
    /// The flags of the plan (after `plan -out=FILE`): `-refresh=false` and the variables.
    pub plan: Vec<String>,
    /// The flags of the apply (after `apply`, before FILE).
    pub apply: Vec<String>,
    /// Extra environment for the plan (a saved plan's variables).
    pub env: Vec<(String, String)>,
}

impl Reconcile {
    /// For `apply FILE`: the plan's own variable values (as `TF_VAR_`), and the flags given to the apply.
    pub fn for_saved_plan(split: &ApplySplit, plan_json: &serde_json::Value) -> Reconcile {
        let mut env = Vec::new();
        for (name, v) in plan_json["variables"].as_object().into_iter().flatten() {
            let value = match &v["value"] {
                serde_json::Value::Null => continue,
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            env.push((format!("TF_VAR_{name}"), value));
        }
        // The variables given to `apply FILE` are ephemeral ones (terraform refuses the others there).
        let vars: Vec<String> = split
            .plan
            .iter()
            .filter(|a| a.starts_with("-var=") || a.starts_with("-var-file="))
            .cloned()
            .collect();
        let mut plan = vec!["-refresh=false".to_string()];
        plan.extend(split.apply.iter().cloned());
        plan.extend(vars.iter().cloned());
        let mut apply = split.apply.clone();
        apply.extend(vars);
        Reconcile { plan, apply, env }
    }
}

/// Say that `stale` outputs were not brought up to date, and why.
pub fn say_stale(stale: &BTreeSet<String>, why: &str) {
    eprintln!(
        "choudoufu-live: warning: output(s) {} are stale: another run wrote a newer value after this run read them, and nothing of it was overwritten, so the stored value may not reflect this run's changes. They were not reconciled: {why}. Apply again (`choudoufu-live run -- terraform apply`) to bring them up to date.",
        list(stale)
    );
}

/// Plan again with `-refresh=false` from the records as they are now; apply it when it changes outputs only.
pub async fn reconcile(
    ctx: &mut Ctx,
    mut stale: BTreeSet<String>,
    how: &Reconcile,
    signals: &mut Signals,
) -> Result<(), RunError> {
    let dir = PlanDir::new()?;
    let plan = dir.file("outputs.tfplan");
    for _ in 0..3 {
        eprintln!(
            "choudoufu-live: output(s) {} met another run's newer value (nothing was overwritten); planning again with -refresh=false from the records as they are now, to bring the outputs up to date",
            list(&stale)
        );
        let _ = std::fs::remove_file(&plan);
        let mut attempt = Attempt::start(ctx).await?;
        let mut args = vec!["plan".to_string(), format!("-out={}", plan.display())];
        args.extend(how.plan.iter().cloned());
        let mut env: Vec<(&str, &str)> = vec![("TF_IN_AUTOMATION", "1")];
        env.extend(how.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let server = attempt.serve(ctx).await?;
        let status = ctx.tf.run(&args, server, &env, signals).await?;
        if !status.success() {
            attempt.stop().await;
            say_stale(&stale, "the plan that reconciles them failed");
            return Ok(());
        }
        let json = ctx.tf.show_json(&plan).await?;
        let set = ChangeSet::from_plan_json(&json)?;
        if !set.resources.is_empty() {
            attempt.stop().await;
            let names: Vec<&str> = set.resources.iter().map(|c| c.address.as_str()).collect();
            say_stale(
                &stale,
                &format!(
                    "planning again would change resources too ({}), which needs an apply of its own",
                    names.join(", ")
                ),
            );
            return Ok(());
        }
        if set.outputs.is_empty() {
            attempt.stop().await;
            eprintln!(
                "choudoufu-live: the stored outputs already match every resource that landed"
            );
            return Ok(());
        }
        let session = attempt.session();
        let Some(served) = session.served().await else {
            attempt.stop().await;
            say_stale(&stale, "the plan read no state");
            return Ok(());
        };
        let bytes = std::fs::read(&plan).map_err(|source| RunError::File {
            what: format!("cannot read the plan {}", plan.display()),
            source,
        })?;
        let stamp = PlanStamp::new(
            &ctx.layout,
            &ctx.store_name,
            &bytes,
            served,
            session.base().await,
        );
        session.refresh().await?;
        let Ok(pin) = stamp.check(&set.keys(&ctx.layout), &session.snapshot().await) else {
            stale = set.outputs.clone();
            attempt.stop().await;
            continue;
        };
        session.pin(pin).await;
        session.reconcile_outputs().await;
        let mut args = vec!["apply".to_string()];
        args.extend(how.apply.iter().cloned());
        args.push(plan.display().to_string());
        let server = attempt.serve(ctx).await?;
        let status = ctx.tf.run(&args, server, &[], signals).await?;
        let again = attempt.session().stale_outputs().await;
        attempt.stop().await;
        if !status.success() {
            say_stale(&stale, "the apply that reconciles them failed");
            return Ok(());
        }
        if again.is_empty() {
            eprintln!(
                "choudoufu-live: reconciled output(s) {} from the records as they are now; no provider was called",
                list(&set.outputs)
            );
            return Ok(());
        }
        stale = again;
    }
    say_stale(&stale, "other runs kept writing them");
    Ok(())
}
