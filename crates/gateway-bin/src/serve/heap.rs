//! Handing freed heap memory back to the operating system.
//!
//! glibc's allocator returns memory to the system only from the top of
//! each heap; pages freed below a block still in use stay mapped and count
//! in the process's resident memory. Loading a large store's indexes frees
//! hundreds of megabytes that way (a million rows: about 230 MB of 1.3 GB),
//! so the gateway asks glibc to release them once the indexes are loaded
//! (`malloc_trim`, which returns every whole free page of every heap).

use std::time::{Duration, Instant};

use cairn_memory_core::MemoryDb;

/// How long [`wait_for_keyword_index`] waits at most.
const KEYWORD_INDEX_PATIENCE: Duration = Duration::from_secs(600);
/// How often it looks.
const KEYWORD_INDEX_POLL: Duration = Duration::from_millis(200);

/// Waits until the episodic keyword index is built (it loads on a thread of
/// its own), at most [`KEYWORD_INDEX_PATIENCE`]; answers whether it is.
pub(crate) fn wait_for_keyword_index(memory: &MemoryDb) -> bool {
    let started = Instant::now();
    loop {
        match memory.episodic_index_status() {
            Ok(status) if status.keyword_index_len.is_some() => return true,
            Ok(_) if started.elapsed() < KEYWORD_INDEX_PATIENCE => std::thread::sleep(KEYWORD_INDEX_POLL),
            _ => return false,
        }
    }
}

/// Returns the heap's free pages to the system; answers whether any were
/// returned. A no-op answering `false` where the allocator is not glibc's.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn release_freed() -> bool {
    // SAFETY: `malloc_trim` only walks glibc's own heaps, under their locks;
    // it has no precondition and touches no memory in use.
    #[allow(unsafe_code)]
    let released = unsafe { libc::malloc_trim(0) };
    released == 1
}

/// Returns the heap's free pages to the system; answers whether any were
/// returned. A no-op answering `false` where the allocator is not glibc's.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn release_freed() -> bool {
    false
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::release_freed;

    fn resident_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:")?.trim().strip_suffix("kB")?.trim().parse().ok())
            .unwrap()
    }

    #[test]
    fn freed_blocks_below_live_ones_go_back_to_the_system() {
        // 128 MiB in 1 KiB blocks (below the size glibc maps on its own),
        // written so their pages are resident; one block in 64 is kept, so
        // the heap's top never frees and nothing returns by itself.
        let mut blocks: Vec<Box<[u8]>> = (0..131_072).map(|n| vec![(n % 251) as u8; 1024].into_boxed_slice()).collect();
        let kept: Vec<Box<[u8]>> = blocks.iter_mut().step_by(64).map(std::mem::take).collect();
        drop(blocks);
        let before = resident_kib();
        assert!(release_freed(), "glibc returned nothing");
        let after = resident_kib();
        assert!(before.saturating_sub(after) > 64 * 1024, "resident {before} KiB before, {after} KiB after");
        drop(kept);
    }
}
