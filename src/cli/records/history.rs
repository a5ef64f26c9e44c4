//! `records history`, `records restore` and `records log`: the estate's past, from the store's object versions.

use std::collections::BTreeSet;
use std::path::Path;

use futures::{StreamExt, stream};
use serde_json::Value;
use thiserror::Error;
use time::OffsetDateTime;

use super::address::shown_address;
use super::estate::Estate;
use super::out::{outln, table};
use crate::cli::error::CliError;
use crate::cut::{Mechanism, cut};
use crate::engine::layout::KeyKind;
use crate::engine::log_writer::LogWriter;
use crate::engine::program::now_rfc3339;
use crate::engine::record::{Record, RecordKind, Writer};
use crate::engine::session::{RunInfo, SessionError};
use crate::engine::write_log::LogOp;
use crate::run::EXIT_CONFLICT;
use crate::store::key;
use crate::store::versions::parse_time;
use crate::store::{
    self, History, ObjectVersion, Precondition, Stored, Version, VersionKind, WriteOutcome,
};

/// How many versions are read at once.
const PARALLEL_READS: usize = 32;

/// A restore met a record another run wrote after the restore read it; nothing was written.
#[derive(Debug, Error)]
#[error(
    "Record store write conflict (RecordConflictError): {address} changed after this restore read it: expected version {expected}, store has {found}.\nNothing was overwritten: the store keeps the other write. `choudoufu-live records history {address}` shows it; restore again if you still want version {wanted}."
)]
pub struct RestoreConflict {
    /// The record's address.
    pub address: String,
    /// The version the restore read as current.
    pub expected: String,
    /// The version the store holds now.
    pub found: String,
    /// The version the restore was putting back.
    pub wanted: String,
}

/// What one stored version turned out to hold.
#[derive(Debug)]
enum Seen {
    /// A record, decoded.
    Record(Box<Record>),
    /// A delete: no content.
    Deleted,
    /// Bytes that are not a record of this estate and key, or a version the store no longer gives.
    Unreadable(String),
}

/// One stored version of a key, with what it holds.
#[derive(Debug)]
struct Past {
    version: ObjectVersion,
    seen: Seen,
}

/// What a write was, as the log and history name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Create,
    Update,
    Restore,
    Delete,
    /// A store without history: the record's last write, of unknown kind.
    LastWrite,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Create => "create",
            Op::Update => "update",
            Op::Restore => "restore",
            Op::Delete => "delete",
            Op::LastWrite => "write",
        }
    }
}

/// What a version was, given the version before it (older) on the same key.
fn op_of(seen: &Seen, older: Option<&ObjectVersion>, history: &History) -> Op {
    if matches!(history, History::CurrentOnly(_)) {
        return Op::LastWrite;
    }
    match seen {
        Seen::Deleted => Op::Delete,
        Seen::Record(r) if r.writer.restored_from.is_some() => Op::Restore,
        _ => match older.map(|v| &v.kind) {
            Some(VersionKind::Content { .. }) => Op::Update,
            _ => Op::Create,
        },
    }
}

/// A version as the tables show it: its version id where the store gives one, else its token.
fn shown_version(v: &Version) -> String {
    v.version_id.clone().unwrap_or_else(|| v.to_string())
}

/// A time as the tables show it: UTC, to the second.
fn show_time(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// When a version was written: its writer's own stamp, else the store's time.
fn written(past: &Past) -> Option<OffsetDateTime> {
    match &past.seen {
        Seen::Record(r) => parse_time(&r.writer.written_at).or(past.version.modified),
        _ => past.version.modified,
    }
}

/// Read what each version holds, `PARALLEL_READS` at a time, in the order given.
async fn read_all(estate: &Estate, versions: Vec<ObjectVersion>) -> Vec<Past> {
    let reads = versions.into_iter().map(|version| async move {
        let seen = match (&version.kind, &version.version_id) {
            (VersionKind::Deleted, _) => Seen::Deleted,
            (VersionKind::Content { .. }, Some(id)) => seen_of(
                estate,
                &version.key,
                estate.store.get_version(&version.key, id).await,
            ),
            // A store without version ids: the current record is the one there is.
            (VersionKind::Content { .. }, None) => {
                seen_of(estate, &version.key, estate.store.get(&version.key).await)
            }
        };
        Past { version, seen }
    });
    stream::iter(reads)
        .buffered(PARALLEL_READS)
        .collect::<Vec<_>>()
        .await
}

fn seen_of(estate: &Estate, key: &str, read: Result<Option<Stored>, store::StoreError>) -> Seen {
    match read {
        Ok(Some(stored)) => match Record::decode(key, &stored.bytes, &estate.layout) {
            Ok(r) => Seen::Record(Box::new(r)),
            Err(e) => Seen::Unreadable(e.reason),
        },
        Ok(None) => Seen::Unreadable("the store no longer gives this version".into()),
        Err(e) => Seen::Unreadable(e.to_string()),
    }
}

/// A record's program stamp as the tables show it (`-` when it has none).
fn program_of(r: &Record) -> String {
    Some(r.program.short())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "-".into())
}

/// The writer's columns of a version: run id, program stamp, terraform version.
fn writer_cells(seen: &Seen) -> [String; 3] {
    match seen {
        Seen::Record(r) => [
            r.writer.run_id.clone(),
            program_of(r),
            r.writer
                .terraform_version
                .clone()
                .unwrap_or_else(|| "-".into()),
        ],
        Seen::Deleted => ["-".into(), "-".into(), "-".into()],
        Seen::Unreadable(why) => [format!("(unreadable: {why})"), "-".into(), "-".into()],
    }
}

/// `records history ADDRESS`.
pub async fn history(root: &Path, address: &str) -> Result<i32, CliError> {
    let estate = Estate::open(root).await?;
    let key = estate.key_of(address);
    let listing = estate.store.list_versions(&key).await?;
    let versions: Vec<ObjectVersion> = listing.of_key(&key).cloned().collect();
    if versions.is_empty() {
        eprintln!(
            "Error: no record and no stored version of {address} in estate {} ({}); `choudoufu-live records ls` lists the records",
            estate.layout.estate(),
            estate.store.describe()
        );
        return Ok(1);
    }
    let pasts = read_all(&estate, versions).await;
    outln!(
        "history of {address} in estate {} ({}), newest first:",
        estate.layout.estate(),
        estate.store.describe()
    );
    let rows: Vec<Vec<String>> = pasts
        .iter()
        .enumerate()
        .map(|(i, past)| {
            let older = pasts.get(i + 1).map(|p| &p.version);
            let op = op_of(&past.seen, older, &listing.history);
            let [run, program, tf] = writer_cells(&past.seen);
            vec![
                past.version
                    .version_id
                    .clone()
                    .unwrap_or_else(|| "(current)".into()),
                written(past).map_or("-".into(), show_time),
                op.name().to_string(),
                run,
                program,
                tf,
                match past.version.kind {
                    VersionKind::Content { size } => size.to_string(),
                    VersionKind::Deleted => "-".into(),
                },
                if past.version.latest {
                    "current".into()
                } else {
                    String::new()
                },
            ]
        })
        .collect();
    table(
        &[
            "VERSION",
            "WRITTEN",
            "OP",
            "RUN",
            "PROGRAM",
            "TERRAFORM",
            "SIZE",
            "",
        ],
        &rows,
    )?;
    if let History::CurrentOnly(why) = &listing.history {
        outln!("only the current version is shown: {why}");
    }
    Ok(0)
}

/// A JSON value as a line shows it: compact, cut short.
fn brief(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() > 80 {
        format!("{}...", text.chars().take(77).collect::<String>())
    } else {
        text
    }
}

/// The top-level attributes a resource instance marks sensitive.
fn sensitive_names(instance: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for path in instance
        .get("sensitive_attributes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let first = match path {
            Value::Array(steps) => steps.first(),
            step => Some(step),
        };
        if let Some(name) = first.and_then(|s| s.get("value")).and_then(Value::as_str) {
            out.insert(name.to_string());
        }
    }
    out
}

/// One line per attribute (or instance field) that differs, values masked where sensitive.
fn differences(current: Option<&Record>, restored: &Record) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(out) = restored.output() {
        let now = current.and_then(Record::output);
        let sensitive = out.get("sensitive") == Some(&Value::Bool(true))
            || now.and_then(|o| o.get("sensitive")) == Some(&Value::Bool(true));
        if now.map(|o| o.get("value")) != Some(out.get("value")) {
            let show = |v: Option<&Value>| match v {
                _ if sensitive => "(sensitive value)".to_string(),
                Some(v) => brief(v),
                None => "(none)".into(),
            };
            lines.push(format!(
                "~ value: {} -> {}",
                show(now.and_then(|o| o.get("value"))),
                show(out.get("value"))
            ));
        }
        return lines;
    }
    let empty = Value::Null;
    let old = restored.instance().unwrap_or(&empty);
    if current.is_none() {
        let sensitive = sensitive_names(old);
        for (name, value) in old
            .get("attributes")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let shown = if sensitive.contains(name) {
                "(sensitive value)".to_string()
            } else {
                brief(value)
            };
            lines.push(format!("+ attributes.{name}: {shown}"));
        }
        return lines;
    }
    let now = current.and_then(Record::instance).unwrap_or(&empty);
    let mut sensitive = sensitive_names(old);
    sensitive.extend(sensitive_names(now));
    let attrs = |v: &Value| v.get("attributes").and_then(Value::as_object).cloned();
    let (a_now, a_old) = (
        attrs(now).unwrap_or_default(),
        attrs(old).unwrap_or_default(),
    );
    let names: BTreeSet<&String> = a_now.keys().chain(a_old.keys()).collect();
    for name in names {
        let (before, after) = (a_now.get(name), a_old.get(name));
        if before == after {
            continue;
        }
        let show = |v: Option<&Value>| match v {
            _ if sensitive.contains(name.as_str()) => "(sensitive value)".to_string(),
            Some(v) => brief(v),
            None => "(none)".into(),
        };
        lines.push(format!(
            "~ attributes.{name}: {} -> {}",
            show(before),
            show(after)
        ));
    }
    let fields: BTreeSet<&String> = now
        .as_object()
        .into_iter()
        .chain(old.as_object())
        .flat_map(|o| o.keys())
        .filter(|k| k.as_str() != "attributes")
        .collect();
    for field in fields {
        if now.get(field) != old.get(field) {
            lines.push(format!("~ {field}: changed"));
        }
    }
    if current.and_then(Record::resource) != restored.resource() && current.is_some() {
        lines.push("~ resource (type, provider or mode): changed".into());
    }
    lines
}

fn id_of(record: &Record) -> Option<&Value> {
    record.instance()?.get("attributes")?.get("id")
}

/// What the next plan should be expected to show after the restore.
fn expectation(current: Option<&Record>, restored: &Record) -> String {
    if restored.kind() == RecordKind::Output {
        return "The next plan and apply compute the output again from the configuration; the restored value is served until then.".into();
    }
    let refresh = "The next plan refreshes the restored record against the real object. Where the provider reads the object back (most resources), the record takes the object's real attributes again and the plan shows what your configuration changes; where it does not (e.g. terraform_data, whose values live only in state), the plan shows the changes from the restored values to your configuration. Review the plan before applying.";
    match (current, id_of(restored)) {
        (None, _) => format!(
            "The record is deleted now: the restore creates it again, and terraform tracks the object again. If that object was destroyed, the next plan creates it. {refresh}"
        ),
        (Some(cur), Some(old_id)) if id_of(cur).is_some_and(|id| id != old_id) => format!(
            "The restored version names another object (id {}; the record now names id {}). If {} no longer exists, the next plan creates it again; the object {} is then tracked by no record (destroy it, or import it under another address). {refresh}",
            brief(old_id),
            id_of(cur).map(brief).unwrap_or_default(),
            brief(old_id),
            id_of(cur).map(brief).unwrap_or_default(),
        ),
        _ => refresh.to_string(),
    }
}

fn describe_version(version: &str, r: &Record) -> String {
    format!(
        "version {version} (written {} by run {}, program {}, terraform {})",
        parse_time(&r.writer.written_at).map_or_else(|| r.writer.written_at.clone(), show_time),
        r.writer.run_id,
        program_of(r),
        r.writer.terraform_version.as_deref().unwrap_or("-")
    )
}

/// `records restore ADDRESS --version V [--dry-run]`.
pub async fn restore(
    root: &Path,
    address: &str,
    wanted: &str,
    dry_run: bool,
) -> Result<i32, CliError> {
    let estate = Estate::open(root).await?;
    let key = estate.key_of(address);
    let listing = estate.store.list_versions(&key).await?;
    if let History::CurrentOnly(why) = &listing.history {
        eprintln!("Error: {address} cannot be restored: {why}. Nothing was written.");
        return Ok(1);
    }
    let Some(version) = listing
        .of_key(&key)
        .find(|v| v.version_id.as_deref() == Some(wanted))
    else {
        eprintln!(
            "Error: {address} has no stored version {wanted}; `choudoufu-live records history {address}` lists its versions. Nothing was written."
        );
        return Ok(1);
    };
    if version.kind == VersionKind::Deleted {
        eprintln!(
            "Error: version {wanted} of {address} is a delete: it holds no content to put back; pick a version that does (`records history {address}`). Nothing was written."
        );
        return Ok(1);
    }
    let Some(old) = estate.store.get_version(&key, wanted).await? else {
        eprintln!(
            "Error: the store no longer gives version {wanted} of {address} (expired or removed). Nothing was written."
        );
        return Ok(1);
    };
    let old = Record::decode(&key, &old.bytes, &estate.layout)?;
    let current = match estate.store.get(&key).await? {
        Some(stored) => {
            let record = Record::decode(&key, &stored.bytes, &estate.layout)?;
            Some((record, stored.version))
        }
        None => None,
    };
    outln!(
        "restore {address} in estate {} ({}) to {}",
        estate.layout.estate(),
        estate.store.describe(),
        describe_version(wanted, &old)
    );
    match &current {
        Some((cur, v)) => {
            if cur.content_digest() == old.content_digest() {
                outln!(
                    "{address} already holds the content of version {wanted} (current version {}). Nothing was written.",
                    shown_version(v)
                );
                return Ok(0);
            }
            outln!(
                "replacing the current {}",
                describe_version(&shown_version(v), cur)
            );
        }
        None => outln!("replacing nothing: the record is deleted now"),
    }
    for line in differences(current.as_ref().map(|(r, _)| r), &old) {
        outln!("  {line}");
    }
    outln!("{}", expectation(current.as_ref().map(|(r, _)| r), &old));
    if dry_run {
        outln!("dry run: nothing was written.");
        return Ok(0);
    }
    if let Some(guard) = store::guard_for(&estate.config.store) {
        guard.check().await?;
    }
    let run = RunInfo::new(old.program.clone());
    let restored = Record {
        estate: estate.layout.estate().to_string(),
        item: old.item.clone(),
        program: old.program.clone(),
        writer: Writer {
            run_id: run.run_id.clone(),
            written_at: now_rfc3339(),
            terraform_version: old.writer.terraform_version.clone(),
            restored_from: Some(wanted.to_string()),
            log: None,
        },
    };
    let log = LogWriter::new(estate.store.clone(), estate.layout.clone(), &run.run_id);
    let mut restored = restored;
    let mut precondition = match &current {
        Some((_, v)) => Precondition::Matches(v.clone()),
        None => Precondition::Absent,
    };
    let mut tries = 0;
    let written: Version = loop {
        let op = match precondition {
            Precondition::Absent => LogOp::Create,
            Precondition::Matches(_) => LogOp::Update,
        };
        let entry = log
            .before_write(op, &key)
            .await
            .map_err(SessionError::from)?;
        restored.writer.log = Some(entry.name());
        let bytes = restored.encode();
        match store::put_conditional(estate.store.as_ref(), &key, &bytes, &precondition).await? {
            WriteOutcome::Written(v) => break v,
            // Cut: a blind restore, tried again on whatever is there now (last writer wins).
            WriteOutcome::Conflict(_) if cut(Mechanism::RestoreCondition) && tries < 10 => {
                tries += 1;
                precondition = match estate.store.get(&key).await? {
                    Some(s) => Precondition::Matches(s.version),
                    None => Precondition::Absent,
                };
            }
            WriteOutcome::Conflict(c) => {
                let show =
                    |v: Option<&Version>| v.map_or("no record".to_string(), Version::to_string);
                eprintln!(
                    "choudoufu-live: {}",
                    RestoreConflict {
                        address: address.to_string(),
                        expected: show(c.expected.as_ref()),
                        found: show(c.found.as_ref()),
                        wanted: wanted.to_string(),
                    }
                );
                return Ok(EXIT_CONFLICT);
            }
        }
    };
    outln!(
        "restored {address} to the content of version {wanted}: its current version is now {} (written by restore run {}). No other record was touched.",
        written
            .version_id
            .as_deref()
            .unwrap_or(&written.to_string()),
        run.run_id
    );
    Ok(0)
}

/// The start of the window `--since` names: a duration before `now`, or an RFC 3339 time.
fn since_time(since: &str, now: OffsetDateTime) -> Result<OffsetDateTime, String> {
    if let Some(t) = parse_time(since) {
        return Ok(t);
    }
    let bad = || {
        format!(
            "--since {since:?}: give a duration like 90s, 30m, 2h, 1d or 1h30m, or an RFC 3339 time like 2026-12-01T14:00:00Z"
        )
    };
    let mut total: i64 = 0;
    let mut digits = String::new();
    for c in since.trim().chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let n: i64 = digits.parse().map_err(|_| bad())?;
        digits.clear();
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            'w' => 604_800,
            _ => return Err(bad()),
        };
        total = n
            .checked_mul(unit)
            .and_then(|s| total.checked_add(s))
            .ok_or_else(bad)?;
    }
    if !digits.is_empty() || total == 0 {
        return Err(bad());
    }
    now.checked_sub(time::Duration::seconds(total))
        .ok_or_else(bad)
}

/// Whether `text` matches `pattern`: `*` any characters (none too), `?` one character.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(c) if *c == '?' || *c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// The address a state key names, when its segment is not a digest.
fn address_of_key(estate: &Estate, key: &str) -> Option<String> {
    let kind = match estate.layout.classify(key)? {
        KeyKind::Resource => RecordKind::Resource,
        KeyKind::Output => RecordKind::Output,
        _ => return None,
    };
    let segment = key.rsplit('/').next()?;
    key::unescape(segment).map(|name| shown_address(kind, &name))
}

/// `records log [--since D] [--address PATTERN]`.
pub async fn log(root: &Path, since: Option<&str>, pattern: Option<&str>) -> Result<i32, CliError> {
    let from = since
        .map(|s| since_time(s, OffsetDateTime::now_utc()))
        .transpose()?;
    let estate = Estate::open(root).await?;
    let listing = estate.store.list_versions(&estate.layout.prefix()).await?;
    // The state keys only (not _estate, marks, runs, provider records), each newest first.
    let mut keys: Vec<(String, Vec<ObjectVersion>)> = Vec::new();
    for v in &listing.versions {
        if !matches!(
            estate.layout.classify(&v.key),
            Some(KeyKind::Resource | KeyKind::Output)
        ) {
            continue;
        }
        match keys.last_mut() {
            Some((k, vs)) if *k == v.key => vs.push(v.clone()),
            _ => keys.push((v.key.clone(), vec![v.clone()])),
        }
    }
    // What to read: the versions in the window, of the addresses asked for.
    let mut wanted = Vec::new();
    let mut unnamed = Vec::new();
    for (key, versions) in &keys {
        let address = address_of_key(&estate, key);
        if let (Some(p), Some(a)) = (pattern, &address)
            && !glob(p, a)
        {
            continue;
        }
        for (i, v) in versions.iter().enumerate() {
            let in_window = match (from, v.modified) {
                (Some(from), Some(at)) => at >= from,
                _ => true,
            };
            if in_window {
                wanted.push((address.clone(), versions.get(i + 1).cloned(), v.clone()));
            }
        }
        if address.is_none() {
            // A digest key: its newest content version names the address.
            if let Some(v) = versions
                .iter()
                .find(|v| matches!(v.kind, VersionKind::Content { .. }))
            {
                unnamed.push((key.clone(), v.clone()));
            }
        }
    }
    let named: std::collections::BTreeMap<String, String> =
        read_all(&estate, unnamed.iter().map(|(_, v)| v.clone()).collect())
            .await
            .into_iter()
            .filter_map(|p| match p.seen {
                Seen::Record(r) => {
                    Some((p.version.key.clone(), shown_address(r.kind(), r.address())))
                }
                _ => None,
            })
            .collect();
    let olders: Vec<(Option<String>, Option<ObjectVersion>)> = wanted
        .iter()
        .map(|(a, o, _)| (a.clone(), o.clone()))
        .collect();
    let pasts = read_all(&estate, wanted.into_iter().map(|(_, _, v)| v).collect()).await;
    let mut events = Vec::new();
    for (seq, (past, (address, older))) in pasts.into_iter().zip(olders).enumerate() {
        let address = match (&past.seen, address) {
            (Seen::Record(r), _) => shown_address(r.kind(), r.address()),
            (_, Some(a)) => a,
            (_, None) => named
                .get(&past.version.key)
                .cloned()
                .unwrap_or_else(|| past.version.key.clone()),
        };
        if let Some(p) = pattern
            && !glob(p, &address)
        {
            continue;
        }
        let at = written(&past).or(older.as_ref().and_then(|o| o.modified));
        if let (Some(from), Some(at)) = (from, at)
            && at < from
        {
            continue;
        }
        let op = op_of(&past.seen, older.as_ref(), &listing.history);
        events.push((
            at,
            past.version.key.clone(),
            std::cmp::Reverse(seq),
            address,
            op,
            past,
        ));
    }
    // Within one key the store's order is the truth (a delete's store time may be whole
    // seconds, a write's own stamp is finer): no write of a key is shown before an older one.
    events.sort_by(|a, b| (&a.1, a.2).cmp(&(&b.1, b.2)));
    for i in 1..events.len() {
        if events[i].1 == events[i - 1].1 && events[i].0 < events[i - 1].0 {
            events[i].0 = events[i - 1].0;
        }
    }
    // Then time order across keys.
    events.sort_by(|a, b| (a.0, &a.1, a.2).cmp(&(b.0, &b.1, b.2)));
    outln!(
        "writes to estate {} ({}){}{}, oldest first:",
        estate.layout.estate(),
        estate.store.describe(),
        since.map(|s| format!(" since {s}")).unwrap_or_default(),
        pattern
            .map(|p| format!(" for addresses matching {p}"))
            .unwrap_or_default(),
    );
    let rows: Vec<Vec<String>> = events
        .iter()
        .map(|(at, _, _, address, op, past)| {
            let [run, program, _] = writer_cells(&past.seen);
            vec![
                at.map_or("-".into(), show_time),
                op.name().to_string(),
                address.clone(),
                run,
                program,
                past.version
                    .version_id
                    .clone()
                    .unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    table(
        &["TIME", "OP", "ADDRESS", "RUN", "PROGRAM", "VERSION"],
        &rows,
    )?;
    if let History::CurrentOnly(why) = &listing.history {
        outln!("only each record's last write is shown: {why}");
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_durations_and_times() {
        let now = parse_time("2026-12-01T14:00:00Z").unwrap();
        assert_eq!(
            since_time("1h30m", now).unwrap(),
            parse_time("2026-12-01T12:30:00Z").unwrap()
        );
        assert_eq!(
            since_time("2d", now).unwrap(),
            parse_time("2026-11-29T14:00:00Z").unwrap()
        );
        assert_eq!(
            since_time("2026-12-01T13:00:00Z", now).unwrap(),
            parse_time("2026-12-01T13:00:00Z").unwrap()
        );
        for bad in ["", "h", "10", "5y", "-3h", "99999999999999999999s"] {
            assert!(since_time(bad, now).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn globs_match_addresses() {
        assert!(glob("module.net.*", "module.net.aws_vpc.main"));
        assert!(glob("*", ""));
        assert!(glob("terraform_data.?b", "terraform_data.db"));
        assert!(glob("*[\"k*", "x.y[\"key\"]"));
        assert!(!glob("module.net.*", "module.network"));
        assert!(!glob("output.*", "terraform_data.out"));
        assert!(glob("a*b*c", "aXbYbZc"));
    }
}
