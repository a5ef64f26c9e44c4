//! What `run` tells after terraform: the records written and refused, unrecorded marked objects, and plan stamps.

use std::collections::BTreeSet;
use std::path::Path;

use super::bind;
use super::command::PlanKind;
use super::context::Ctx;
use super::error::{EXIT_UNWRITTEN, RunError};
use super::flush::Flushed;
use super::liveness::{Liveness, marked_type};
use super::remark::{self, Holders};
use super::say::{self, Carried};
use super::steps;
use super::tally::RunSummary;
use super::terraform::Stdout;
use crate::cloud::aws::markers::{AwsLister, LiveObject};
use crate::config::LiveConfig;
use crate::cut::{Mechanism, cut};
use crate::engine::markers::Family;
use crate::engine::markers::unrecorded::{Recorded, RecordedResource};
use crate::engine::session::RecordConflictError;
use crate::frontdoor::http::Backend;
use crate::frontdoor::provider::probe::Found;

/// Fold what the flush after terraform wrote into the run's summary.
fn merge(s: &mut RunSummary, flushed: &Flushed) {
    let Flushed::Landed(report) = flushed else {
        return;
    };
    s.writes += 1;
    s.created.extend(report.created.iter().cloned());
    s.updated.extend(report.updated.iter().cloned());
    s.updated.extend(report.already.iter().cloned());
    s.deleted.extend(report.deleted.iter().cloned());
    s.deleted.extend(report.already_gone.iter().cloned());
    s.unchanged = report.unchanged_of.iter().cloned().collect();
    s.skipped.extend(report.skipped.iter().cloned());
    for c in &report.conflicts {
        s.conflicts.insert(c.address.clone(), c.clone());
    }
}

/// The exit status when the state terraform could not save was not written.
pub fn unwritten_exit(flushed: &Flushed) -> Option<i32> {
    matches!(flushed, Flushed::Recovery(_) | Flushed::Lost).then_some(EXIT_UNWRITTEN)
}

/// Print one line of what was written (with what the flush after terraform wrote), and every named conflict and error; the summary with the flush folded in.
pub fn print(config: &LiveConfig, s: RunSummary, flushed: &Flushed) -> RunSummary {
    let s = told(s, flushed);
    let carried = match flushed {
        Flushed::Nothing => Carried::Nothing,
        Flushed::Landed(_) => Carried::Landed,
        Flushed::Recovery(path) => Carried::Recovery(path),
        Flushed::Lost => Carried::Lost,
    };
    let conflict = RecordConflictError {
        landed: s.created.len() + s.updated.len() + s.deleted.len(),
        conflicts: s.conflicts.values().cloned().collect(),
    };
    say::summary(&config.estate, &s, carried, &conflict);
    s
}

/// The summary with the flush folded in, each record told once: one this run created (at a provider's return, or in an earlier save) and then completed, as created; one it wrote before the last write, not also as unchanged by it.
fn told(mut s: RunSummary, flushed: &Flushed) -> RunSummary {
    merge(&mut s, flushed);
    let created = s.created.clone();
    s.updated.retain(|a| !created.contains(a));
    let written: BTreeSet<String> = s.created.union(&s.updated).cloned().collect();
    s.unchanged.retain(|a| !written.contains(a));
    s
}

/// How terraform's output of a planned apply of `kind` reaches the user: a destroy's through [`destroy_words`].
pub fn terraform_stdout(kind: PlanKind) -> Stdout {
    match kind {
        PlanKind::Destroy if !cut(Mechanism::DestroyWords) => Stdout::Rewritten(destroy_words),
        PlanKind::Destroy | PlanKind::Apply | PlanKind::RefreshOnly => Stdout::Inherit,
    }
}

/// terraform's closing line of a destroy as `terraform destroy` words it (`Destroy complete! Resources: N destroyed.`).
///
/// `run` applies a destroy as `terraform apply FILE`, whose closing line is `Apply complete!
/// Resources: 0 added, 0 changed, N destroyed.`; in `-json` the `change_summary` message and
/// its `operation` (`apply`) are put in `destroy`'s words too. Any other line is left alone.
pub fn destroy_words(line: &str) -> Option<String> {
    const APPLIED: &str = "Apply complete! Resources: 0 added, 0 changed, ";
    const DESTROYED: &str = " destroyed.";
    let start = line.find(APPLIED)?;
    let after = &line[start + APPLIED.len()..];
    let digits = after.chars().take_while(char::is_ascii_digit).count();
    let rest = after[digits..].strip_prefix(DESTROYED)?;
    if digits == 0 {
        return None;
    }
    let n = &after[..digits];
    let mut out = format!(
        "{}Destroy complete! Resources: {n} destroyed.{rest}",
        &line[..start]
    );
    if out.contains(r#""type":"change_summary""#) {
        out = out.replace(r#""operation":"apply""#, r#""operation":"destroy""#);
    }
    Some(out)
}

/// Stamp the saved plan `file` with the record versions the plan read.
pub async fn stamp_plan(ctx: &Ctx, backend: &Backend, file: &Path) -> Result<(), RunError> {
    let Some(mut stamp) = steps::stamp(ctx, backend.session(), file).await? else {
        say::unstamped();
        return Ok(());
    };
    // Its apply lists the markers of its creates where this plan's provider configurations point.
    stamp.marker_listings = ctx.tf.door().map(bind::stamped_configs).unwrap_or_default();
    let path = stamp.save(file).map_err(|source| RunError::File {
        what: format!("cannot write the plan stamp beside {}", file.display()),
        source,
    })?;
    say::stamped(stamp.records.len(), &path);
    Ok(())
}

/// After commands that plan, warn about marked live objects no record names: listed where the `markers "aws"` block says, else with each AWS configuration the provider door saw.
pub async fn warn_unrecorded_after(ctx: &Ctx, backend: &Backend) {
    if !matches!(
        ctx.cmd.sub(),
        Some("plan" | "apply" | "refresh" | "destroy" | "import")
    ) {
        return;
    }
    let door = ctx.tf.door().filter(|d| d.marking().is_some());
    // The provider is asked whether an unrecorded object is going away only with a configuration the door saw.
    let (providers, mut liveness): (Vec<serde_json::Value>, Option<Liveness>) =
        match &ctx.config.markers {
            Some(listing) => (vec![listing.provider_json()], None),
            None => (
                door.map(bind::listing_configs).unwrap_or_default(),
                door.map(Liveness::new),
            ),
        };
    if providers.is_empty() {
        return;
    }
    // The estate is read once, whatever the number of configurations listed.
    let session = backend.session();
    if let Err(e) = session.refresh().await {
        say::no_records_for_markers(e);
        return;
    }
    let snapshot = session.snapshot().await;
    let holders = Holders::of(&snapshot);
    let resources: Vec<_> = snapshot
        .records
        .values()
        .filter_map(|entry| Some((entry.address(), entry.resource()?)))
        .collect();
    let recorded = Recorded::of(
        Family::Aws,
        resources.iter().map(|(address, r)| RecordedResource {
            address,
            provider: &r.provider,
            type_name: &r.type_name,
        }),
    );
    let types = recorded.types();
    for provider in &providers {
        keep_markers_right(
            &ctx.config,
            provider,
            &holders,
            &recorded,
            &types,
            liveness.as_mut(),
        )
        .await;
    }
}

/// Put right each marker of this estate that names another address than the record holding its object, and warn, without deleting, about marked live objects no record holds (not those the provider reads as gone or being deleted, when it can be asked).
async fn keep_markers_right(
    config: &LiveConfig,
    provider: &serde_json::Value,
    holders: &Holders,
    recorded: &Recorded,
    types: &[String],
    mut liveness: Option<&mut Liveness<'_>>,
) {
    let lister = match AwsLister::from_json(provider).await {
        Ok(l) => l,
        Err(e) => {
            say::no_marker_listing(e);
            return;
        }
    };
    let listed = match lister.list_marked(config.estate.as_str(), types).await {
        Ok(listed) => listed,
        Err(e) => {
            say::listing_failed(e);
            return;
        }
    };
    remark::put_right(&lister, holders, &listed).await;
    let unheld = |o: &&LiveObject| holders.holder(o).is_none() && recorded.unrecorded(o.address());
    for o in listed.iter().filter(unheld) {
        if let (Some(asked), Some(type_name)) = (liveness.as_deref_mut(), marked_type(o))
            && asked.ask(provider, &type_name, o).await == Some(Found::Gone)
        {
            continue;
        }
        say::unrecorded(&o.arn, &config.estate, o.address().unwrap_or("?"));
    }
}

#[cfg(test)]
mod tests {
    use super::{Flushed, RunSummary, destroy_words, told};
    use crate::engine::session::WriteReport;

    fn names(of: &[&str]) -> std::collections::BTreeSet<String> {
        of.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn a_record_this_run_wrote_is_told_once() {
        // a and b were created at their provider's return, c by terraform's first save; the
        // last save found a, b and c as it had them, and d, which an earlier run wrote.
        let s = RunSummary {
            writes: 1,
            created: names(&["a", "b", "c"]),
            updated: names(&["c"]),
            unchanged: names(&["a", "b", "c", "d"]),
            ..RunSummary::default()
        };
        let s = told(s, &Flushed::Nothing);
        assert_eq!(s.created, names(&["a", "b", "c"]));
        assert!(s.updated.is_empty());
        assert_eq!(s.unchanged, names(&["d"]));
        // The flush after terraform counts the same way.
        let report = WriteReport {
            created: vec!["e".into()],
            unchanged: 2,
            unchanged_of: vec!["a".into(), "f".into()],
            ..WriteReport::default()
        };
        let s = told(
            RunSummary {
                created: names(&["a"]),
                ..RunSummary::default()
            },
            &Flushed::Landed(Box::new(report)),
        );
        assert_eq!(s.created, names(&["a", "e"]));
        assert_eq!(s.unchanged, names(&["f"]));
    }

    #[test]
    fn a_destroy_ends_in_destroys_words() {
        assert_eq!(
            destroy_words("Apply complete! Resources: 0 added, 0 changed, 5 destroyed.\n")
                .as_deref(),
            Some("Destroy complete! Resources: 5 destroyed.\n")
        );
        assert_eq!(
            destroy_words("\u{1b}[0m\u{1b}[1m\u{1b}[32mApply complete! Resources: 0 added, 0 changed, 12 destroyed.\u{1b}[0m\n").as_deref(),
            Some("\u{1b}[0m\u{1b}[1m\u{1b}[32mDestroy complete! Resources: 12 destroyed.\u{1b}[0m\n")
        );
        let json = r#"{"@level":"info","@message":"Apply complete! Resources: 0 added, 0 changed, 3 destroyed.","@module":"terraform.ui","changes":{"add":0,"change":0,"import":0,"remove":3,"operation":"apply"},"type":"change_summary"}"#;
        assert_eq!(
            destroy_words(json).as_deref(),
            Some(
                r#"{"@level":"info","@message":"Destroy complete! Resources: 3 destroyed.","@module":"terraform.ui","changes":{"add":0,"change":0,"import":0,"remove":3,"operation":"destroy"},"type":"change_summary"}"#
            )
        );
        for other in [
            "Apply complete! Resources: 1 added, 0 changed, 5 destroyed.",
            "Apply complete! Resources: 0 added, 0 changed, destroyed.",
            "terraform_data.a: Destruction complete after 0s",
        ] {
            assert_eq!(destroy_words(other), None, "{other}");
        }
    }
}
