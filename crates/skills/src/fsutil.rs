//! Atomic writes and directory copies.

use std::path::Path;

use crate::error::{Result, SkillsError};

/// Writes `bytes` to `path` through a temporary file in the same directory
/// and a rename, so readers see the old file or the new one, never a part.
pub(crate) fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
    cairn_files::write_atomic(path, bytes).map_err(SkillsError::files)
}

/// Copies the directory `from` to the new path `to`, whole or not at all
/// ([`cairn_files::copy_dir_atomic`]).
pub(crate) fn copy_dir_atomic(from: &Path, to: &Path) -> Result<()> {
    cairn_files::copy_dir_atomic(from, to).map_err(SkillsError::files)
}
