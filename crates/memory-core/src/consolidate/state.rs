//! `<home>/memory_state.json`: the small persisted state of migration (the
//! `migrated` flag). The consolidation markers live in `memory.db` beside
//! the transcripts they point into; a `sessions` object older builds wrote
//! here is ignored and dropped on the next update. Read-modify-write happens under an exclusive lock on
//! `<home>/memory_state.lock` and the file is replaced through a temporary
//! file and a rename, so processes sharing a home never lose an update and
//! never see a torn file.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::constants::{MEMORY_STATE_FILE_NAME, MEMORY_STATE_LOCK_FILE_NAME};
use crate::error::{MemoryError, Result};

/// The persisted state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct MemoryState {
    /// True once Markdown memory has been migrated into memory.db.
    #[serde(default)]
    pub(crate) migrated: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct StateFile {
    path: PathBuf,
    lock_path: PathBuf,
}

impl StateFile {
    pub(crate) fn in_home(home: &Path) -> Self {
        StateFile { path: home.join(MEMORY_STATE_FILE_NAME), lock_path: home.join(MEMORY_STATE_LOCK_FILE_NAME) }
    }

    pub(crate) fn load(&self) -> Result<MemoryState> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|error| MemoryError::CorruptRow { table: "memory_state.json", reason: error.to_string() }),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(MemoryState::default()),
            Err(source) => Err(MemoryError::Io { operation: "reading", path: self.path.clone(), source }),
        }
    }

    /// Applies `change` to the stored state under the lock and writes it back.
    pub(crate) fn update<T>(&self, change: impl FnOnce(&mut MemoryState) -> T) -> Result<T> {
        let lock = cairn_files::LockFile::acquire(&self.lock_path).map_err(MemoryError::files)?;
        let mut state = self.load()?;
        let value = change(&mut state);
        let text = serde_json::to_string_pretty(&state).expect("the state serialises");
        cairn_files::write_atomic(&self.path, text.as_bytes()).map_err(MemoryError::files)?;
        drop(lock);
        Ok(value)
    }
}
