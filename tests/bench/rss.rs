//! Peak memory of a process tree: a command and every process under it (terraform, `run`, the
//! provider plugins either starts), sampled from /proc while it runs.
//!
//! Why sampling and not `getrusage`: `RUSAGE_CHILDREN`'s `ru_maxrss` is the largest single
//! descendant's peak, not a sum, and a process's own `VmHWM` is its peak alone; neither says
//! how much the tree held at once. So every [`EVERY`] the sampler walks /proc, keeps every
//! process it ever saw under the command (a plugin whose parent died stays counted), and sums
//! their `VmRSS` (and `RssAnon`: private anonymous memory, which two processes never share,
//! where `VmRSS` counts a binary's pages once per process mapping them). The figure is the
//! largest sum of one sample. A peak shorter than [`EVERY`] can be missed; the sampler reads
//! a few small files per process each time (87 processes on the bench machine), so it runs
//! only in rounds of its own, never in a timed one.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// How often the sampler walks /proc.
pub const EVERY: Duration = Duration::from_millis(20);

/// What the sampler saw of one command's process tree.
#[derive(Clone, Debug, Default)]
pub struct TreePeak {
    /// The largest sum of `VmRSS` over the tree in one sample, in KiB.
    pub rss_kib: u64,
    /// The largest sum of `RssAnon` over the tree in one sample, in KiB.
    pub anon_kib: u64,
    /// Every process seen in the tree, by its name (`comm`, at most 15 bytes).
    pub seen: BTreeMap<i32, String>,
    /// The most provider plugins (`terraform-provider-*`) alive in the tree in one sample.
    pub plugins_at_once: usize,
    /// Samples taken.
    pub samples: usize,
    /// The sample of the largest sum, by process name: how many processes, and their `VmRSS` in KiB.
    pub at_peak: BTreeMap<String, (usize, u64)>,
    /// Each process's own largest `VmRSS` over the samples, in KiB, by pid.
    pub own_peak: BTreeMap<i32, u64>,
}

impl TreePeak {
    /// Provider plugin processes seen in the tree.
    pub fn plugins(&self) -> usize {
        self.seen.values().filter(|c| is_plugin(c)).count()
    }

    /// The peak sum of `VmRSS` in MiB.
    pub fn rss_mib(&self) -> f64 {
        self.rss_kib as f64 / 1024.0
    }

    /// The peak sum of `RssAnon` in MiB.
    pub fn anon_mib(&self) -> f64 {
        self.anon_kib as f64 / 1024.0
    }

    /// The peak by process, as the notes give it: at the largest sum, each name's count and MiB; then each process's own peak.
    pub fn by_process(&self) -> String {
        let at: Vec<String> = self
            .at_peak
            .iter()
            .map(|(name, (n, kib))| format!("{n} {name} {:.0} MiB", *kib as f64 / 1024.0))
            .collect();
        let own: Vec<String> = self
            .own_peak
            .iter()
            .map(|(pid, kib)| {
                let name = self.seen.get(pid).map_or("?", String::as_str);
                format!("{name} {:.0}", *kib as f64 / 1024.0)
            })
            .collect();
        format!(
            "at the peak: {}; each process's own peak (MiB, by start): {}",
            at.join(", "),
            own.join(", ")
        )
    }
}

fn is_plugin(comm: &str) -> bool {
    // `comm` is cut at 15 bytes: "terraform-provi".
    comm.starts_with("terraform-prov")
}

/// Run `cmd` to its end with its output captured, sampling its process tree every [`EVERY`].
pub fn sampled(cmd: &mut Command) -> (Output, TreePeak) {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the sampled command");
    let root = child.id() as i32;
    let waiting = std::thread::spawn(move || child.wait_with_output());
    let mut peak = TreePeak::default();
    let mut tree = BTreeSet::from([root]);
    while !waiting.is_finished() {
        sample(&mut tree, &mut peak);
        std::thread::sleep(EVERY);
    }
    let out = waiting
        .join()
        .expect("the waiting thread")
        .expect("wait for the sampled command");
    (out, peak)
}

/// One walk of /proc: add the new descendants of `tree` to it, and sum what its living members hold.
fn sample(tree: &mut BTreeSet<i32>, peak: &mut TreePeak) {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    let parents: BTreeMap<i32, (i32, String)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| Some((pid, parent_and_name(pid)?)))
        .collect();
    // Descendants born since the last sample, however deep: repeat until nothing is added.
    loop {
        let before = tree.len();
        for (pid, (ppid, _)) in &parents {
            if tree.contains(ppid) {
                tree.insert(*pid);
            }
        }
        if tree.len() == before {
            break;
        }
    }
    let (mut rss, mut anon, mut plugins) = (0, 0, 0);
    let mut by_name: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    for pid in tree.iter() {
        let Some((_, name)) = parents.get(pid) else {
            continue;
        };
        let Some((r, a)) = memory(*pid) else {
            continue;
        };
        // The latest name: a child is named after its parent until it execs.
        peak.seen.insert(*pid, name.clone());
        rss += r;
        anon += a;
        let own = peak.own_peak.entry(*pid).or_default();
        *own = (*own).max(r);
        let named = by_name.entry(name.clone()).or_default();
        named.0 += 1;
        named.1 += r;
        if is_plugin(name) && r > 0 {
            plugins += 1;
        }
    }
    if rss > peak.rss_kib {
        peak.at_peak = by_name;
    }
    peak.rss_kib = peak.rss_kib.max(rss);
    peak.anon_kib = peak.anon_kib.max(anon);
    peak.plugins_at_once = peak.plugins_at_once.max(plugins);
    peak.samples += 1;
}

/// A process's parent and name, from /proc/PID/stat (gone: `None`).
fn parent_and_name(pid: i32) -> Option<(i32, String)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "PID (comm) STATE PPID ...": comm may hold spaces and parentheses, so cut at the last ')'.
    let (head, rest) = stat.rsplit_once(')')?;
    let name = head.split_once('(')?.1.to_string();
    let ppid = rest.split_whitespace().nth(1)?.parse().ok()?;
    Some((ppid, name))
}

/// A process's `VmRSS` and `RssAnon` in KiB, from /proc/PID/status (gone, or a zombie: `None`).
fn memory(pid: i32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("RssAnon:").unwrap_or(0)))
}
