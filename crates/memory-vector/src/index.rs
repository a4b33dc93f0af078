//! The [`VectorIndex`] seam and the types its methods share.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::path::Path;

use crate::error::Result;
use crate::snapshot::{SnapshotExpectation, SnapshotHeader};

/// One search result: a caller row id and its cosine similarity to the query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// The caller's stable row id, as passed to [`VectorIndex::add`].
    pub id: u64,
    /// Cosine similarity between the (normalised) query and the stored vector.
    pub cosine: f32,
}

impl Hit {
    /// Orders hits best first: higher cosine, then the smaller id on ties, so
    /// every index returns the same order for the same scores.
    pub fn rank_cmp(&self, other: &Hit) -> Ordering {
        other.cosine.total_cmp(&self.cosine).then(self.id.cmp(&other.id))
    }
}

/// A searchable set of unit vectors keyed by the caller's `u64` row ids.
///
/// Vectors are validated (dimension, finite components, non-zero length)
/// and L2-normalised on the way in, so scores are cosines. Implementations:
/// [`FlatIndex`](crate::FlatIndex) (exact), [`HnswIndex`](crate::HnswIndex)
/// (approximate), and [`AutoIndex`](crate::AutoIndex), which picks between
/// them by size and can be shared between threads behind `&self`.
pub trait VectorIndex: Send + Sync {
    /// Number of components every vector of this index has.
    fn dim(&self) -> usize;

    /// Number of live (added and not removed) vectors.
    fn len(&self) -> usize;

    /// Whether the index holds no live vector.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `id` is live in the index.
    fn contains(&self, id: u64) -> bool;

    /// The live ids, in no particular order.
    fn ids(&self) -> Vec<u64>;

    /// Adds `vector` under `id`. Fails with a typed error, leaving the index
    /// unchanged, on a wrong dimension, a non-finite or zero vector, or an id
    /// that is already live.
    fn add(&mut self, id: u64, vector: &[f32]) -> Result<()>;

    /// Adds many vectors. The default adds them one by one and stops at the
    /// first error (the items before it stay added); implementations may
    /// validate everything first and build in parallel.
    fn add_batch(&mut self, items: &[(u64, &[f32])]) -> Result<()> {
        for (id, vector) in items {
            self.add(*id, vector)?;
        }
        Ok(())
    }

    /// Removes `id`; fails with [`VectorError::UnknownId`](crate::VectorError::UnknownId)
    /// when it is not live. Once this returns, searches never return `id`.
    fn remove(&mut self, id: u64) -> Result<()>;

    /// The `k` live vectors most similar to `query`, best first (ties broken
    /// by smaller id). Returns `min(k, len())` hits for exact indexes; the
    /// approximate index guarantees the same count by falling back to an
    /// exact scan when its graph search comes up short.
    fn search(&self, query: &[f32], k: usize) -> Result<Vec<Hit>>;

    /// Writes the index state to `path` atomically (temporary file in the
    /// same directory, then rename), with a header naming the embedding
    /// `space`, the live count and the id checksum.
    fn snapshot(&self, path: &Path, space: &str) -> Result<SnapshotHeader>;

    /// Loads a snapshot written by [`snapshot`](Self::snapshot), refusing it
    /// with [`VectorError::SnapshotMismatch`](crate::VectorError::SnapshotMismatch) when
    /// its header does not match `expected` (the caller then rebuilds from
    /// its rows), or [`VectorError::CorruptSnapshot`](crate::VectorError::CorruptSnapshot)
    /// when the file is damaged.
    fn restore(path: &Path, expected: &SnapshotExpectation) -> Result<Self>
    where
        Self: Sized;
}

/// Wrapper ordering hits so that the *worst* is the heap's maximum.
#[derive(PartialEq)]
struct WorstFirst(Hit);

impl Eq for WorstFirst {}

impl PartialOrd for WorstFirst {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for WorstFirst {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.rank_cmp(&other.0)
    }
}

/// Keeps the best `k` hits seen, in `O(n log k)`.
pub(crate) struct TopK {
    k: usize,
    heap: BinaryHeap<WorstFirst>,
}

impl TopK {
    pub(crate) fn new(k: usize) -> Self {
        TopK { k, heap: BinaryHeap::with_capacity(k.saturating_add(1).min(4096)) }
    }

    #[inline]
    pub(crate) fn push(&mut self, hit: Hit) {
        if self.k == 0 {
            return;
        }
        if self.heap.len() < self.k {
            self.heap.push(WorstFirst(hit));
        } else if let Some(worst) = self.heap.peek()
            && hit.rank_cmp(&worst.0) == Ordering::Less
        {
            self.heap.pop();
            self.heap.push(WorstFirst(hit));
        }
    }

    /// Score a new hit must beat to enter, once the heap is full.
    #[inline]
    pub(crate) fn threshold(&self) -> Option<f32> {
        if self.heap.len() < self.k { None } else { self.heap.peek().map(|w| w.0.cosine) }
    }

    pub(crate) fn merge(&mut self, other: TopK) {
        for hit in other.heap {
            self.push(hit.0);
        }
    }

    pub(crate) fn into_sorted(self) -> Vec<Hit> {
        let mut hits: Vec<Hit> = self.heap.into_iter().map(|w| w.0).collect();
        hits.sort_by(Hit::rank_cmp);
        hits
    }
}

#[cfg(test)]
fn top_k_of_scores(ids: &[u64], scores: &[f32], k: usize) -> TopK {
    let mut top = TopK::new(k);
    for (&id, &cosine) in ids.iter().zip(scores) {
        top.push(Hit { id, cosine });
    }
    top
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_k_keeps_best_and_breaks_ties_by_smaller_id() {
        let ids = [5, 4, 3, 2, 1, 9];
        let scores = [0.5, 0.9, 0.5, 0.1, 0.5, 0.9];
        let hits = top_k_of_scores(&ids, &scores, 3).into_sorted();
        let got: Vec<u64> = hits.iter().map(|h| h.id).collect();
        assert_eq!(got, vec![4, 9, 1]);
        assert_eq!(top_k_of_scores(&ids, &scores, 0).into_sorted(), vec![]);
        assert_eq!(top_k_of_scores(&ids, &scores, 100).into_sorted().len(), 6);
    }
}
