//! The real program a shim runs: the one its variable names, else the next of its name on PATH
//! that is not this binary; and the marker that tells a shim a shim started it (a loop).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use super::error::ShimError;
use super::name::ShimName;
use crate::cut::{Mechanism, cut};

/// The variable a shim sets for the program it runs: `exec:PID` when it replaced itself with
/// it, `child:PID` when `run` (in process PID) starts it as a child.
pub const MARKER_ENV: &str = "CHOUDOUFU_SHIM_NEXT";

/// How the program a shim runs is started, and by which process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker {
    /// The shim replaced itself with the program: it has the shim's process id.
    Exec(u32),
    /// `run`, in that process, starts the program as its child.
    Child(u32),
}

impl Marker {
    /// The marker's value in [`MARKER_ENV`].
    pub fn value(self) -> String {
        match self {
            Marker::Exec(pid) => format!("exec:{pid}"),
            Marker::Child(pid) => format!("child:{pid}"),
        }
    }

    /// The marker a value holds, if it is one.
    pub fn parse(value: &OsStr) -> Option<Marker> {
        let (how, pid) = value.to_str()?.split_once(':')?;
        let pid = pid.parse().ok()?;
        match how {
            "exec" => Some(Marker::Exec(pid)),
            "child" => Some(Marker::Child(pid)),
            _ => None,
        }
    }

    /// Whether the process `pid`, whose parent is `parent`, is the program this marker's shim runs.
    ///
    /// A program that program starts in turn (a provisioner running terraform) is neither, so
    /// it is no loop.
    pub fn is_started_by_shim(self, pid: u32, parent: u32) -> bool {
        match self {
            Marker::Exec(p) => p == pid,
            Marker::Child(p) => p == parent,
        }
    }
}

/// This binary, by its canonical path.
#[derive(Clone, Debug)]
pub struct Me(PathBuf);

impl Me {
    /// The running binary.
    pub fn current() -> Result<Me, ShimError> {
        let exe = std::env::current_exe().map_err(ShimError::OwnPath)?;
        std::fs::canonicalize(exe)
            .map(Me)
            .map_err(ShimError::OwnPath)
    }

    /// Its canonical path.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Whether this process's parent runs this binary: `choudoufu-live run`, which found the shim
    /// on PATH as its terraform (Linux's `/proc`; elsewhere never).
    pub fn is_parent(&self) -> bool {
        let parent = std::os::unix::process::parent_id();
        self.is(Path::new(&format!("/proc/{parent}/exe")))
    }

    /// Whether `path` is this binary (a link to it included).
    pub fn is(&self, path: &Path) -> bool {
        std::fs::canonicalize(path).is_ok_and(|p| p == self.0)
    }
}

/// Refuse to go on when a shim started this one as its real program.
pub fn check_loop(name: ShimName, called: &OsStr, marker: Option<&OsStr>) -> Result<(), ShimError> {
    let Some(marker) = marker.and_then(Marker::parse) else {
        return Ok(());
    };
    if cut(Mechanism::ShimLoop)
        || !marker.is_started_by_shim(std::process::id(), std::os::unix::process::parent_id())
    {
        return Ok(());
    }
    Err(ShimError::Loop {
        called: PathBuf::from(called),
        program: name.program(),
        env: name.env(),
    })
}

/// The real program for `name`: its variable's value, else the first of its name on `path_var`
/// that is not this binary.
pub fn real_program(
    name: ShimName,
    me: &Me,
    named: Option<OsString>,
    path_var: Option<OsString>,
) -> Result<PathBuf, ShimError> {
    let not_found = || ShimError::NotFound {
        program: name.program(),
        shim: me.path().to_path_buf(),
        env: name.env(),
    };
    let path_var = path_var.unwrap_or_default();
    match named.filter(|n| !n.is_empty()) {
        Some(named) if Path::new(&named).components().count() > 1 => {
            let named = absolute(Path::new(&named));
            if me.is(&named) && !cut(Mechanism::ShimLoop) {
                return Err(ShimError::NamesItself {
                    env: name.env(),
                    named,
                    shim: me.path().to_path_buf(),
                    program: name.program(),
                });
            }
            Ok(named)
        }
        Some(bare) => on_path(&bare, me, &path_var).ok_or_else(not_found),
        None => on_path(OsStr::new(name.program()), me, &path_var).ok_or_else(not_found),
    }
}

/// The first executable file `file` in the folders of `path_var` that is not this binary.
fn on_path(file: &OsStr, me: &Me, path_var: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path_var)
        .map(|dir| absolute(&dir.join(file)))
        .find(|p| is_executable(p) && !me.is(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `path` made absolute against the current folder (links kept, so the program sees its own name).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn exe(dir: &Path, name: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[test]
    fn the_next_program_on_path_is_never_this_binary() {
        let t = tempfile::tempdir().unwrap();
        let (shims, real, empty) = (t.path().join("s"), t.path().join("r"), t.path().join("e"));
        for d in [&shims, &real, &empty] {
            std::fs::create_dir(d).unwrap();
        }
        let me_file = exe(t.path(), "me");
        std::os::unix::fs::symlink(&me_file, shims.join("terraform")).unwrap();
        let real_tf = exe(&real, "terraform");
        std::fs::write(empty.join("terraform"), "not executable").unwrap();
        let me = Me(std::fs::canonicalize(&me_file).unwrap());
        let path = std::env::join_paths([&shims, &empty, &real]).unwrap();
        let found = real_program(ShimName::Terraform, &me, None, Some(path.clone())).unwrap();
        assert_eq!(found, real_tf);
        // A bare name in the variable is looked up the same way; a path to the shim is refused.
        let bare = real_program(
            ShimName::Terraform,
            &me,
            Some("terraform".into()),
            Some(path.clone()),
        );
        assert_eq!(bare.unwrap(), real_tf);
        let itself = real_program(
            ShimName::Terraform,
            &me,
            Some(shims.join("terraform").into()),
            Some(path),
        );
        assert!(
            matches!(itself, Err(ShimError::NamesItself { .. })),
            "{itself:?}"
        );
        let only_shims = std::env::join_paths([&shims]).unwrap();
        let none = real_program(ShimName::Tofu, &me, None, Some(only_shims));
        assert!(
            matches!(
                none,
                Err(ShimError::NotFound {
                    program: "tofu",
                    ..
                })
            ),
            "{none:?}"
        );
    }

    #[test]
    fn markers_name_the_program_a_shim_starts_and_nothing_it_starts_in_turn() {
        for m in [Marker::Exec(7), Marker::Child(8)] {
            assert_eq!(Marker::parse(OsStr::new(&m.value())), Some(m));
        }
        assert_eq!(Marker::parse(OsStr::new("exec:x")), None);
        assert_eq!(Marker::parse(OsStr::new("fork:1")), None);
        assert!(Marker::Exec(7).is_started_by_shim(7, 1));
        assert!(!Marker::Exec(7).is_started_by_shim(9, 7));
        assert!(Marker::Child(8).is_started_by_shim(9, 8));
        assert!(!Marker::Child(8).is_started_by_shim(8, 1));
    }
}
