//! `<home>/memory_state.json`: the small persisted state of migration (the
//! `migrated` flag). The consolidation markers live in `memory.db` beside
//! the transcripts they point into; a `sessions` object older builds wrote
//! here is ignored and dropped on the next update. Read-modify-write happens under an exclusive lock on
//! `<home>/memory_state.lock` and the file is replaced through a temporary
//! file and a rename, so processes sharing a home never lose an update and
//! never see a torn file.

use std::fs::OpenOptions;
use std::io::Write as _;
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
        let io = |operation: &'static str, path: &Path| {
            let path = path.to_owned();
            move |source| MemoryError::Io { operation, path, source }
        };
        if let Some(parent) = self.path.parent() {
            std::fs::create_dir_all(parent).map_err(io("creating", parent))?;
        }
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.lock_path)
            .map_err(io("opening", &self.lock_path))?;
        lock.lock().map_err(io("locking", &self.lock_path))?;
        let mut state = self.load()?;
        let value = change(&mut state);
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let mut temp = tempfile::Builder::new()
            .prefix(".memory_state.")
            .suffix(".tmp")
            .tempfile_in(dir)
            .map_err(io("creating a temporary file in", dir))?;
        let text = serde_json::to_string_pretty(&state).expect("the state serialises");
        temp.write_all(text.as_bytes()).map_err(io("writing", temp.path()))?;
        temp.as_file().sync_all().map_err(io("syncing", temp.path()))?;
        temp.persist(&self.path).map_err(|error| MemoryError::Io {
            operation: "replacing",
            path: self.path.clone(),
            source: error.error,
        })?;
        drop(lock);
        Ok(value)
    }
}
