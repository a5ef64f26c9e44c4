//! A run's private temporary folder (0700, named by the run's pid), and the sweep of the folders
//! that killed runs of the same user left behind.

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use nix::sys::signal::kill;

use crate::cut::{Mechanism, cut};
use nix::unistd::Pid;

/// A fresh folder in the system's temporary folder that only this user opens, removed when dropped.
///
/// Its name is `PREFIX<pid>-…`; folders of this user and prefix whose process is gone are removed.
pub fn create(prefix: &str) -> std::io::Result<tempfile::TempDir> {
    let mode = if cut(Mechanism::PrivateFiles) {
        0o755
    } else {
        0o700
    };
    let dir = tempfile::Builder::new()
        .prefix(&format!("{prefix}{}-", std::process::id()))
        .permissions(std::fs::Permissions::from_mode(mode))
        .tempdir()?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode))?;
    if let Ok(meta) = std::fs::metadata(dir.path()) {
        sweep_dead(prefix, meta.uid());
    }
    Ok(dir)
}

/// Remove this user's folders of `prefix` whose run is gone.
fn sweep_dead(prefix: &str, me: u32) {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(pid) = name
            .strip_prefix(prefix)
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let ours = e.metadata().is_ok_and(|m| m.is_dir() && m.uid() == me);
        let gone = matches!(
            kill(Pid::from_raw(pid), None),
            Err(nix::errno::Errno::ESRCH)
        );
        if ours && gone {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}
