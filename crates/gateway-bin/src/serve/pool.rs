//! The embed pool: a fixed set of threads for every job that may run the
//! embedding model (semantic writes, imports, backfill). Its queue is
//! bounded; when it is full a job is refused at once ([`PoolError::Full`],
//! 503 with a retry hint at the HTTP layer) instead of queueing forever.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, TrySendError};
use parking_lot::Mutex;
use serde::Serialize;
use tokio::sync::oneshot;

type Task = Box<dyn FnOnce() + Send>;

/// Why a job was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PoolError {
    #[error("the embed pool is busy ({workers} workers, {queue} queued); retry shortly")]
    Full { workers: usize, queue: usize },
    #[error("the embed pool is shut down")]
    Closed,
    #[error("the job stopped without an answer (it panicked)")]
    Lost,
}

#[derive(Debug, Default)]
struct Counters {
    accepted: AtomicU64,
    refused: AtomicU64,
    completed: AtomicU64,
    panicked: AtomicU64,
    running: AtomicUsize,
    queued: AtomicUsize,
}

/// A snapshot for `/api/health`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PoolStats {
    pub(crate) workers: usize,
    pub(crate) queue_capacity: usize,
    pub(crate) running: usize,
    pub(crate) queued: usize,
    pub(crate) accepted: u64,
    pub(crate) refused: u64,
    pub(crate) completed: u64,
    pub(crate) panicked: u64,
}

/// The bounded pool.
pub(crate) struct EmbedPool {
    sender: Mutex<Option<Sender<Task>>>,
    handles: Mutex<Vec<JoinHandle<()>>>,
    counters: Arc<Counters>,
    workers: usize,
    queue: usize,
}

impl std::fmt::Debug for EmbedPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbedPool").field("stats", &self.stats()).finish()
    }
}

impl EmbedPool {
    /// Starts `workers` threads named `cairn-embed-N` behind a queue of `queue` jobs
    /// (0: a job is taken only when a worker is idle).
    pub(crate) fn new(workers: usize, queue: usize) -> std::io::Result<Self> {
        let workers = workers.max(1);
        // Every idle worker waits on the channel itself, so a job wakes
        // exactly one of them.
        let (sender, receiver) = crossbeam_channel::bounded::<Task>(queue);
        let counters = Arc::new(Counters::default());
        let mut handles = Vec::with_capacity(workers);
        for index in 0..workers {
            let receiver = receiver.clone();
            handles.push(
                std::thread::Builder::new().name(format!("cairn-embed-{index}")).spawn(move || worker(&receiver))?,
            );
        }
        Ok(Self { sender: Mutex::new(Some(sender)), handles: Mutex::new(handles), counters, workers, queue })
    }

    /// Hands `job` to the pool, or refuses it at once when the pool is full.
    /// The receiver answers when the job has run.
    pub(crate) fn try_submit<T, F>(&self, job: F) -> Result<oneshot::Receiver<T>, PoolError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let counters = Arc::clone(&self.counters);
        let task: Task = Box::new(move || {
            counters.queued.fetch_sub(1, Ordering::Relaxed);
            counters.running.fetch_add(1, Ordering::Relaxed);
            match std::panic::catch_unwind(AssertUnwindSafe(job)) {
                Ok(value) => {
                    let _ = reply.send(value);
                    counters.completed.fetch_add(1, Ordering::Relaxed);
                }
                Err(_) => {
                    counters.panicked.fetch_add(1, Ordering::Relaxed);
                    tracing::error!("an embed pool job panicked");
                }
            }
            counters.running.fetch_sub(1, Ordering::Relaxed);
        });
        let sender = self.sender.lock();
        let Some(sender) = sender.as_ref() else { return Err(PoolError::Closed) };
        self.counters.queued.fetch_add(1, Ordering::Relaxed);
        match sender.try_send(task) {
            Ok(()) => {
                self.counters.accepted.fetch_add(1, Ordering::Relaxed);
                Ok(answer)
            }
            Err(error) => {
                self.counters.queued.fetch_sub(1, Ordering::Relaxed);
                match error {
                    TrySendError::Full(_) => {
                        self.counters.refused.fetch_add(1, Ordering::Relaxed);
                        Err(PoolError::Full { workers: self.workers, queue: self.queue })
                    }
                    TrySendError::Disconnected(_) => Err(PoolError::Closed),
                }
            }
        }
    }

    /// Submits `job` and waits for its answer without blocking the executor.
    pub(crate) async fn run<T, F>(&self, job: F) -> Result<T, PoolError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        self.try_submit(job)?.await.map_err(|_| PoolError::Lost)
    }

    pub(crate) fn stats(&self) -> PoolStats {
        let counters = &self.counters;
        PoolStats {
            workers: self.workers,
            queue_capacity: self.queue,
            running: counters.running.load(Ordering::Relaxed),
            queued: counters.queued.load(Ordering::Relaxed),
            accepted: counters.accepted.load(Ordering::Relaxed),
            refused: counters.refused.load(Ordering::Relaxed),
            completed: counters.completed.load(Ordering::Relaxed),
            panicked: counters.panicked.load(Ordering::Relaxed),
        }
    }

    /// Stops taking jobs, lets the queued ones finish, and joins the threads.
    pub(crate) fn shutdown(&self) {
        drop(self.sender.lock().take());
        for handle in self.handles.lock().drain(..) {
            let _ = handle.join();
        }
    }
}

fn worker(receiver: &Receiver<Task>) {
    // Ends once the sender is dropped and the queue is empty.
    for task in receiver {
        task();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn a_full_pool_refuses_and_recovers() {
        let pool = EmbedPool::new(1, 1).unwrap();
        let (release, gate) = mpsc::channel::<()>();
        let (started_tx, started) = mpsc::channel::<()>();
        let first = pool
            .try_submit(move || {
                started_tx.send(()).unwrap();
                gate.recv().unwrap();
                1
            })
            .unwrap();
        started.recv().unwrap();
        let second = pool.try_submit(|| 2).unwrap();
        assert_eq!(pool.try_submit(|| 3).unwrap_err(), PoolError::Full { workers: 1, queue: 1 });
        let stats = pool.stats();
        assert_eq!((stats.running, stats.queued, stats.refused), (1, 1, 1));
        release.send(()).unwrap();
        assert_eq!(first.blocking_recv().unwrap(), 1);
        assert_eq!(second.blocking_recv().unwrap(), 2);
        assert_eq!(pool.try_submit(|| 4).unwrap().blocking_recv().unwrap(), 4);
        pool.shutdown();
        assert_eq!(pool.try_submit(|| 5).unwrap_err(), PoolError::Closed);
    }

    #[test]
    fn a_panicking_job_loses_its_answer_but_not_the_worker() {
        let pool = EmbedPool::new(1, 4).unwrap();
        let answer = pool.try_submit(|| -> u8 { panic!("boom") }).unwrap();
        assert!(answer.blocking_recv().is_err());
        assert_eq!(pool.try_submit(|| 7).unwrap().blocking_recv().unwrap(), 7);
        assert_eq!(pool.stats().panicked, 1);
        pool.shutdown();
    }

    #[test]
    fn shutdown_finishes_queued_jobs() {
        let pool = EmbedPool::new(2, 16).unwrap();
        let done = Arc::new(AtomicUsize::new(0));
        let receivers: Vec<_> = (0..10)
            .map(|_| {
                let done = Arc::clone(&done);
                pool.try_submit(move || done.fetch_add(1, Ordering::SeqCst)).unwrap()
            })
            .collect();
        pool.shutdown();
        assert_eq!(done.load(Ordering::SeqCst), 10);
        assert_eq!(receivers.len(), 10);
    }
}
