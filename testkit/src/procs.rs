//! The processes a test started, read from `/proc`: parents, descendants, names, the ones whose environment holds a string, and SIGKILL.

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The parent of `pid` while it runs (`None` once it is gone or a zombie).
pub fn parent(pid: u32) -> Option<u32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) state ppid ...": the name may hold spaces and parentheses.
    let after = s.get(s.rfind(')')? + 2..)?;
    let mut fields = after.split(' ');
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    (state != 'Z' && state != 'X').then_some(ppid)
}

/// Whether `pid` still runs (not gone, not a zombie).
pub fn alive(pid: u32) -> bool {
    parent(pid).is_some()
}

/// Every running process below `pid`, children before grandchildren.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut all = Vec::new();
    let mut frontier = vec![pid];
    while let Some(up) = frontier.pop() {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            break;
        };
        for e in entries.flatten() {
            let Some(child) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            if parent(child) == Some(up) {
                all.push(child);
                frontier.push(child);
            }
        }
    }
    all
}

/// The command name of `pid` (`/proc/<pid>/comm`), empty once it is gone.
pub fn name(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// SIGKILL `pid`; one already gone is no error.
pub fn sigkill(pid: u32) {
    let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
}

/// Wait until `child` has ended, within `limit`; past it, kill it and panic.
pub fn reap(child: &mut std::process::Child, limit: std::time::Duration) {
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            sigkill(child.id());
            panic!("the run did not end within {limit:?} of the kill");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// SIGKILL every terraform process below `pid`; panics when there is none.
pub fn kill_terraform_under(pid: u32) {
    let terraform: Vec<u32> = descendants(pid)
        .into_iter()
        .filter(|p| name(*p) == "terraform")
        .collect();
    assert!(!terraform.is_empty(), "no terraform under run");
    terraform.iter().for_each(|p| sigkill(*p));
}

/// The processes whose environment holds `needle`, by pid.
pub fn with_env(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(env) = std::fs::read(entry.path().join("environ"))
            && String::from_utf8_lossy(&env).contains(needle)
        {
            found.push(pid);
        }
    }
    found
}
