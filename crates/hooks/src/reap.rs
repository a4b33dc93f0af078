//! Finding and killing everything a hook started, wherever it went.
//!
//! A hook runs in its own process group, and that group is killed when the
//! hook exits or times out. A descendant that called `setsid` (or
//! `setpgid`) has left the group, and once the hook exits it is re-parented
//! away from it, so neither the group nor the process tree finds it. So
//! every hook process carries a run mark in its environment
//! (`CAIRN_HOOK_RUN=<id>`, inherited by everything it starts), and when the
//! hook ends every process whose environment holds the mark is killed.
//!
//! On Linux the runner's process becomes a child subreaper
//! (`PR_SET_CHILD_SUBREAPER`): orphaned hook descendants are re-parented to
//! it instead of to init, and the ones killed here are also reaped here, so
//! none is left running or as a zombie. A process that clears its own
//! environment drops the mark; only a cgroup could follow that one.

/// The environment variable that marks every process of one hook run.
pub(crate) const RUN_MARK_ENV: &str = "CAIRN_HOOK_RUN";

/// The mark of one hook run: unique in this process and across processes.
#[derive(Debug, Clone)]
pub(crate) struct RunMark(String);

impl RunMark {
    pub(crate) fn new() -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let run = NEXT.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.subsec_nanos());
        Self(format!("{}-{run}-{nanos}", std::process::id()))
    }

    /// The value of [`RUN_MARK_ENV`] for this run.
    pub(crate) fn value(&self) -> &str {
        &self.0
    }
}

/// Makes this process the subreaper of its descendants (once; Linux only).
pub(crate) fn become_subreaper() {
    #[cfg(target_os = "linux")]
    {
        static DONE: std::sync::Once = std::sync::Once::new();
        DONE.call_once(|| {
            let me = rustix::process::getpid();
            if let Err(error) = rustix::process::set_child_subreaper(Some(me)) {
                tracing::debug!(%error, "cannot become a child subreaper; orphaned hook processes go to init");
            }
        });
    }
}

/// Kills every process still carrying `mark` and reaps the ones that are
/// this process's children. Call it after the hook itself was waited for.
pub(crate) fn kill_marked(mark: &RunMark) {
    #[cfg(target_os = "linux")]
    linux::kill_marked(mark);
    #[cfg(not(target_os = "linux"))]
    let _ = mark;
}

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::BTreeSet;
    use std::io::Read as _;
    use std::time::{Duration, Instant};

    use rustix::process::{Pid, Signal, WaitOptions};

    use super::{RUN_MARK_ENV, RunMark};

    /// Scans are repeated until one finds nothing, at most this often (a
    /// process forking while it is being killed shows up in the next scan).
    const MAX_ROUNDS: usize = 16;
    /// The most of one process's environment that is read.
    const MAX_ENVIRON_BYTES: u64 = 1 << 20;
    /// A live child of this process (where a hook's orphans are
    /// re-parented) whose environment reads empty is read again this often,
    /// this far apart: a process in the middle of an `exec` has no
    /// environment for a moment (its new memory is in place before the
    /// environment is copied into it), and would slip through.
    const EXEC_REREADS: usize = 20;
    const EXEC_REREAD_PAUSE: Duration = Duration::from_millis(1);
    /// How long a killed process is waited for to die or be re-parented
    /// to this process (it normally takes microseconds).
    const REAP_PATIENCE: Duration = Duration::from_secs(2);
    const REAP_POLL: Duration = Duration::from_millis(2);

    pub(super) fn kill_marked(mark: &RunMark) {
        let needle = format!("{RUN_MARK_ENV}={}", mark.value());
        let me = std::process::id();
        let mut killed = BTreeSet::new();
        for _ in 0..MAX_ROUNDS {
            let found = marked_processes(needle.as_bytes(), me);
            if found.is_empty() {
                break;
            }
            for pid in found {
                if let Some(process) = Pid::from_raw(pid as i32) {
                    // ESRCH: it died between the scan and the signal.
                    let _ = rustix::process::kill_process(process, Signal::KILL);
                    killed.insert(pid);
                }
            }
        }
        if !killed.is_empty() {
            tracing::debug!(processes = killed.len(), "killed processes a hook left outside its group");
        }
        for &pid in &killed {
            reap(pid, me, &killed);
        }
    }

    /// Live processes (not zombies: their environment reads empty) whose
    /// environment holds `needle`.
    fn marked_processes(needle: &[u8], me: u32) -> Vec<u32> {
        let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
        let mut found = Vec::new();
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else { continue };
            if pid == me {
                continue;
            }
            // Another user's process cannot be opened; that is not ours to kill.
            let Some(mut environ) = read_environ(&entry.path()) else { continue };
            if environ.is_empty() && is_live_child(pid, me) {
                for _ in 0..EXEC_REREADS {
                    std::thread::sleep(EXEC_REREAD_PAUSE);
                    environ = read_environ(&entry.path()).unwrap_or_default();
                    if !environ.is_empty() {
                        break;
                    }
                }
            }
            if environ.split(|byte| *byte == 0).any(|variable| variable == needle) {
                found.push(pid);
            }
        }
        found
    }

    /// The environment of the process at `/proc/<pid>`, `None` when it
    /// cannot be read.
    fn read_environ(process: &std::path::Path) -> Option<Vec<u8>> {
        let file = std::fs::File::open(process.join("environ")).ok()?;
        let mut environ = Vec::new();
        file.take(MAX_ENVIRON_BYTES).read_to_end(&mut environ).ok()?;
        Some(environ)
    }

    /// Whether `pid` is a running (not yet dead) child of `me`.
    fn is_live_child(pid: u32, me: u32) -> bool {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
        let Some((_, rest)) = stat.rsplit_once(')') else { return false };
        let mut fields = rest.split_whitespace();
        let state = fields.next().unwrap_or("Z");
        let parent = fields.next().and_then(|parent| parent.parse::<u32>().ok());
        !matches!(state, "Z" | "X" | "x") && parent == Some(me)
    }

    /// Reaps a killed process once it is this process's child. While its
    /// parent is another killed hook process it is waited for (it is about
    /// to be re-parented here); any other parent reaps it itself.
    fn reap(pid: u32, me: u32, killed: &BTreeSet<u32>) {
        let deadline = Instant::now() + REAP_PATIENCE;
        loop {
            let Some(parent) = parent_of(pid) else { return };
            if parent == me {
                if let Some(process) = Pid::from_raw(pid as i32) {
                    let _ = rustix::process::waitpid(Some(process), WaitOptions::empty());
                }
                return;
            }
            if !killed.contains(&parent) {
                return;
            }
            if Instant::now() >= deadline {
                tracing::debug!(pid, parent, "a killed hook process was not reaped in time");
                return;
            }
            std::thread::sleep(REAP_POLL);
        }
    }

    /// The parent pid of `pid`, or `None` when it is gone.
    fn parent_of(pid: u32) -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
        let (_, rest) = stat.rsplit_once(')')?;
        rest.split_whitespace().nth(1)?.parse().ok()
    }
}
