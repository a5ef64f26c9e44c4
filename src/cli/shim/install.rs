//! `choudoufu-live shim DIR`: write `terraform` and `tofu` into DIR as links to this binary.

use std::path::{Path, PathBuf};

use clap::Args;

use super::error::ShimError;
use super::name::ShimName;
use super::next::Me;
use crate::cut::{Mechanism, cut};

/// Write `terraform` and `tofu` shims into DIR and print the PATH line that puts them first.
///
/// Each shim is a link to this binary. Called through it, terraform runs as
/// `choudoufu-live run -- terraform ...` in a root that holds `live.hcl`, and untouched
/// everywhere else and for every command that never touches state (docs/ci.md). The real
/// program is the next of its name on PATH after the shims, or the one CHOUDOUFU_TERRAFORM
/// (CHOUDOUFU_TOFU) names.
#[derive(Debug, Args)]
pub struct ShimArgs {
    /// The folder to write the shims into (made when missing; a file there that is not a shim is left alone and refused).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// Write the shims and print `export PATH="DIR:$PATH"`; returns the exit status.
pub fn install(args: &ShimArgs) -> Result<i32, ShimError> {
    let me = Me::current()?;
    let dir = std::path::absolute(&args.dir).map_err(|source| ShimError::Write {
        path: args.dir.clone(),
        source,
    })?;
    std::fs::create_dir_all(&dir).map_err(|source| ShimError::Write {
        path: dir.clone(),
        source,
    })?;
    let links: Vec<PathBuf> = ShimName::ALL
        .iter()
        .map(|n| dir.join(n.program()))
        .collect();
    // Every name checked before any is written: a folder holding a real terraform is left as it is.
    if let Some(taken) = links
        .iter()
        .find(|l| l.symlink_metadata().is_ok() && !me.is(l))
        .filter(|_| !cut(Mechanism::ShimOccupied))
    {
        return Err(ShimError::Occupied(taken.clone()));
    }
    for link in &links {
        write_link(me.path(), link)?;
    }
    println!("export PATH=\"{}:$PATH\"", double_quoted(&dir));
    Ok(0)
}

/// A link at `link` to `target`, made beside it and renamed over it (a shim is never half there).
fn write_link(target: &Path, link: &Path) -> Result<(), ShimError> {
    let fail = |source| ShimError::Write {
        path: link.to_path_buf(),
        source,
    };
    let name = link
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let tmp = link.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp).map_err(fail)?;
    std::fs::rename(&tmp, link).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail(e)
    })
}

/// `path` as the inside of a shell double-quoted string.
fn double_quoted(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        if matches!(c, '"' | '\\' | '$' | '`') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_quoted_for_the_shell() {
        assert_eq!(
            double_quoted(Path::new("/a b/$x\"`\\")),
            "/a b/\\$x\\\"\\`\\\\"
        );
    }
}
