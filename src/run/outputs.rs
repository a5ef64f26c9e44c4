//! Outputs are not claimed: when an output's write meets another run's newer value, `run` plans again from the records and applies the outputs alone.

use std::collections::BTreeSet;
use std::path::Path;

use super::command::ApplySplit;
use super::context::{Attempt, Ctx};
use super::error::RunError;
use super::say;
use super::steps::{self, Applied, Plan};
use super::terraform::PlanDir;
use crate::engine::plan::Plan as Shown;

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
    pub fn for_saved_plan(split: &ApplySplit, plan: &Shown) -> Reconcile {
        let mut env = Vec::new();
        for (name, value) in plan.variable_values() {
            let value = match value {
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

/// What one attempt at reconciling came to.
enum Reconciled {
    /// Done: reconciled, or left stale (and said why).
    Done,
    /// Other runs moved these outputs again: plan again.
    Again(BTreeSet<String>),
}

/// Plan again with `-refresh=false` from the records as they are now; apply it when it changes outputs only.
pub async fn reconcile(
    ctx: &mut Ctx,
    mut stale: BTreeSet<String>,
    how: &Reconcile,
) -> Result<(), RunError> {
    let dir = PlanDir::new()?;
    let plan = dir.file("outputs.tfplan");
    for _ in 0..3 {
        say::reconciling(&stale);
        let _ = std::fs::remove_file(&plan);
        let mut attempt = Attempt::start(ctx).await?;
        let step = reconcile_once(ctx, &mut attempt, &plan, how, &stale).await;
        attempt.end().await;
        match step? {
            Reconciled::Done => return Ok(()),
            Reconciled::Again(again) => stale = again,
        }
    }
    say::stale(&stale, "other runs kept writing them");
    Ok(())
}

/// One attempt: plan the outputs again, and apply the plan when it changes outputs only and none of them moved.
async fn reconcile_once(
    ctx: &Ctx,
    attempt: &mut Attempt,
    plan: &Path,
    how: &Reconcile,
    stale: &BTreeSet<String>,
) -> Result<Reconciled, RunError> {
    let mut args = vec!["plan".to_string(), format!("-out={}", plan.display())];
    args.extend(how.plan.iter().cloned());
    let mut env: Vec<(&str, &str)> = vec![("TF_IN_AUTOMATION", "1")];
    env.extend(how.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let set = match steps::plan(ctx, attempt, &args, &env, plan).await? {
        Plan::Failed(_) => {
            say::stale(stale, "the plan that reconciles them failed");
            return Ok(Reconciled::Done);
        }
        Plan::Made { set, .. } => set,
    };
    if !set.resources.is_empty() {
        let names: Vec<&str> = set.resources.iter().map(|c| c.address.as_str()).collect();
        say::stale(stale, &say::would_change_resources(&names));
        return Ok(Reconciled::Done);
    }
    if set.outputs.is_empty() {
        say::outputs_match();
        return Ok(Reconciled::Done);
    }
    let Some(stamp) = steps::stamp(ctx, attempt.session(), plan).await? else {
        say::stale(stale, "the plan read no state");
        return Ok(Reconciled::Done);
    };
    let mut args = vec!["apply".to_string()];
    args.extend(how.apply.iter().cloned());
    args.push(plan.display().to_string());
    let status =
        match steps::apply_pinned(ctx, attempt, &stamp, &set.keys(&ctx.layout), &args).await? {
            Applied::Ran(status) => status,
            Applied::Moved(_) => return Ok(Reconciled::Again(set.outputs.clone())),
        };
    let again = attempt.session().stale_outputs().await;
    if !status.success() {
        say::stale(stale, "the apply that reconciles them failed");
        return Ok(Reconciled::Done);
    }
    if again.is_empty() {
        say::reconciled(&set.outputs);
        return Ok(Reconciled::Done);
    }
    Ok(Reconciled::Again(again))
}
