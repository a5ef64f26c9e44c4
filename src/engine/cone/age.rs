//! When each record was last refreshed from the cloud: its writer's time, the last time a provider's answer was written into it.

use serde::Deserialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::engine::record::RecordKind;
use crate::engine::session::Snapshot;

/// When each record was last refreshed from the cloud (Unix seconds), by instance address.
pub type LastRefresh = std::collections::BTreeMap<String, i64>;

/// The writer stamp of a record in final form, as far as its time.
#[derive(Deserialize)]
struct Stamped<'a> {
    #[serde(borrow)]
    writer: WrittenAt<'a>,
}

#[derive(Deserialize)]
struct WrittenAt<'a> {
    #[serde(borrow)]
    written_at: std::borrow::Cow<'a, str>,
}

/// Unix seconds of an RFC 3339 time (none: not one).
fn unix(text: &str) -> Option<i64> {
    OffsetDateTime::parse(text, &Rfc3339)
        .ok()
        .map(OffsetDateTime::unix_timestamp)
}

/// The last refresh of every resource record of `snapshot` whose time can be read, by instance address.
///
/// A record is written when a provider's answer changed it (an apply's return, or a refresh
/// that found the object moved), and, unchanged, when a cone plan's apply refreshed it
/// ([`crate::engine::session::Session::note_refreshed`]). A record whose time cannot be read
/// is left out, and a cone refreshes it.
pub fn last_refresh(snapshot: &Snapshot) -> LastRefresh {
    let mut out = LastRefresh::new();
    for entry in snapshot.records.values() {
        if entry.kind() != RecordKind::Resource {
            continue;
        }
        let at = match entry.image_bytes() {
            Some(bytes) => serde_json::from_slice::<Stamped>(bytes)
                .ok()
                .and_then(|s| unix(&s.writer.written_at)),
            None => entry.record().ok().and_then(|r| unix(&r.writer.written_at)),
        };
        if let Some(at) = at {
            out.insert(entry.address().to_string(), at);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_unix_seconds() {
        assert_eq!(unix("1970-01-01T00:01:00Z"), Some(60));
        assert_eq!(unix("2026-12-06T21:00:00.123456789Z"), Some(1_796_590_800));
        assert_eq!(unix("yesterday"), None);
        let stamped: Stamped = serde_json::from_str(
            r#"{"format":"x","writer":{"run_id":"r","written_at":"1970-01-01T00:00:02Z"},"instance":{}}"#,
        )
        .unwrap();
        assert_eq!(unix(&stamped.writer.written_at), Some(2));
    }
}
