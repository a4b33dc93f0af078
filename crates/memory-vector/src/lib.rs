//! Cairn's vector retrieval engine.
//!
//! The part of recall that runs on every message: a [`VectorIndex`] seam
//! with an exact implementation ([`FlatIndex`], a vectorised scan that is
//! also the oracle for recall tests) and an approximate one ([`HnswIndex`],
//! a hierarchical navigable small-world graph), an [`AutoIndex`] that picks between them by size and can
//! be shared between threads, and the ranking math of episodic memory:
//! [`decay_score`], [`admit`] and [`mmr`].
//!
//! Ids are the caller's stable `u64` row ids. Vectors are validated and
//! L2-normalised on the way in, so every score is a cosine.
//!
//! ```
//! use cairn_memory_vector::{AutoIndex, IndexConfig, admit, decay_score};
//!
//! let index = AutoIndex::new(IndexConfig::new(3))?;
//! index.add(1, &[1.0, 0.0, 0.0])?;
//! index.add(2, &[0.9, 0.1, 0.0])?;
//! index.add(3, &[0.0, 0.0, 1.0])?;
//! let hits = index.search(&[1.0, 0.05, 0.0], 2)?;
//! assert_eq!(hits.iter().map(|h| h.id).collect::<Vec<_>>(), vec![1, 2]);
//!
//! // Admission reads the raw cosine; ordering uses the decayed score.
//! assert!(admit(hits[0].cosine, 120));
//! let score = decay_score(hits[0].cosine, 0.8, 30.0);
//! assert!(score < hits[0].cosine);
//! # Ok::<(), cairn_memory_vector::VectorError>(())
//! ```
//!
//! What this crate deliberately does not do: store rows or texts (that is
//! `memory-core`'s SQLite), embed text (the `embedder` crate), or fall back
//! to keyword search (the last rung of the ladder lives with the rows). It
//! performs no I/O except reading and writing the snapshot and vector
//! files it is pointed at.

#![warn(missing_docs)]

mod auto;
pub mod constants;
mod distance;
mod error;
mod flat;
mod graph;
mod hnsw;
mod index;
mod quant;
mod ranking;
mod snapshot;
mod vector_file;

pub use auto::{AutoBackend, AutoIndex, OpenOutcome};
pub use distance::{dot, kernel_name};
pub use error::{Result, VectorError};
pub use flat::FlatIndex;
pub use hnsw::{HnswConfig, HnswIndex, IndexConfig};
pub use index::{Hit, VectorIndex};
pub use ranking::{
    DecayInput, MmrCandidate, RelevanceGate, WordSet, admit, decay_score, jaccard, mmr, rank_by_decay,
    relevance_threshold,
};
pub use snapshot::{SnapshotExpectation, SnapshotHeader, SnapshotKind, id_checksum, read_header};
pub use vector_file::{VECTOR_FILE_FORMAT_VERSION, VectorFile, VectorFileWriter};
