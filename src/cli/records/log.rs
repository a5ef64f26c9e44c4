//! `records log`: the estate's writes in time order, across all records.

use std::path::Path;

use time::OffsetDateTime;

use super::address::shown_address;
use super::estate::Estate;
use super::out::{outln, table};
use super::versions::{Seen, change_of, read_all, show_time, writer_cells, written};
use crate::cli::error::CliError;
use crate::engine::layout::KeyKind;
use crate::engine::record::RecordKind;
use crate::store::key;
use crate::store::versions::parse_time;
use crate::store::{History, ObjectVersion, VersionKind};

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
        let op = change_of(&past.seen, older.as_ref(), &listing.history);
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
