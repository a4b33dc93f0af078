//! One `cairn serve` per home: an exclusive lock on `<home>/serve.lock`,
//! held for the life of the process (the kernel drops it when the process
//! ends, a crash included), and the bound address in `<home>/serve.address`
//! so a second server can say which one is running. CLI commands never take
//! the lock. Hooks, MCP sessions and the dashboard command find a running
//! server through these files and the token file beside them.

use std::fs::File;
use std::io::Read as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use cairn_files::LockFile;

/// The token file's name inside the home (written by the server's auth).
pub(crate) const TOKEN_FILE_NAME: &str = "server.token";

/// The lock file inside the home.
pub(crate) const LOCK_FILE_NAME: &str = "serve.lock";
/// Where the running server records its address.
pub(crate) const ADDRESS_FILE_NAME: &str = "serve.address";
/// Retries of a lock another process holds, and the pause between them.
const LOCK_RETRIES: u32 = 5;
const LOCK_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(20);
/// Longest address file read back (an `ip:port` is far shorter).
const MAX_ADDRESS_BYTES: u64 = 128;

/// The held instance lock; dropping it releases the lock.
#[derive(Debug)]
pub(crate) struct InstanceLock {
    _lock: LockFile,
    address_path: PathBuf,
}

impl InstanceLock {
    /// Takes the home's lock, or says which server holds it.
    pub(crate) fn acquire(home: &Path) -> anyhow::Result<Self> {
        let path = home.join(LOCK_FILE_NAME);
        let address_path = home.join(ADDRESS_FILE_NAME);
        // A client checking whether a server runs holds the lock for an
        // instant (`host::client::is_running`): a few short retries keep a
        // starting server from mistaking that check for a running server.
        let mut attempt = 0;
        let locked = loop {
            match LockFile::try_acquire(&path) {
                Ok(None) if attempt < LOCK_RETRIES => {
                    attempt += 1;
                    std::thread::sleep(LOCK_RETRY_PAUSE);
                }
                other => break other,
            }
        };
        match locked {
            Ok(Some(lock)) => {
                // The holder's process id, for whoever must stop it.
                let _ = lock.file().set_len(0);
                let _ = std::io::Write::write_all(&mut lock.file(), format!("{}\n", std::process::id()).as_bytes());
                Ok(Self { _lock: lock, address_path })
            }
            Ok(None) => {
                let running = match read_address(&address_path) {
                    Some(address) => format!("listening on http://{address}"),
                    None => "its address is not recorded yet".to_owned(),
                };
                anyhow::bail!(
                    "another cairn serve is already running on {} ({running}); stop it first, \
                     or start this one with another --home",
                    home.display()
                )
            }
            Err(error) => Err(error).with_context(|| format!("taking {} for this server", path.display())),
        }
    }

    /// Records the bound address for a second server's refusal.
    pub(crate) fn record_address(&self, bound: SocketAddr) -> anyhow::Result<()> {
        crate::settings::atomic_write(&self.address_path, format!("{bound}\n").as_bytes())?;
        Ok(())
    }
}

impl Drop for InstanceLock {
    fn drop(&mut self) {
        // The lock itself goes with the file handle; the address would only
        // mislead once this server is gone.
        let _ = std::fs::remove_file(&self.address_path);
    }
}

/// The recorded address, if it reads as one (the file is only trusted as
/// far as it parses).
pub(crate) fn read_address(path: &Path) -> Option<SocketAddr> {
    let file = File::open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    file.take(MAX_ADDRESS_BYTES).read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_one_home_is_refused_with_the_first_address_and_freed_on_drop() {
        let home = tempfile::tempdir().unwrap();
        let first = InstanceLock::acquire(home.path()).unwrap();
        let refused = InstanceLock::acquire(home.path()).unwrap_err().to_string();
        assert!(refused.contains("not recorded yet"), "{refused}");
        first.record_address("127.0.0.1:4321".parse().unwrap()).unwrap();
        let refused = InstanceLock::acquire(home.path()).unwrap_err().to_string();
        assert!(refused.contains("http://127.0.0.1:4321"), "{refused}");
        drop(first);
        assert!(!home.path().join(ADDRESS_FILE_NAME).exists());
        InstanceLock::acquire(home.path()).unwrap();
    }

    #[test]
    fn a_garbled_address_file_is_not_repeated() {
        let home = tempfile::tempdir().unwrap();
        let _first = InstanceLock::acquire(home.path()).unwrap();
        std::fs::write(home.path().join(ADDRESS_FILE_NAME), "\u{1b}]0;pwned\u{7}").unwrap();
        let refused = InstanceLock::acquire(home.path()).unwrap_err().to_string();
        assert!(refused.contains("not recorded yet") && !refused.contains('\u{1b}'), "{refused}");
    }
}
