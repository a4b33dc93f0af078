//! Coalescing concurrent single-text calls into batched forward passes.

use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, SyncSender};

use parking_lot::Mutex;

use crate::backend::EmbeddingBackend;
use crate::error::{EmbedError, Result};

/// One waiting `embed` call.
struct Job {
    text: String,
    reply: SyncSender<Result<Vec<f32>>>,
}

/// An [`EmbeddingBackend`] that runs every single-text [`embed`] call on
/// one worker thread, which takes whatever calls are waiting (up to
/// `max_batch`) and embeds them in one [`embed_batch`] of the inner
/// backend. An idle embedder adds no delay (a lone call is a batch of one);
/// under concurrent load, calls that arrive during a forward pass share the
/// next one, so a model's weights are streamed once per batch instead of
/// once per text, and only one forward pass uses the CPU's threads at a
/// time. Results are the inner backend's, text for text; when a batch
/// fails, its texts are retried one by one so each caller gets its own
/// outcome.
///
/// [`embed`]: EmbeddingBackend::embed
/// [`embed_batch`]: EmbeddingBackend::embed_batch
///
/// ```
/// use std::sync::Arc;
/// use cairn_embedder::{BatchingEmbedder, EmbeddingBackend, HashEmbedder};
/// let inner = Arc::new(HashEmbedder::new(32));
/// let batching = BatchingEmbedder::new(inner.clone(), 16);
/// assert_eq!(batching.embed("the cat").unwrap(), inner.embed("the cat").unwrap());
/// ```
pub struct BatchingEmbedder {
    inner: Arc<dyn EmbeddingBackend>,
    jobs: Mutex<Option<SyncSender<Job>>>,
}

impl std::fmt::Debug for BatchingEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchingEmbedder").field("model_id", &self.inner.model_id()).finish()
    }
}

/// Calls that may wait for the worker before `embed` blocks on sending.
const QUEUE: usize = 1_024;

impl BatchingEmbedder {
    /// Batches calls to `inner`, at most `max_batch` texts per pass (at least 1).
    pub fn new(inner: Arc<dyn EmbeddingBackend>, max_batch: usize) -> Self {
        let (sender, receiver) = mpsc::sync_channel::<Job>(QUEUE);
        let worker = Arc::clone(&inner);
        let max_batch = max_batch.max(1);
        let spawned = std::thread::Builder::new()
            .name("cairn-embed-batch".to_owned())
            .spawn(move || run(&*worker, &receiver, max_batch));
        let jobs = match spawned {
            Ok(_) => Some(sender),
            Err(error) => {
                tracing::warn!(%error, "could not start the embedding batch worker; embedding calls run inline");
                None
            }
        };
        Self { inner, jobs: Mutex::new(jobs) }
    }
}

fn run(inner: &dyn EmbeddingBackend, receiver: &Receiver<Job>, max_batch: usize) {
    while let Ok(first) = receiver.recv() {
        let mut jobs = vec![first];
        while jobs.len() < max_batch {
            match receiver.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let texts: Vec<&str> = jobs.iter().map(|job| job.text.as_str()).collect();
        match inner.embed_batch(&texts) {
            Ok(vectors) if vectors.len() == jobs.len() => {
                for (job, vector) in jobs.into_iter().zip(vectors) {
                    let _ = job.reply.send(Ok(vector));
                }
            }
            _ if jobs.len() > 1 => {
                // One bad text must not fail its neighbours: retry alone.
                for job in jobs {
                    let _ = job.reply.send(inner.embed(&job.text));
                }
            }
            Ok(vectors) => {
                let reason = format!("the backend returned {} vectors for 1 text", vectors.len());
                let _ = jobs.remove(0).reply.send(Err(EmbedError::InvalidInput { reason }));
            }
            Err(error) => {
                let _ = jobs.remove(0).reply.send(Err(error));
            }
        }
    }
}

impl EmbeddingBackend for BatchingEmbedder {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn is_ready(&self) -> bool {
        self.inner.is_ready()
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.inner.embed_batch(texts)
    }

    fn embed(&self, text: &str) -> Result<Vec<f32>> {
        let sender = self.jobs.lock().clone();
        let Some(sender) = sender else { return self.inner.embed(text) };
        let (reply, answer) = mpsc::sync_channel(1);
        if let Err(mpsc::SendError(job)) = sender.send(Job { text: text.to_owned(), reply }) {
            // The worker is gone (it panicked): embed inline from now on.
            *self.jobs.lock() = None;
            return self.inner.embed(&job.text);
        }
        match answer.recv() {
            Ok(result) => result,
            Err(_) => {
                *self.jobs.lock() = None;
                self.inner.embed(text)
            }
        }
    }

    fn close(&self) {
        self.inner.close();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::HashEmbedder;

    /// A hash embedder that records batch sizes, holds its first batch until
    /// `expected` calls have been submitted, and refuses texts containing "bad".
    struct Recording {
        inner: HashEmbedder,
        batches: parking_lot::Mutex<Vec<usize>>,
        submitted: AtomicUsize,
        expected: usize,
    }

    impl EmbeddingBackend for Recording {
        fn model_id(&self) -> &str {
            "recording"
        }
        fn dim(&self) -> usize {
            self.inner.dim()
        }
        fn is_ready(&self) -> bool {
            true
        }
        fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
            let first = self.batches.lock().is_empty();
            self.batches.lock().push(texts.len());
            if first {
                while self.submitted.load(Ordering::SeqCst) < self.expected {
                    std::thread::sleep(Duration::from_millis(1));
                }
                // Let the last submitters reach the queue.
                std::thread::sleep(Duration::from_millis(50));
            }
            if texts.iter().any(|text| text.contains("bad")) {
                return Err(EmbedError::InvalidInput { reason: "bad text".to_owned() });
            }
            self.inner.embed_batch(texts)
        }
    }

    #[test]
    fn concurrent_calls_share_batches_and_get_their_own_vectors() {
        let threads = 8;
        let recording = Arc::new(Recording {
            inner: HashEmbedder::new(16),
            batches: Default::default(),
            submitted: AtomicUsize::new(0),
            expected: threads,
        });
        let batching = BatchingEmbedder::new(recording.clone(), 32);
        std::thread::scope(|scope| {
            for i in 0..threads {
                let (batching, recording) = (&batching, &recording);
                scope.spawn(move || {
                    let text = if i == 3 { "a bad text".to_owned() } else { format!("text number {i}") };
                    recording.submitted.fetch_add(1, Ordering::SeqCst);
                    let result = batching.embed(&text);
                    if i == 3 {
                        assert!(matches!(result, Err(EmbedError::InvalidInput { .. })), "{result:?}");
                    } else {
                        assert_eq!(result.unwrap(), HashEmbedder::new(16).embed(&text).unwrap());
                    }
                });
            }
        });
        let batches = recording.batches.lock().clone();
        let texts: usize = batches.iter().sum();
        assert!(texts >= threads, "{batches:?}");
        assert!(batches.iter().any(|size| *size > 1), "calls waiting during a pass share the next: {batches:?}");
    }

    #[test]
    fn a_lone_call_is_a_batch_of_one_and_batches_pass_through() {
        let recording = Arc::new(Recording {
            inner: HashEmbedder::new(8),
            batches: Default::default(),
            submitted: AtomicUsize::new(1),
            expected: 0,
        });
        let batching = BatchingEmbedder::new(recording.clone(), 4);
        assert_eq!(batching.embed("alone").unwrap(), HashEmbedder::new(8).embed("alone").unwrap());
        assert_eq!(batching.embed_batch(&["x", "y"]).unwrap().len(), 2);
        assert_eq!(*recording.batches.lock(), vec![1, 2]);
        assert_eq!((batching.model_id(), batching.dim(), batching.is_ready()), ("recording", 8, true));
    }
}
