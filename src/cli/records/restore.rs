//! `records restore`: an older version of one record put back as its new current version
//! (the write is [`crate::engine::write::restore`]'s), with what it replaces and what the next
//! plan should show.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;
use thiserror::Error;

use super::estate::Estate;
use super::out::outln;
use super::versions::{program_of, show_time, shown_version};
use crate::cli::error::CliError;
use crate::engine::record::{Record, RecordKind};
use crate::engine::session::SessionError;
use crate::engine::write::restore::{self, Restored};
use crate::run::EXIT_CONFLICT;
use crate::store::versions::parse_time;
use crate::store::{self, History, Version, VersionKind};

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
    let restored = restore::restore(
        &estate.store,
        &estate.layout,
        &key,
        address,
        &old,
        wanted,
        current.map(|(_, v)| v),
    )
    .await
    .map_err(SessionError::from)?;
    match restored {
        Restored::Written { version, run_id } => outln!(
            "restored {address} to the content of version {wanted}: its current version is now {} (written by restore run {run_id}). No other record was touched.",
            version
                .version_id
                .as_deref()
                .unwrap_or(&version.to_string()),
        ),
        Restored::Conflict(c) => {
            let show = |v: Option<&Version>| v.map_or("no record".to_string(), Version::to_string);
            eprintln!(
                "choudoufu-live: {}",
                RestoreConflict {
                    address: address.to_string(),
                    expected: show(c.expected.as_ref()),
                    found: show(c.stored.as_ref()),
                    wanted: wanted.to_string(),
                }
            );
            return Ok(EXIT_CONFLICT);
        }
    }
    Ok(0)
}
