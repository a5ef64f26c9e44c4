//! The one maker of private folders: a folder only its owner may enter, whatever the umask.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

use crate::cut::{Mechanism, cut};

/// Mode of a private folder: its owner only.
pub const DIR_MODE: u32 = 0o700;

/// Create `dir` (and missing parents) 0700; narrow it to 0700 if it exists wider.
pub fn create(dir: &Path) -> std::io::Result<()> {
    if cut(Mechanism::PrivateFiles) {
        return std::fs::create_dir_all(dir);
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)?;
    let mode = std::fs::metadata(dir)?.permissions().mode();
    if mode & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_MODE))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_made_private_and_a_wider_one_narrowed() {
        let dir = tempfile::tempdir().unwrap();
        let made = dir.path().join("a").join("b");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        create(&made).unwrap();
        assert_eq!(mode(&made), 0o700);
        std::fs::set_permissions(&made, std::fs::Permissions::from_mode(0o755)).unwrap();
        create(&made).unwrap();
        assert_eq!(mode(&made), 0o700);
    }
}
