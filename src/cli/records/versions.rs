//! What the store's object versions of a record hold: read, decoded, and shown as the
//! `records history`, `restore` and `log` tables show them.

use futures::{StreamExt, stream};
use time::OffsetDateTime;

use super::estate::Estate;
use crate::engine::operation::Operation;
use crate::engine::record::Record;
use crate::store::versions::parse_time;
use crate::store::{self, History, ObjectVersion, Stored, Version, VersionKind};

/// How many versions are read at once.
const PARALLEL_READS: usize = 32;

/// What one stored version turned out to hold.
#[derive(Debug)]
pub(super) enum Seen {
    /// A record, decoded.
    Record(Box<Record>),
    /// A delete: no content.
    Deleted,
    /// Bytes that are not a record of this estate and key, or a version the store no longer gives.
    Unreadable(String),
}

/// One stored version of a key, with what it holds.
#[derive(Debug)]
pub(super) struct Past {
    /// The version.
    pub(super) version: ObjectVersion,
    /// What it holds.
    pub(super) seen: Seen,
}

/// What a write was, as the log and history name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Change {
    /// A record write: create, update or delete.
    Write(Operation),
    /// A record put back by `records restore`.
    Restore,
    /// A store without history: the record's last write, of unknown kind.
    LastWrite,
}

impl Change {
    /// The word the tables show.
    pub(super) fn name(self) -> &'static str {
        match self {
            Change::Write(op) => op.as_str(),
            Change::Restore => "restore",
            Change::LastWrite => "write",
        }
    }
}

/// What a version was, given the version before it (older) on the same key.
pub(super) fn change_of(seen: &Seen, older: Option<&ObjectVersion>, history: &History) -> Change {
    if matches!(history, History::CurrentOnly(_)) {
        return Change::LastWrite;
    }
    match seen {
        Seen::Deleted => Change::Write(Operation::Delete),
        Seen::Record(r) if r.writer.restored_from.is_some() => Change::Restore,
        _ => match older.map(|v| &v.kind) {
            Some(VersionKind::Content { .. }) => Change::Write(Operation::Update),
            _ => Change::Write(Operation::Create),
        },
    }
}

/// A version as the tables show it: its version id where the store gives one, else its token.
pub(super) fn shown_version(v: &Version) -> String {
    v.version_id.clone().unwrap_or_else(|| v.to_string())
}

/// A time as the tables show it: UTC, to the second.
pub(super) fn show_time(t: OffsetDateTime) -> String {
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
pub(super) fn written(past: &Past) -> Option<OffsetDateTime> {
    match &past.seen {
        Seen::Record(r) => parse_time(&r.writer.written_at).or(past.version.modified),
        _ => past.version.modified,
    }
}

/// Read what each version holds, `PARALLEL_READS` at a time, in the order given.
pub(super) async fn read_all(estate: &Estate, versions: Vec<ObjectVersion>) -> Vec<Past> {
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

/// What one read of a version holds.
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
pub(super) fn program_of(r: &Record) -> String {
    Some(r.program.short())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "-".into())
}

/// The writer's columns of a version: run id, program stamp, terraform version.
pub(super) fn writer_cells(seen: &Seen) -> [String; 3] {
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
