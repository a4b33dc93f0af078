//! Atomic writes and directory copies.

use std::fs;
use std::path::Path;

use crate::error::{Result, SkillsError};

/// Writes `bytes` to `path` through a temporary file in the same directory
/// and a rename, so readers see the old file or the new one, never a part.
pub(crate) fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
    cairn_files::write_atomic(path, bytes).map_err(SkillsError::files)
}

/// Copies the directory `from` to the new path `to` (regular files and
/// directories only; symbolic links are skipped). The copy is assembled
/// under a temporary name beside `to` and renamed into place, so a failed
/// copy leaves nothing behind.
pub(crate) fn copy_dir_atomic(from: &Path, to: &Path) -> Result<()> {
    let parent = to.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(parent).map_err(|source| SkillsError::io("creating", parent, source))?;
    let staging = tempfile::Builder::new()
        .prefix(".cairn-copy-")
        .tempdir_in(parent)
        .map_err(|source| SkillsError::io("creating a staging directory in", parent, source))?;
    copy_tree(from, staging.path())?;
    let staged = staging.keep();
    fs::rename(&staged, to).map_err(|source| {
        let _ = fs::remove_dir_all(&staged);
        SkillsError::io("renaming into place", to, source)
    })
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    let entries = fs::read_dir(from).map_err(|source| SkillsError::io("listing", from, source))?;
    for entry in entries {
        let entry = entry.map_err(|source| SkillsError::io("listing", from, source))?;
        let kind = entry.file_type().map_err(|source| SkillsError::io("inspecting", entry.path(), source))?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            fs::create_dir(&target).map_err(|source| SkillsError::io("creating", &target, source))?;
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            fs::copy(entry.path(), &target).map_err(|source| SkillsError::io("copying to", &target, source))?;
        }
    }
    Ok(())
}
