//! Copying a directory whole: assembled under a temporary name, renamed into place.

use std::fs;
use std::path::Path;

use crate::atomic::{parent_dir, sync_dir};
use crate::error::{FilesError, Result};

/// Copies the directory `from` to the new path `to`: regular files and
/// directories only, symbolic links skipped (a copy never follows a link
/// out of the tree). The copy is assembled in a temporary directory beside
/// `to` and renamed into place, so readers see no copy or the whole one,
/// and a failed copy leaves nothing behind. `to`'s parent is created when
/// missing; `to` itself must not exist, or be an empty directory.
pub fn copy_dir_atomic(from: &Path, to: &Path) -> Result<()> {
    let parent = parent_dir(to);
    fs::create_dir_all(parent).map_err(FilesError::io("creating", parent))?;
    let staging = tempfile::Builder::new()
        .prefix(".cairn-copy-")
        .tempdir_in(parent)
        .map_err(FilesError::io("creating a staging directory in", parent))?;
    copy_tree(from, staging.path())?;
    let staged = staging.keep();
    fs::rename(&staged, to).map_err(|source| {
        let _ = fs::remove_dir_all(&staged);
        FilesError::io("renaming into place", to)(source)
    })?;
    sync_dir(parent);
    Ok(())
}

/// Copies the entries of `from` into the existing directory `to`.
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    for entry in fs::read_dir(from).map_err(FilesError::io("listing", from))? {
        let entry = entry.map_err(FilesError::io("listing", from))?;
        let kind = entry.file_type().map_err(FilesError::io("inspecting", &entry.path()))?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            fs::create_dir(&target).map_err(FilesError::io("creating", &target))?;
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            fs::copy(entry.path(), &target).map_err(FilesError::io("copying to", &target))?;
        }
    }
    Ok(())
}
