//! File helpers shared by the Cairn crates.
//!
//! Every Cairn crate that keeps a file replaces it the same way, so readers
//! and a crash see the old file or the new one, never a part of either:
//!
//! - [`write_atomic`] writes bytes to a temporary file in the target's
//!   directory, syncs it, renames it over the target and syncs the
//!   directory. [`AtomicFile`] is the same in steps, for a writer that
//!   streams or checks what it wrote before it commits; dropping one
//!   uncommitted removes the temporary file and leaves the target alone.
//! - [`sync_dir`] makes a rename or a removal in a directory durable.
//! - [`copy_dir_atomic`] copies a directory tree under a temporary name and
//!   renames it into place, so a failed copy leaves nothing behind.
//! - [`LockFile`] holds an exclusive advisory lock on a lock file beside the
//!   data it guards, released when it is dropped (or the process dies).
//!
//! ```
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("state.json");
//! cairn_files::write_atomic(&path, b"{\"version\": 1}")?;
//! {
//!     let _lock = cairn_files::LockFile::acquire(&dir.path().join("state.lock"))?;
//!     cairn_files::write_atomic(&path, b"{\"version\": 2}")?;
//! }
//! assert_eq!(std::fs::read(&path)?, b"{\"version\": 2}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! What this crate deliberately does not do: it reads no file, chooses no
//! permissions beyond owner-only for what it creates, and depends on no
//! other Cairn crate. A temporary file is named `.<target name>.<random>.tmp`
//! in the target's directory, so a rename never crosses a file system.

#![warn(missing_docs)]

mod atomic;
mod copy;
mod error;
mod lock;
#[cfg(test)]
mod tests;

pub use atomic::{AtomicFile, parent_dir, sync_dir, write_atomic};
pub use copy::copy_dir_atomic;
pub use error::{FilesError, Result};
pub use lock::LockFile;
