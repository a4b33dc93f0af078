//! Several threads sharing one forward pass without a fork per step.
//!
//! A small input (one sentence: a few dozen rows) makes every step of the
//! forward pass a few hundred microseconds of work, so handing each step to
//! the thread pool (a fork, a wake-up, a join) costs a large share of it.
//! Instead, every thread of a [`Team`] runs the whole pass: each step is a
//! *phase* of numbered tasks that whichever thread arrives claims one at a
//! time, and a thread leaves a phase once every task of it has finished. A
//! thread that starts late finds the early phases claimed and joins the
//! first open one; a thread that never starts leaves the others to do all
//! the tasks, so no thread ever waits for one that has not begun.
//!
//! [`SharedOut`] is the buffer the tasks of a phase write disjoint parts of.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Busy-wait rounds before a waiting thread starts yielding its core.
const SPINS_BEFORE_YIELD: u32 = 256;

#[derive(Default)]
struct Phase {
    claimed: AtomicUsize,
    done: AtomicUsize,
}

/// The progress of one shared pass: per phase, the tasks claimed and done.
pub(super) struct Team {
    phases: Vec<Phase>,
}

impl Team {
    /// A team for a pass of `phases` phases.
    pub(super) fn new(phases: usize) -> Self {
        Self { phases: (0..phases).map(|_| Phase::default()).collect() }
    }

    /// Phase `index` of `tasks` tasks: runs `task(t)` for every task this
    /// thread claims, then waits until all `tasks` are done. Every thread
    /// must go through the phases in the same order with the same `tasks`.
    /// Writes made by a task are visible to every thread once it returns.
    pub(super) fn phase(&self, index: usize, tasks: usize, mut task: impl FnMut(usize)) {
        let phase = &self.phases[index];
        loop {
            let claimed = phase.claimed.fetch_add(1, Ordering::Relaxed);
            if claimed >= tasks {
                break;
            }
            task(claimed);
            // Release: this task's writes happen before the count is seen.
            phase.done.fetch_add(1, Ordering::Release);
        }
        let mut spins = 0;
        // Acquire: pairs with every task's release above.
        while phase.done.load(Ordering::Acquire) < tasks {
            if spins < SPINS_BEFORE_YIELD {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// An `f32` buffer that the tasks of a phase write disjoint parts of (and
/// later phases read), shared by the threads of a [`Team`].
#[derive(Clone, Copy)]
pub(super) struct SharedOut<'a> {
    ptr: *mut f32,
    len: usize,
    _buffer: PhantomData<&'a mut [f32]>,
}

// SAFETY: a `SharedOut` is a borrowed `&mut [f32]`; the methods that touch
// it are `unsafe` and require that no two threads touch the same element
// at the same time (disjoint tasks within a phase, phases in order).
#[allow(unsafe_code)]
unsafe impl Send for SharedOut<'_> {}
// SAFETY: as above.
#[allow(unsafe_code)]
unsafe impl Sync for SharedOut<'_> {}

impl<'a> SharedOut<'a> {
    /// Shares `buffer` for the lifetime of the borrow.
    pub(super) fn new(buffer: &'a mut [f32]) -> Self {
        Self { ptr: buffer.as_mut_ptr(), len: buffer.len(), _buffer: PhantomData }
    }

    /// Length in floats.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Copies `values` to `offset ..`.
    ///
    /// # Safety
    /// No other thread reads or writes those elements during the call.
    #[allow(unsafe_code)]
    pub(super) unsafe fn write(&self, offset: usize, values: &[f32]) {
        assert!(offset <= self.len && values.len() <= self.len - offset, "write outside the shared buffer");
        // SAFETY: in bounds (asserted); exclusive per the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), self.ptr.add(offset), values.len()) };
    }

    /// Copies the `N` floats of `values` to `offset ..` (a fixed length the
    /// compiler copies inline, where [`SharedOut::write`] calls `memcpy`).
    ///
    /// # Safety
    /// No other thread reads or writes those elements during the call.
    #[allow(unsafe_code)]
    #[inline(always)]
    pub(super) unsafe fn write_array<const N: usize>(&self, offset: usize, values: &[f32; N]) {
        assert!(offset <= self.len && N <= self.len - offset, "write outside the shared buffer");
        // SAFETY: in bounds (asserted); exclusive per the caller's contract.
        unsafe { self.ptr.add(offset).cast::<[f32; N]>().write_unaligned(*values) };
    }

    /// The elements `range`, to modify.
    ///
    /// # Safety
    /// No other thread reads or writes them while the slice lives.
    #[allow(unsafe_code)]
    #[allow(clippy::mut_from_ref)]
    pub(super) unsafe fn slice_mut(&self, range: std::ops::Range<usize>) -> &'a mut [f32] {
        assert!(range.start <= range.end && range.end <= self.len, "range outside the shared buffer");
        // SAFETY: in bounds (asserted); exclusive per the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(range.start), range.len()) }
    }

    /// The whole buffer, to read.
    ///
    /// # Safety
    /// No thread writes any element while the slice lives.
    #[allow(unsafe_code)]
    pub(super) unsafe fn slice(&self) -> &'a [f32] {
        // SAFETY: the whole borrowed buffer; no writer per the caller's contract.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_runs_once_whichever_threads_take_part() {
        // Phase 0 squares its inputs, phase 1 sums neighbours of phase 0's
        // output: phase 1 needs all of phase 0, whichever thread wrote it.
        for helpers in [0usize, 1, 3] {
            let tasks = 37;
            let mut squares = vec![0.0f32; tasks];
            let mut sums = vec![0.0f32; tasks];
            let team = Team::new(2);
            let (squares_out, sums_out) = (SharedOut::new(&mut squares), SharedOut::new(&mut sums));
            let program = || {
                team.phase(0, tasks, |t| {
                    // SAFETY: task `t` alone writes element `t`.
                    #[allow(unsafe_code)]
                    unsafe {
                        squares_out.write(t, &[(t * t) as f32])
                    };
                });
                team.phase(1, tasks, |t| {
                    // SAFETY: phase 0 is over (read-only now); task `t`
                    // alone writes element `t` of the other buffer.
                    #[allow(unsafe_code)]
                    unsafe {
                        let squares = squares_out.slice();
                        sums_out.write(t, &[squares[t] + squares[(t + 1) % tasks]]);
                    }
                });
            };
            std::thread::scope(|scope| {
                for _ in 0..helpers {
                    scope.spawn(program);
                }
                program();
            });
            let want: Vec<f32> = (0..tasks).map(|t| (t * t + ((t + 1) % tasks).pow(2)) as f32).collect();
            assert_eq!(sums, want, "{helpers} helpers");
        }
    }

    #[test]
    #[should_panic(expected = "outside the shared buffer")]
    fn a_write_past_the_end_is_refused() {
        let mut buffer = vec![0.0f32; 4];
        let shared = SharedOut::new(&mut buffer);
        // SAFETY: one thread.
        #[allow(unsafe_code)]
        unsafe {
            shared.write(3, &[1.0, 2.0])
        };
    }
}
