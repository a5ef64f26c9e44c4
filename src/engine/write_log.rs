//! The write log (docs/architecture.md, "The write log"): before each record write, one entry
//! under the estate's `wlog/` naming the record and the operation, so a reader lists what
//! changed since the image instead of the whole estate.
//!
//! This file holds the log's values and rules, with no I/O: an entry's name (which alone names
//! the record, newest first), the figures (margin, stall limit, retention), the clock a session
//! reads (the injection point of tests), the skew check against the store's time, the stalled
//! write, the watermark, and what a compaction makes of each entry.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use thiserror::Error;

use crate::engine::digest::sha256_hex;
use crate::engine::layout::{KeyKind, Layout, RecordKey};
use crate::engine::operation::Operation;
use crate::store::StoreTime;
use crate::store::http::REQUEST_TIMEOUT;
use crate::store::retry::DEADLINE;

/// The format tag of an entry's body.
pub const LOG_FORMAT: &str = "choudoufu-live/log/v1";
/// The margin: more than twice the clock skew any writer is allowed.
pub const MARGIN: Duration = Duration::from_secs(120);
/// How long entries are kept.
pub const RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);
/// An entry's time counted down from this, so the newest entry sorts first.
pub const COUNTDOWN: u64 = 9_999_999_999_999_999_999;

/// The log's figures; [`Timing::default`] is the product's, tests shorten them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// More than twice the largest skew allowed (and so the watermark's distance below the compaction).
    pub margin: Duration,
    /// A record write whose entry is older than this when it is about to go out logs again first.
    pub stall: Duration,
    /// How long a record write sent can still land: the retry deadline plus one try.
    pub in_flight: Duration,
    /// How long entries are kept.
    pub retention: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            margin: MARGIN,
            stall: MARGIN / 2,
            in_flight: DEADLINE + REQUEST_TIMEOUT,
            retention: RETENTION,
        }
    }
}

impl Timing {
    /// The largest skew between a writer's clock and the store's that a writer accepts.
    pub fn skew_limit(&self) -> Duration {
        self.margin / 2
    }

    /// How old an entry can be and still have its write land: stall, flight and both skews.
    pub fn pending_lifetime(&self) -> Duration {
        self.stall + self.in_flight + self.margin
    }

    /// How long after its watermark an image's log is trusted: the retention less a seventh
    /// (a day of the product's week), so no entry a reader needs has been deleted.
    pub fn trust(&self) -> Duration {
        self.retention - (self.retention / 7).max(self.margin).min(self.retention)
    }

    /// The watermark of a compaction whose log listing started at `listing_started` (its clock).
    pub fn log_from(&self, listing_started: SystemTime) -> SystemTime {
        listing_started
            .checked_sub(self.margin)
            .unwrap_or(UNIX_EPOCH)
    }

    /// Whether a reader at `now` may read through an image of watermark `log_from`.
    pub fn trusts(&self, log_from: SystemTime, now: SystemTime) -> bool {
        now.duration_since(log_from)
            .map_or(true, |age| age < self.trust())
    }

    /// Whether a record write about to go out at `now` must log again: its entry, made at `entry_at`, is past the stall limit.
    pub fn is_stalled(&self, entry_at: SystemTime, now: SystemTime) -> bool {
        now.duration_since(entry_at)
            .is_ok_and(|age| age > self.stall)
    }
}

/// The clock a session reads its time from.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The time now.
    fn now(&self) -> SystemTime;
}

/// This machine's clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// Which way a clock is off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offset {
    /// Ahead of the true time by this much.
    Ahead(Duration),
    /// Behind it by this much.
    Behind(Duration),
}

/// This machine's clock set off by an [`Offset`]: how tests make a skewed writer.
#[derive(Clone, Copy, Debug)]
pub struct OffsetClock(pub Offset);

impl Clock for OffsetClock {
    fn now(&self) -> SystemTime {
        let now = SystemTime::now();
        match self.0 {
            Offset::Ahead(d) => now + d,
            Offset::Behind(d) => now.checked_sub(d).unwrap_or(UNIX_EPOCH),
        }
    }
}

/// A writer whose clock is further from the store's than the skew limit: it writes nothing.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error(
    "ClockSkewError: this machine's clock is {} {} the clock of {store} (more than the {} a writer may be off, since the write log orders writes by time): nothing was written; set this machine's clock right (NTP) and run again",
    humantime::format_duration(*.skew),
    if *.ahead { "ahead of" } else { "behind" },
    humantime::format_duration(*.limit)
)]
pub struct ClockSkewError {
    /// The store, as it describes itself.
    pub store: String,
    /// How far off this clock may be, at most (whole seconds).
    pub skew: Duration,
    /// Whether this clock is ahead of the store's.
    pub ahead: bool,
    /// The limit.
    pub limit: Duration,
}

/// Check this clock against the store's: `sent` and `answered` are this clock's readings around
/// the answer that told `time`. The true skew lies within the largest distance between the two
/// intervals; more than `limit` is refused.
pub fn check_skew(
    store: &str,
    sent: SystemTime,
    answered: SystemTime,
    time: StoreTime,
    limit: Duration,
) -> Result<Duration, ClockSkewError> {
    // local - store lies in [sent - (at + resolution), answered - at].
    let low = signed(sent, time.at + time.resolution);
    let high = signed(answered, time.at);
    let (worst, ahead) = if high.abs() >= low.abs() {
        (high.unsigned_abs(), high > 0)
    } else {
        (low.unsigned_abs(), low > 0)
    };
    let skew = Duration::from_nanos(u64::try_from(worst).unwrap_or(u64::MAX));
    if skew > limit {
        return Err(ClockSkewError {
            store: store.to_string(),
            skew: Duration::from_secs(skew.as_secs()),
            ahead,
            limit,
        });
    }
    Ok(skew)
}

/// `a - b` in nanoseconds.
fn signed(a: SystemTime, b: SystemTime) -> i128 {
    match a.duration_since(b) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    }
}

/// The letter an entry's name gives a record write's operation; none for an operation that is
/// no record write (a plan's replace, forget, move or import is written as creates, updates and
/// deletes).
fn letter(op: Operation) -> Option<char> {
    match op {
        Operation::Create => Some('c'),
        Operation::Update => Some('u'),
        Operation::Delete => Some('d'),
        _ => None,
    }
}

/// Whether `op` is a record write, which the log names (a create, an update or a delete).
pub fn is_logged(op: Operation) -> bool {
    letter(op).is_some()
}

/// The record write an entry's letter names.
fn operation_of(letter: char) -> Option<Operation> {
    Some(match letter {
        'c' => Operation::Create,
        'u' => Operation::Update,
        'd' => Operation::Delete,
        _ => return None,
    })
}

/// Which folder of the estate the record an entry names lies in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// `r/`: a resource instance object.
    Resource,
    /// `o/`: a root output.
    Output,
    /// `d/`: a default provider.
    Provider,
}

impl Target {
    /// The target of a record of `kind`; none for a key that is not a record's.
    pub fn of(kind: &KeyKind) -> Option<Target> {
        match kind {
            KeyKind::Resource => Some(Target::Resource),
            KeyKind::Output => Some(Target::Output),
            KeyKind::Provider => Some(Target::Provider),
            _ => None,
        }
    }

    fn letter(self) -> char {
        match self {
            Target::Resource => 'r',
            Target::Output => 'o',
            Target::Provider => 'd',
        }
    }

    fn of_letter(letter: char) -> Option<Target> {
        Some(match letter {
            'r' => Target::Resource,
            'o' => Target::Output,
            'd' => Target::Provider,
            _ => return None,
        })
    }
}

/// Why a key under `wlog/` is not an entry this program reads.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("{key} is not a write log entry: {reason}")]
pub struct EntryError {
    /// The key.
    pub key: String,
    /// What is wrong.
    pub reason: &'static str,
}

/// One write log entry, as its name says it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LogEntry {
    /// The writer's time when it made the entry, in nanoseconds since 1970.
    pub nanos: u64,
    /// The first 8 hex digits of the SHA-256 of the writing run's id.
    pub run8: String,
    /// The session's entry counter.
    pub seq: u32,
    /// The write: create, update or delete (the constructors take no other).
    op: Operation,
    /// Where the record lies.
    pub target: Target,
    /// The record key's last segment, exactly as the key has it.
    pub segment: String,
}

impl LogEntry {
    /// The entry run `run_id` makes, as its `seq`-th, at `at`, before `op` on `record_key`; none
    /// for a key that is no record of `layout`'s estate, or an operation that is no record write.
    pub fn new(
        layout: &Layout,
        at: SystemTime,
        run_id: &str,
        seq: u32,
        op: Operation,
        record_key: &str,
    ) -> Option<LogEntry> {
        letter(op)?;
        let target = Target::of(&layout.classify(record_key)?)?;
        let segment = record_key.rsplit('/').next()?.to_string();
        Some(LogEntry {
            nanos: nanos_of(at),
            run8: sha256_hex(run_id.as_bytes())[..8].to_string(),
            seq: seq % 1_000_000,
            op,
            target,
            segment,
        })
    }

    /// The record write it names: create, update or delete.
    pub fn op(&self) -> Operation {
        self.op
    }

    /// When the writer made it.
    pub fn at(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_nanos(self.nanos)
    }

    /// Its name in the log folder: `<countdown>-<run8>-<seq>-<op><target>+<segment>`.
    pub fn name(&self) -> String {
        format!(
            "{:019}-{}-{:06}-{}{}+{}",
            COUNTDOWN - self.nanos.min(COUNTDOWN),
            self.run8,
            self.seq,
            // The constructors take only record writes, which all have a letter.
            letter(self.op).unwrap_or('?'),
            self.target.letter(),
            self.segment
        )
    }

    /// Its key.
    pub fn key(&self, layout: &Layout) -> RecordKey {
        layout.log_key(&self.name())
    }

    /// The key of the record it names.
    pub fn record_key(&self, layout: &Layout) -> String {
        let folder = match self.target {
            Target::Resource => "r",
            Target::Output => "o",
            Target::Provider => "d",
        };
        format!("{}{folder}/{}", layout.prefix(), self.segment)
    }

    /// The entry a key of `layout`'s log names.
    pub fn parse(layout: &Layout, key: &str) -> Result<LogEntry, EntryError> {
        let bad = |reason| EntryError {
            key: key.to_string(),
            reason,
        };
        let name = key
            .strip_prefix(&layout.log_prefix())
            .ok_or_else(|| bad("outside the estate's log"))?;
        let (head, segment) = name
            .split_once('+')
            .ok_or_else(|| bad("no `+` before the record's segment"))?;
        let parts: Vec<&str> = head.split('-').collect();
        let [count, run8, seq, what] = parts[..] else {
            return Err(bad("not four parts before the `+`"));
        };
        let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(count, 19) || !digits(seq, 6) {
            return Err(bad("the time is not 19 digits or the counter not 6"));
        }
        if run8.len() != 8 || !run8.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad("the run is not 8 hex digits"));
        }
        let mut letters = what.chars();
        let (Some(op), Some(target), None) = (
            letters.next().and_then(operation_of),
            letters.next().and_then(Target::of_letter),
            letters.next(),
        ) else {
            return Err(bad("the operation and folder are not two known letters"));
        };
        if segment.is_empty() || segment.contains('/') {
            return Err(bad("the record's segment is empty or holds a `/`"));
        }
        let count: u64 = count.parse().map_err(|_| bad("the time is too large"))?;
        let nanos = COUNTDOWN
            .checked_sub(count)
            .ok_or_else(|| bad("the time is too large"))?;
        Ok(LogEntry {
            nanos,
            run8: run8.to_string(),
            seq: seq
                .parse()
                .map_err(|_| bad("the counter is not a number"))?,
            op,
            target,
            segment: segment.to_string(),
        })
    }

    /// The entry's body: for people and `records` commands (a reader needs only the name).
    pub fn body(&self, layout: &Layout, run_id: &str) -> Vec<u8> {
        #[derive(Serialize)]
        struct Body<'a> {
            format: &'a str,
            run_id: &'a str,
            at: String,
            key: String,
            op: Operation,
        }
        let at = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(self.nanos))
            .ok()
            .and_then(|t| {
                t.format(&time::format_description::well_known::Rfc3339)
                    .ok()
            })
            .unwrap_or_default();
        // Strings and an enum only: serialising cannot fail.
        serde_json::to_vec(&Body {
            format: LOG_FORMAT,
            run_id,
            at,
            key: self.record_key(layout),
            op: self.op,
        })
        .unwrap_or_default()
    }
}

/// The key that every entry made before `at` sorts after (and every later one before): where a
/// listing of the entries older than `at` starts.
pub fn time_key(layout: &Layout, at: SystemTime) -> String {
    format!(
        "{}{:019}",
        layout.log_prefix(),
        COUNTDOWN - nanos_of(at).min(COUNTDOWN)
    )
}

fn nanos_of(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// What a listing (or an image) shows of the record an entry names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen<'a> {
    /// No record.
    Absent,
    /// A record, carrying the name of the entry it was written after (none: an older writer's).
    Present {
        /// The entry name its writer stamp carries.
        carries: Option<&'a str>,
    },
}

/// Whether what is seen already holds `entry`'s write: the record carries its name, or the
/// entry is a delete and the record is absent.
pub fn holds(entry: &LogEntry, seen: Seen<'_>) -> bool {
    match seen {
        Seen::Present { carries } => carries == Some(entry.name().as_str()),
        Seen::Absent => entry.op == Operation::Delete,
    }
}

/// What a compaction makes of one entry it listed (or its last image named pending).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// The new image holds its write: readers need not fetch the record for it.
    Absorbed,
    /// Its write may still land: the new image names it, and readers fetch its record.
    Pending,
    /// Too old for its write to land after this compaction's listing of the records.
    Dropped,
}

/// The fate of `entry` in a compaction at `now` (its clock) whose record listing shows `seen`.
pub fn fate(entry: &LogEntry, seen: Seen<'_>, now: SystemTime, timing: &Timing) -> Fate {
    if holds(entry, seen) {
        return Fate::Absorbed;
    }
    match now.duration_since(entry.at()) {
        Ok(age) if age > timing.pending_lifetime() => Fate::Dropped,
        _ => Fate::Pending,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::layout::EstateName;

    fn layout() -> Layout {
        Layout::new(EstateName::parse("e").unwrap())
    }

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_764_000_000 + secs)
    }

    #[test]
    fn an_entry_names_its_record_and_sorts_newest_first() {
        let l = layout();
        let key = l.resource_key("aws_instance.web[\"a+b\"]");
        let old = LogEntry::new(&l, at(0), "run-1", 7, Operation::Update, &key).unwrap();
        let new = LogEntry::new(&l, at(1), "run-2", 0, Operation::Delete, &key).unwrap();
        assert!(new.key(&l) < old.key(&l), "the newer entry sorts first");
        for e in [&old, &new] {
            assert_eq!(LogEntry::parse(&l, &e.key(&l)).as_ref(), Ok(e));
            assert_eq!(e.record_key(&l), key);
            assert_eq!(l.classify(&e.key(&l)), Some(KeyKind::Log));
            assert!(crate::store::key::is_log_entry(&e.key(&l)), "S3 tags it");
            assert!(!crate::store::key::is_log_entry(&e.record_key(&l)));
            assert!(e.name().len() <= 240);
        }
        assert_eq!(old.at(), at(0));
        let long = l.resource_key(&"x".repeat(400));
        let e = LogEntry::new(&l, at(0), "r", 1, Operation::Create, &long).unwrap();
        assert!(
            e.name().len() <= 240,
            "a digest segment keeps the name short"
        );
        assert_eq!(e.record_key(&l), long);
        let out = LogEntry::new(&l, at(0), "r", 1, Operation::Create, &l.output_key("o")).unwrap();
        assert_eq!(out.record_key(&l), l.output_key("o"));
        assert!(LogEntry::new(&l, at(0), "r", 1, Operation::Create, &l.pending_key("x")).is_none());
        let body: serde_json::Value = serde_json::from_slice(&old.body(&l, "run-1")).unwrap();
        assert_eq!(body["key"], key.as_str());
        assert_eq!(body["op"], "update");
    }

    #[test]
    fn the_log_reads_and_writes_entries_as_earlier_programs_did() {
        let l = layout();
        let key = l.resource_key("a.b");
        for (op, letter, word) in [
            (Operation::Create, 'c', "create"),
            (Operation::Update, 'u', "update"),
            (Operation::Delete, 'd', "delete"),
        ] {
            let old = format!(
                "{}9998235999999999999-0a1b2c3d-000007-{letter}r+{}",
                l.log_prefix(),
                key.rsplit('/').next().unwrap()
            );
            let e = LogEntry::parse(&l, &old).unwrap();
            assert_eq!(e.op(), op);
            assert_eq!(e.key(&l), old, "the name is written as it is read");
            let made = LogEntry::new(&l, at(0), "run-1", 7, op, &key).unwrap();
            assert_eq!(
                String::from_utf8(made.body(&l, "run-1")).unwrap(),
                format!(
                    r#"{{"format":"choudoufu-live/log/v1","run_id":"run-1","at":"2025-11-24T16:00:00Z","key":"{key}","op":"{word}"}}"#
                )
            );
        }
        for op in Operation::ALL {
            let write = matches!(
                op,
                Operation::Create | Operation::Update | Operation::Delete
            );
            assert_eq!(
                LogEntry::new(&l, at(0), "r", 0, op, &key).is_some(),
                write,
                "{op}"
            );
        }
    }

    #[test]
    fn a_time_key_splits_older_entries_from_newer() {
        let l = layout();
        let key = l.resource_key("a.b");
        let split = time_key(&l, at(100));
        for (secs, older) in [(99, true), (101, false)] {
            let e = LogEntry::new(&l, at(secs), "r", 0, Operation::Create, &key).unwrap();
            assert_eq!(e.key(&l).into_string() > split, older, "{secs}");
        }
    }

    #[test]
    fn keys_that_are_no_entry_are_refused() {
        let l = layout();
        let p = l.log_prefix();
        for bad in [
            format!("{p}nothing"),
            format!("{p}123-0a1b2c3d-000001-ur+x"),
            format!("{p}0000000000000000001-0a1b2c3d-000001-zr+x"),
            format!("{p}0000000000000000001-0a1b2c3d-000001-ur+"),
            format!("{p}0000000000000000001-nothex!!-000001-ur+x"),
            l.resource_key("x").into_string(),
        ] {
            assert!(LogEntry::parse(&l, &bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_skewed_clock_is_refused_by_name_and_a_close_one_passes() {
        let limit = Duration::from_secs(60);
        let store = |secs| StoreTime {
            at: at(secs),
            resolution: Duration::from_secs(1),
        };
        assert!(check_skew("s3://b", at(100), at(100), store(100), limit).is_ok());
        assert!(check_skew("s3://b", at(100), at(101), store(41), limit).is_ok());
        let ahead = check_skew("s3://b", at(100), at(100), store(30), limit).unwrap_err();
        assert!(ahead.ahead && ahead.skew == Duration::from_secs(70));
        assert!(ahead.to_string().starts_with("ClockSkewError: "));
        assert!(ahead.to_string().contains("ahead of the clock of s3://b"));
        let behind = check_skew("s3://b", at(100), at(100), store(170), limit).unwrap_err();
        assert!(!behind.ahead && behind.skew >= Duration::from_secs(70));
        // The answer took long: the store's time could be anywhere in it.
        assert!(check_skew("s3://b", at(100), at(170), store(100), limit).is_err());
    }

    #[test]
    fn the_figures_hold_together() {
        let t = Timing::default();
        assert_eq!(t.skew_limit(), Duration::from_secs(60));
        assert!(2 * t.skew_limit() <= t.margin);
        assert_eq!(t.pending_lifetime(), Duration::from_secs(60 + 240 + 120));
        assert_eq!(t.trust(), Duration::from_secs(6 * 24 * 3600));
        assert_eq!(t.log_from(at(1000)), at(880));
        assert!(t.trusts(at(0), at(0) + Duration::from_secs(5 * 24 * 3600)));
        assert!(!t.trusts(at(0), at(0) + Duration::from_secs(6 * 24 * 3600)));
        assert!(!t.is_stalled(at(0), at(60)));
        assert!(t.is_stalled(at(0), at(61)));
        // The S3 lifecycle rule expires entries no sooner than the retention.
        let days = u64::try_from(crate::store::s3::bucket::LOG_EXPIRY_DAYS).unwrap();
        assert_eq!(RETENTION, Duration::from_secs(days * 24 * 3600));
        let short = Timing {
            retention: Duration::from_secs(10),
            ..t
        };
        assert!(short.trust() <= short.retention);
    }

    #[test]
    fn a_compaction_absorbs_what_it_holds_keeps_what_may_land_and_drops_the_rest() {
        let l = layout();
        let t = Timing::default();
        let key = l.resource_key("a.b");
        let e = LogEntry::new(&l, at(0), "r", 0, Operation::Update, &key).unwrap();
        let name = e.name();
        let carried = Seen::Present {
            carries: Some(&name),
        };
        let other = Seen::Present {
            carries: Some("else"),
        };
        assert_eq!(fate(&e, carried, at(10), &t), Fate::Absorbed);
        assert_eq!(fate(&e, other, at(10), &t), Fate::Pending);
        assert_eq!(fate(&e, Seen::Absent, at(10), &t), Fate::Pending);
        assert_eq!(fate(&e, other, at(421), &t), Fate::Dropped);
        let d = LogEntry::new(&l, at(0), "r", 1, Operation::Delete, &key).unwrap();
        assert_eq!(fate(&d, Seen::Absent, at(10), &t), Fate::Absorbed);
        assert_eq!(
            fate(&d, Seen::Present { carries: None }, at(10), &t),
            Fate::Pending
        );
    }
}
