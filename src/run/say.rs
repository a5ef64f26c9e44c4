//! Everything `run` says to the user: its lines on stderr, the approval on stdout, and the wording of its refusals and summaries.
//!
//! Tests and scripts read these lines: change a word only on purpose.

use std::collections::BTreeSet;
use std::fmt::Display;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use super::command::PlanKind;
use super::tally::RunSummary;
use crate::frontdoor::NO_LOCK;

/// Print one line on stderr, after the program's name.
fn line(text: impl Display) {
    whole(format!("choudoufu-live: {text}\n"));
}

/// Print one warning on stderr.
fn warning(text: impl Display) {
    whole(format!("choudoufu-live: warning: {text}\n"));
}

/// Write `text` to stderr in one write, so no reader (a terminal shared with terraform, a CI log, a test reading it as it comes) ever sees a line half written: stderr is unbuffered, and `eprintln!` writes each piece of its format on its own.
fn whole(text: String) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// A duration to the second, as humans write it.
fn seconds(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

/// Up to eight names, then `...`.
pub fn list(names: &BTreeSet<String>) -> String {
    const SHOWN: usize = 8;
    let mut out: Vec<&str> = names.iter().take(SHOWN).map(String::as_str).collect();
    if names.len() > SHOWN {
        out.push("...");
    }
    out.join(", ")
}

/// Each distinct error once, with how often it came.
fn distinct(errors: &[String]) -> Vec<String> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for e in errors {
        match out.iter_mut().find(|(seen, _)| seen == e) {
            Some((_, n)) => *n += 1,
            None => out.push((e.clone(), 1)),
        }
    }
    out.into_iter()
        .map(|(e, n)| if n > 1 { format!("{e} ({n} times)") } else { e })
        .collect()
}

// The run as a whole.

/// `force-unlock`: there is no lock, so nothing to unlock (on stdout, as terraform answers).
pub fn nothing_to_unlock() {
    println!("{NO_LOCK}");
    println!(
        "Nothing was changed. A run that ends, or is interrupted, releases its claims. A run killed with SIGKILL (or whose machine died) leaves them standing for up to three heartbeats after its last one ({} with the default --heartbeat={}); then the next run that needs them takes them over. `choudoufu-live records claims` shows who holds what now.",
        seconds(super::args::DEFAULT_RUN_HEARTBEAT * crate::engine::claims::MISSED_BEATS),
        seconds(super::args::DEFAULT_RUN_HEARTBEAT),
    );
}

/// This run's record could not be removed when it ended.
pub fn run_record_left(e: impl Display) {
    warning(format_args!(
        "could not remove this run's record (it counts as gone after three missed heartbeats): {e}"
    ));
}

// The planned apply.

/// A saved plan (or a plan whose changes kept moving) is refused.
pub fn plan_refused(e: impl Display) {
    line(e);
}

/// The plan's own changes moved before the claim: planning again.
pub fn replanning(moved: &[&str]) {
    line(format_args!(
        "another run changed {} after this plan read it; nothing was applied. Planning again from the records as they are now.",
        moved.join(", ")
    ));
}

/// A saved plan whose apply stopped is resumed: what that apply made.
pub fn resuming(done: &BTreeSet<String>) {
    line(format_args!(
        "an earlier apply of this plan stopped after making {} of its changes ({}); planning the rest again to resume it under its approval",
        done.len(),
        list(done)
    ));
}

/// A resumed saved plan has nothing left to apply.
pub fn resumed_nothing_left() {
    line("every change of this plan is applied; nothing is left to resume");
}

// Claims.

/// This run's claims could not be released.
pub fn claims_not_released(e: impl Display) {
    warning(format_args!(
        "could not release this run's claims ({e}); they are taken over once its heartbeat stops"
    ));
}

/// Another live run holds one of the changes, and the run does not wait.
pub fn in_flight(refused: impl Display) {
    line(refused);
    line(
        "to wait for it instead of stopping, run with --wait=DURATION (e.g. `choudoufu-live run --wait=10m -- terraform apply`).",
    );
}

/// Who holds which of the addresses in the way: `RUNS to release ADDRESSES`.
pub fn holders<'a>(in_the_way: impl IntoIterator<Item = (&'a str, String)>) -> String {
    let mut runs = BTreeSet::new();
    let mut addresses = BTreeSet::new();
    for (address, holder) in in_the_way {
        runs.insert(holder);
        addresses.insert(address);
    }
    format!(
        "{} to release {}",
        runs.into_iter().collect::<Vec<_>>().join(", "),
        addresses.into_iter().collect::<Vec<_>>().join(", ")
    )
}

/// The claims in the way were released while the run waited.
pub fn released() {
    line("the claims in the way were released; planning again from the records as they are now");
}

/// The wait ran out with the claims still held.
pub fn waited_out(refused: impl Display, waited: Duration, holders: &str) {
    line(refused);
    line(format_args!(
        "waited {} (--wait); {holders} still hold them.",
        seconds(waited)
    ));
}

/// Waiting for other runs' claims (said when who is in the way changes).
pub fn waiting(what: &str, left: Duration, holders: &str) {
    line(format_args!(
        "{what}: waiting up to {} for {holders}",
        seconds(left)
    ));
}

/// A signal came while the run waited for claims.
pub fn interrupted_waiting() {
    line("interrupted while waiting; nothing was applied and this run holds no claim");
}

/// One claim of a gone run that this run took over.
pub fn took_over(message: impl Display) {
    warning(message);
}

/// The taken-over objects' markers cannot be listed.
pub fn no_takeover_listing(e: impl Display) {
    warning(format_args!(
        "no listing of the taken-over objects' markers: {e}"
    ));
}

/// No live object carries a taken-over change's markers.
pub fn no_marked_object(address: &str, estate: impl Display) {
    line(format_args!(
        "no live object carries the markers of {address} (estate {estate})"
    ));
}

/// A live object carries a taken-over change's markers.
pub fn marked_object(arn: &str, address: &str, estate: impl Display) {
    line(format_args!(
        "marked object {arn} carries the markers of {address} (estate {estate}): the gone run may have made it"
    ));
}

/// A planned create's markers are on one live object: it is imported instead of created.
pub fn binding(address: &str, arn: &str, id: &str) {
    line(format_args!(
        "bound {address} to the live object {arn} that carries its markers (imported as {id}): the plan updates it instead of creating another"
    ));
}

/// A marked object whose record holds it under another address: not bound, its marker put right, the create goes ahead.
pub fn held_elsewhere(address: &str, arn: &str, holder: &str) {
    warning(format_args!(
        "{arn} carries the markers of {address}, but the record of {holder} holds it: it was not bound to {address} (its marker is put right to {holder}), and {address} is created"
    ));
}

/// One live object carries the markers of two planned creates: bound to neither.
pub fn marked_twice(arn: &str, addresses: &[&str]) {
    warning(format_args!(
        "{arn} was found for {}: it is bound to none of them, and they are created",
        addresses.join(" and ")
    ));
}

/// A bound object is tainted: its create never returned, so it may be incomplete.
pub fn bound_tainted(address: &str) {
    line(format_args!(
        "{address} is bound as tainted: the run that created it stopped before its create returned, so it may be incomplete; the plan replaces it, as terraform replaces a create that failed midway"
    ));
}

/// A marker put right to the address whose record holds its object.
pub fn remarked(arn: &str, was: &str, address: &str) {
    line(format_args!(
        "re-marked {arn}: its tofu-address named {was}, and the record of {address} holds it"
    ));
}

/// A marker that could not be put right.
pub fn remark_failed(arn: &str, was: &str, address: &str, e: impl Display) {
    warning(format_args!(
        "{arn}'s tofu-address names {was}, but the record of {address} holds it, and its marker could not be put right ({e}); a later run binds nothing to it while that record holds it"
    ));
}

/// The import that binds a marked object failed.
pub fn bind_failed(address: &str) {
    line(format_args!(
        "could not import the marked object of {address} (terraform said why above); nothing was created"
    ));
}

/// The taint of a bound object failed.
pub fn taint_failed(address: &str) {
    line(format_args!(
        "bound {address}, but could not taint it (terraform said why above): its create never returned, so it may be incomplete; run terraform taint {address} before the next apply. Nothing was created"
    ));
}

/// A marked object whose import ID is not known: nothing is created.
pub fn cannot_bind(address: &str, arn: &str, why: &str) {
    line(format_args!(
        "MarkedObjectNotBound: {arn} carries the markers of {address}, but it could not be imported ({why}); import it by hand (terraform import {address} ID) or remove it. Nothing was created"
    ));
}

/// A marked object the provider reads as gone or going away (being deleted by the cloud): never bound, the create goes ahead.
pub fn going_away(address: &str, arn: &str) {
    line(format_args!(
        "{arn} carries the markers of {address}, but the provider reads it as gone or being deleted: it is not bound, and {address} is created"
    ));
}

/// The provider door could not start a probe to ask the provider about marked objects.
pub fn no_probe(e: crate::frontdoor::provider::probe::ProbeError) {
    warning(format_args!(
        "the provider could not be asked whether the marked objects found are live ({e}); they are taken as live, with the import ID their ARN gives"
    ));
}

/// Two or more live objects carry one create's markers.
pub fn collision(e: &crate::cloud::aws::markers::CollisionError) {
    line(e);
}

/// A provider configuration points at custom endpoints but none for the Tagging API: its markers are not listed.
pub fn no_tagging_endpoint(provider: &str) {
    warning(format_args!(
        "{provider}: its configuration sets custom endpoints but none for resourcegroupstaggingapi, so no live markers were listed with it (add endpoints {{ resourcegroupstaggingapi = ... }} to have them listed)"
    ));
}

/// No provider configuration was seen to list markers with.
pub fn no_collision_check(creates: usize) {
    warning(format_args!(
        "no AWS provider configuration reached the provider door, so the markers of {creates} planned create(s) were not listed before creating them"
    ));
}

/// A saved plan's stamp keeps no provider configuration to list markers with.
pub fn no_stamped_listing(creates: usize) {
    warning(format_args!(
        "the saved plan's stamp keeps no AWS provider configuration (it was made with the provider door off, with markers off, or by an older choudoufu-live), so the markers of its {creates} planned create(s) were not listed before applying it"
    ));
}

/// Listing a taken-over change's markers failed.
pub fn marker_listing_failed(address: &str, e: impl Display) {
    warning(format_args!("listing the markers of {address} failed: {e}"));
}

// Outputs.

/// Outputs were left stale, and why.
pub fn stale(stale: &BTreeSet<String>, why: &str) {
    warning(format_args!(
        "output(s) {} are stale: another run wrote a newer value after this run read them, and nothing of it was overwritten, so the stored value may not reflect this run's changes. They were not reconciled: {why}. Apply again (`choudoufu-live run -- terraform apply`) to bring them up to date.",
        list(stale)
    ));
}

/// Outputs met newer values: planning again to reconcile them.
pub fn reconciling(stale: &BTreeSet<String>) {
    line(format_args!(
        "output(s) {} met another run's newer value (nothing was overwritten); planning again with -refresh=false from the records as they are now, to bring the outputs up to date",
        list(stale)
    ));
}

/// Why a reconcile stops: planning again would change resources.
pub fn would_change_resources(resources: &[&str]) -> String {
    format!(
        "planning again would change resources too ({}), which needs an apply of its own",
        resources.join(", ")
    )
}

/// The reconciling plan changes nothing.
pub fn outputs_match() {
    line("the stored outputs already match every resource that landed");
}

/// The outputs were reconciled.
pub fn reconciled(outputs: &BTreeSet<String>) {
    line(format_args!(
        "reconciled output(s) {} from the records as they are now; no provider was called",
        list(outputs)
    ));
}

// Plan stamps.

/// A saved plan read no state through the run: it has no stamp.
pub fn unstamped() {
    line(
        "the plan read no state through this run, so it has no stamp; applying it will be refused",
    );
}

/// A saved plan was stamped.
pub fn stamped(records: usize, path: &Path) {
    line(format_args!(
        "stamped the plan with the {records} record version(s) it read: {}",
        path.display()
    ));
}

// What the run wrote.

/// What became of the state terraform could not save, as the summary tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Carried<'a> {
    /// Nothing was left to write.
    Nothing,
    /// Written after terraform exited.
    Landed,
    /// In this recovery file.
    Recovery(&'a Path),
    /// Only in terraform's errored.tfstate.
    Lost,
}

/// Each distinct error the state server answered terraform with, once: terraform's own words ("giving up after 3 attempt(s)") never say why.
pub fn state_errors(errors: &[String]) {
    for e in distinct(errors) {
        line(format_args!("error: {e}"));
    }
}

/// One line of what was written, and every named conflict and error.
pub fn summary(estate: impl Display, s: &RunSummary, carried: Carried<'_>, conflict: impl Display) {
    if let Some(l) = s.refusal_line() {
        eprintln!("{l}");
    }
    if s.writes == 0 && s.conflicts.is_empty() && s.errors.is_empty() {
        return;
    }
    let mut parts = Vec::new();
    for (n, what, names) in [
        (s.created.len(), "created", &s.created),
        (s.updated.len(), "updated", &s.updated),
        (s.deleted.len(), "deleted", &s.deleted),
    ] {
        if n > 0 {
            parts.push(format!("{n} {what} ({})", list(names)));
        }
    }
    parts.push(format!("{} unchanged", s.unchanged.len()));
    if !s.skipped.is_empty() {
        parts.push(format!(
            "{} skipped: not changed by this run's plan, and another run moved them or is changing them ({})",
            s.skipped.len(),
            list(&s.skipped)
        ));
    }
    let carried_to = match carried {
        Carried::Landed => Some("was written after terraform exited"),
        Carried::Recovery(_) => Some("is in the recovery file named above"),
        Carried::Lost => Some("is only in terraform's errored.tfstate"),
        Carried::Nothing => None,
    };
    match (carried_to, s.errors.last()) {
        (Some(carried), Some(last)) => line(format_args!(
            "while terraform ran, {} of its state write(s) failed (the last: {last}); the state they carried {carried}",
            s.errors.len()
        )),
        _ => {
            for e in distinct(&s.errors) {
                line(format_args!("error: {e}"));
            }
        }
    }
    if s.writes > 0 || !s.conflicts.is_empty() {
        line(format_args!(
            "estate {estate}: records {}",
            parts.join(", ")
        ));
    }
    if let Carried::Recovery(path) = carried {
        line(format_args!(
            "the rest of this run's state is not in the store yet: it is in {} (exit status 6)",
            path.display()
        ));
    }
    if !s.conflicts.is_empty() {
        line(conflict);
        line(
            "if terraform wrote errored.tfstate, do not `state push` it: it holds this run's view from before the other run's write, and pushing it would replace that write. Re-plan instead.",
        );
    }
}

/// The records could not be read to look for unrecorded marked objects.
pub fn no_records_for_markers(e: impl Display) {
    warning(format_args!(
        "could not read the records to look for unrecorded marked objects: {e}"
    ));
}

/// Marked objects cannot be listed.
pub fn no_marker_listing(e: impl Display) {
    warning(format_args!("no listing of marked objects: {e}"));
}

/// A live object carries the estate's marker but no record names it.
pub fn unrecorded(arn: &str, estate: impl Display, address: &str) {
    warning(format_args!(
        "unrecorded marked object {arn}: it carries estate {estate}'s marker (tofu-address={address}) but no record names it; it was not deleted"
    ));
}

/// Listing marked objects failed.
pub fn listing_failed(e: impl Display) {
    warning(format_args!("listing marked objects failed: {e}"));
}

// The flush after an outage.

/// terraform's last state write did not reach the store: the run writes it now.
pub fn flushing(last_error: impl Display, timeout: Duration) {
    line(format_args!(
        "terraform's last state write did not reach the record store: {last_error}"
    ));
    line(format_args!(
        "this run kept that state and writes it now, each record conditionally on the version this run read, trying for up to {} (--flush-timeout); a record another run changed meanwhile is refused by name, never overwritten. This run's claims stay in place until then.",
        seconds(timeout)
    ));
}

/// The store answered again and took the state.
pub fn flushed(tries: usize) {
    line(format_args!(
        "the record store answered again: the state terraform could not save was written (try {tries})"
    ));
}

/// A try of the flush failed (said when the store says something new).
pub fn flush_failed(e: impl Display) {
    line(e);
}

/// A failure that trying again would not mend.
pub fn error(e: impl Display) {
    line(format_args!("error: {e}"));
}

/// The flush was stopped by a signal.
pub fn flush_stopped() {
    line("stopped while writing the state terraform could not save; it goes to a recovery file");
}

/// The flush ran out of time.
pub fn flush_timed_out(timeout: Duration, last: impl Display) {
    line(format_args!(
        "the record store did not take the state within {} (--flush-timeout); the last error: {last}",
        seconds(timeout)
    ));
}

/// The countdown line between two tries of the flush.
pub fn countdown(tries: usize, next: Duration, left: Duration) -> String {
    format!(
        "choudoufu-live: the record store did not answer (try {tries}); trying again in {}, {} left before this run writes the state to a recovery file",
        seconds(next),
        seconds(left)
    )
}

/// Show a progress line: kept up to date in place on a terminal, else one line each time.
pub fn progress(text: &str, terminal: bool) {
    if terminal {
        eprint!("\r{text}\x1b[K");
    } else {
        eprintln!("{text}");
    }
}

/// End a progress line kept up to date on a terminal.
pub fn progress_done() {
    eprintln!();
}

/// The unwritten state is in a recovery file: how to write it later.
pub fn recovery_file(path: &Path, root: &Path) {
    line(format_args!(
        "nothing of it is lost: the state terraform could not save, with the record versions this run read, is in the recovery file\n    {}\n  (readable by you only: it holds the records' values, secrets included). When the store answers again, write it with\n    choudoufu-live --root {} records recover {}\n  Each record is written conditionally on the version this run read, so a record another run changed meanwhile is refused by name, never overwritten.",
        path.display(),
        root.display(),
        path.display()
    ));
}

/// Not even a recovery file could be written.
pub fn no_recovery_file(e: impl Display) {
    error(format_args!(
        "the state terraform could not save could not be kept in a recovery file either: {e}"
    ));
}

/// What terraform's errored.tfstate is now: written (remove it) or not (recover from the file).
pub fn errored_state(written: bool) {
    if written {
        line(
            "terraform's errored.tfstate holds the state this run has just written: it is no longer needed. Remove it; do not `terraform state push` it, which would write it again against the records as they are then and could undo another run's changes.",
        );
    } else {
        line(
            "do not `terraform state push errored.tfstate`: that writes terraform's copy against the records as they are then, and could undo another run's changes. Use `records recover` with the file above.",
        );
    }
}

/// terraform's last state write was refused (not for the store's absence, not a conflict) and it wrote errored.tfstate: how to write it once the cause is fixed.
pub fn unsaved_errored(why: &str, errored: &Path, root: &Path) {
    line(format_args!(
        "terraform could not save its last state through this run ({why}); it is in {}, which holds what terraform did. Once the cause is fixed, write it with\n    choudoufu-live --root {} records import {}\n  (conditional creates only: when an address already has a record it refuses, naming them, and writes nothing). Do not `terraform state push` it: that writes it against the records as they are then and could undo another run's changes.",
        errored.display(),
        root.display(),
        errored.display()
    ));
}

// The approval, as terraform words it.

impl PlanKind {
    /// The question, its detail, and the answer to anything but `yes`.
    fn query(self) -> (&'static str, &'static str, &'static str) {
        match self {
            PlanKind::Apply => (
                "Do you want to perform these actions?",
                "Terraform will perform the actions described above.\n  Only 'yes' will be accepted to approve.",
                "Apply cancelled.",
            ),
            PlanKind::Destroy => (
                "Do you really want to destroy all resources?",
                "Terraform will destroy all your managed infrastructure, as shown above.\n  There is no undo. Only 'yes' will be accepted to confirm.",
                "Destroy cancelled.",
            ),
            PlanKind::RefreshOnly => (
                "Would you like to update the Terraform state to reflect these detected changes?",
                "Terraform will write these changes to the state without modifying any real infrastructure.\n  There is no undo. Only 'yes' will be accepted to confirm.",
                "Apply cancelled.",
            ),
        }
    }
}

/// Ask for approval on stdout.
pub fn ask(kind: PlanKind, color: bool) {
    let (query, detail, _) = kind.query();
    let (bold, reset) = if color {
        ("\x1b[1m", "\x1b[0m")
    } else {
        ("", "")
    };
    let mut out = std::io::stdout();
    let _ = write!(
        out,
        "\n{bold}{query}{reset}\n  {detail}\n\n  {bold}Enter a value:{reset} "
    );
    let _ = out.flush();
}

/// What the user answered, told as terraform tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answered<'a> {
    /// `yes`.
    Yes,
    /// Anything else.
    No,
    /// No answer, for this reason.
    Unanswered(&'a str),
}

/// End the approval: a new line, terraform's words for a refusal, or its error for no answer.
pub fn answered(kind: PlanKind, answer: Answered<'_>) {
    let (_, _, cancelled) = kind.query();
    let mut out = std::io::stdout();
    match answer {
        Answered::Yes => {
            let _ = writeln!(out);
        }
        Answered::No => {
            let _ = writeln!(out, "\n{cancelled}");
        }
        Answered::Unanswered(why) => {
            let _ = writeln!(out);
            eprintln!("\nError: error asking for approval: {why}\n");
        }
    }
    let _ = out.flush();
}

/// The provider door is off: what a killed apply then loses.
pub fn provider_door_off() {
    warning(
        "the provider door is off: a killed apply loses the record of whatever terraform created since its last save (terraform saves about every 20 s), and a killed run no longer stops the provider calls its terraform makes",
    );
}

/// A provider plugin died with an apply call in flight.
pub fn provider_crashed(crash: &crate::frontdoor::provider::Crash) {
    let call = match &crash.address {
        Some(address) => format!("while its apply call for {address} was in flight"),
        None => "while an apply call the door could not read was in flight".to_string(),
    };
    warning(format!(
        "the provider plugin {} died ({}) {call}; every call that returned before has its record. That call never returned: if its create reached the cloud, the object carries its live markers and the next apply through `run` binds it instead of creating a second",
        crash.provider, crash.how
    ));
}

/// terraform died of a signal `run` did not send: what the summary below then means (`door`: the provider door was open).
pub fn terraform_killed(program: &str, signal: &str, door: bool) {
    let kept = if door {
        "what it saved before it died, and each resource whose provider call had returned (recorded by the provider door), is recorded"
    } else {
        "only what it saved before it died is recorded"
    };
    warning(format!(
        "{program} was killed ({signal}) before it finished; {kept} (named below, if anything)"
    ));
}
