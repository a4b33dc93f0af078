//! Episodic memory: conversation fragments written safely and found again.
//!
//! A write is validated (10–2,000 characters, importance in `[0, 1]`,
//! sanitised tags), screened for injected instructions *before* it is
//! embedded, deduplicated against active rows (same text, or cosine above
//! 0.88 — tombstoned rows never count), and capped at 10,000 active rows
//! (lowest importance, then oldest, are tombstoned). Every outcome is typed
//! and leaves an audit row.
//!
//! Rows live in `memory.db` with their vector (or NULL, filled later by
//! [`MemoryDb::backfill_missing_embeddings`]) and the embedding space it was
//! computed in. An in-memory [`cairn_memory_vector::AutoIndex`] holds the
//! vectors of the active rows of the current space; the
//! `episodic_revision` counter, bumped by every change in the same
//! transaction, tells each process when its index has to catch up with
//! the table.
//!
//! Search ([`MemoryDb::search_episodic`]) runs one of three modes:
//! [`RetrievalMode::Hybrid`] (default: the union of the vector top-N and
//! the bm25 top-N, fused by a weighted sum of the cosine and the
//! best-normalised bm25, lifted for a speaker or a time window the query
//! names and for the sitting of the best hits, the best hit's thread of
//! conversation lifted with it, then MMR; importance × age and neighbouring
//! turns are available with weights that default to 0),
//! [`RetrievalMode::PureVector`] (the specification's pipeline exactly) and
//! [`RetrievalMode::Keyword`]. Without a query vector every mode answers
//! from keywords, so search never stops working while a model loads or
//! changes. Under the relevance filter (the context block) the embedding
//! model's gate may abstain: nothing is admitted when no candidate reaches
//! its floor ([`cairn_memory_vector::RelevanceGate::abstain_below`]).
//!
//! The whole layer is here: its types and rules, its state ([`EpisodicState`],
//! held by the store handle), and [`Episodic`], on which every episodic
//! method of [`MemoryDb`](crate::MemoryDb) runs (`write.rs`, `search.rs`,
//! `index.rs`, `keyword.rs`, `context.rs`). The layer reaches the handle
//! through [`EpisodicHost`] and never names it.

pub(crate) mod context;
pub(crate) mod index;
pub(crate) mod keyword;
pub(crate) mod search;
pub(crate) mod signals;
pub(crate) mod write;

#[cfg(test)]
mod tests;

pub use context::EpisodicContext;
pub(crate) use index::EpisodicState;
pub use search::sanitize_fts_query;

use std::path::Path;
use std::sync::Arc;

use cairn_embedder::EmbeddingBackend;
use parking_lot::MutexGuard;
use serde::Serialize;

use crate::constants::{
    EPISODIC_CONTEXT_LIMIT, EPISODIC_DEFAULT_IMPORTANCE, EPISODIC_NEIGHBOUR_WEIGHT, EPISODIC_SPEAKER_BOOST,
    EPISODIC_TIME_BOOST, RRF_K, WEIGHTED_FUSION_VECTOR_WEIGHT,
};
use crate::error::{MemoryError, RefusedWrite, Rejected, Result};
use crate::store::Backend;
use crate::types::Source;

/// The episodic settings of a [`MemoryConfig`](crate::MemoryConfig), validated.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EpisodicConfig {
    pub(crate) cap: usize,
    pub(crate) full_vectors_max: usize,
    pub(crate) mode: RetrievalMode,
    pub(crate) fusion: Fusion,
    pub(crate) prior_weight: f64,
    /// [`EPISODIC_KEYWORD_SEARCH_BESIDE_ROWS`](crate::constants::EPISODIC_KEYWORD_SEARCH_BESIDE_ROWS),
    /// lowered by tests that take the thread's path on a small store.
    pub(crate) keyword_beside_rows: usize,
}

/// What the episodic layer needs of the store handle that holds its state
/// ([`MemoryDb`](crate::MemoryDb)): the rows, the embedder, the episodic lock
/// and the refusals every write path shares.
pub(crate) trait EpisodicHost {
    /// The rows of the store, behind the storage seam.
    fn rows(&self) -> &dyn Backend;
    /// What a background thread reads the store through.
    fn background_reader(&self) -> Arc<dyn Backend>;
    /// The configured embedder, if any.
    fn embedder(&self) -> Option<Arc<dyn EmbeddingBackend>>;
    /// The configured embedder and its space generation, read together.
    fn embedder_with_generation(&self) -> (Option<Arc<dyn EmbeddingBackend>>, u64);
    /// Replaces the embedder; answers the new space generation.
    fn set_embedder(&self, embedder: Option<Arc<dyn EmbeddingBackend>>) -> u64;
    /// The vector space of the configured embedder.
    fn space(&self) -> Option<String>;
    /// The current space generation.
    fn space_generation(&self) -> u64;
    /// Path of the database file.
    fn path(&self) -> &Path;
    /// Whether the backend searches keywords itself.
    fn has_own_keyword_index(&self) -> bool;
    /// The episodic lock: held across a write's transaction and the index
    /// updates after its commit, and by index catch-ups.
    fn lock_episodic(&self) -> MutexGuard<'_, ()>;
    /// The episodic lock if no other thread holds it.
    fn try_lock_episodic(&self) -> Option<MutexGuard<'_, ()>>;
    /// Refuses every write of a damaged store.
    fn refuse_when_damaged(&self) -> Result<()>;
    /// Records a refused write and hands back the error to return.
    fn refuse(&self, write: RefusedWrite<'_>, rejected: Rejected) -> MemoryError;
    /// The refusal of a text a forget removed.
    fn refuse_forgotten(&self, text: &str, key: Option<&str>) -> Result<std::result::Result<(), Rejected>>;
    /// Brings the semantic snapshot in step, when a search has built one.
    fn catch_up_semantic(&self) -> Result<()>;
}

/// The episodic layer of one store: its state and settings, and the handle
/// that holds them. Every episodic method of [`MemoryDb`](crate::MemoryDb)
/// runs here ([`write`], [`search`], [`index`], [`keyword`], [`context`]).
pub(crate) struct Episodic<'a> {
    /// The handle; the layer's files call its refusals and the semantic
    /// catch-up through it directly.
    host: &'a dyn EpisodicHost,
    pub(crate) episodic: &'a EpisodicState,
    pub(crate) episodic_config: EpisodicConfig,
}

impl<'a> Episodic<'a> {
    pub(crate) fn new(host: &'a dyn EpisodicHost, state: &'a EpisodicState, config: EpisodicConfig) -> Self {
        Episodic { host, episodic: state, episodic_config: config }
    }

    pub(crate) fn rows(&self) -> &dyn Backend {
        self.host.rows()
    }

    pub(crate) fn background_reader(&self) -> Arc<dyn Backend> {
        self.host.background_reader()
    }

    pub(crate) fn embedder(&self) -> Option<Arc<dyn EmbeddingBackend>> {
        self.host.embedder()
    }

    pub(crate) fn embedder_with_generation(&self) -> (Option<Arc<dyn EmbeddingBackend>>, u64) {
        self.host.embedder_with_generation()
    }

    pub(crate) fn set_embedder(&self, embedder: Option<Arc<dyn EmbeddingBackend>>) -> u64 {
        self.host.set_embedder(embedder)
    }

    pub(crate) fn space(&self) -> Option<String> {
        self.host.space()
    }

    pub(crate) fn space_generation(&self) -> u64 {
        self.host.space_generation()
    }

    pub(crate) fn path(&self) -> &Path {
        self.host.path()
    }

    pub(crate) fn has_own_keyword_index(&self) -> bool {
        self.host.has_own_keyword_index()
    }

    pub(crate) fn lock_episodic(&self) -> MutexGuard<'a, ()> {
        self.host.lock_episodic()
    }

    pub(crate) fn try_lock_episodic(&self) -> Option<MutexGuard<'a, ()>> {
        self.host.try_lock_episodic()
    }

    pub(crate) fn refuse_when_damaged(&self) -> Result<()> {
        self.host.refuse_when_damaged()
    }
}

/// One episodic row to write. Built with [`NewEpisode::new`] and the
/// builder methods.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEpisode {
    /// The fragment (10–2,000 characters after trimming).
    pub text: String,
    /// Importance, clamped to `[0, 1]` (NaN is refused).
    pub importance: f64,
    /// Tags; sanitised (lower case, `[a-z0-9_.:-]`, ≤ 32 characters, ≤ 10 tags).
    pub tags: Vec<String>,
    /// When it happened (Unix milliseconds); now when `None`.
    pub created_at: Option<i64>,
    /// The caller's reference to where it came from (e.g. `conv-26:D1:3`).
    pub source_ref: Option<String>,
    /// Store without a vector now; [`crate::MemoryDb::backfill_missing_embeddings`] adds it.
    pub defer_embedding: bool,
    /// Import mode: a similar row or a full store refuses the new row; it
    /// never evicts.
    pub preserve: bool,
    /// Who is writing.
    pub source: Source,
    /// Where the row belongs (global unless set).
    pub scope: crate::scope::Scope,
    /// Where consolidation found it (checked like a fact's evidence).
    pub evidence: Option<crate::types::Evidence>,
}

impl NewEpisode {
    /// A row with default importance (0.5), no tags, created now.
    pub fn new(text: impl Into<String>) -> Self {
        NewEpisode {
            text: text.into(),
            importance: EPISODIC_DEFAULT_IMPORTANCE,
            tags: Vec::new(),
            created_at: None,
            source_ref: None,
            defer_embedding: false,
            preserve: false,
            source: Source::Consolidation,
            scope: crate::scope::Scope::Global,
            evidence: None,
        }
    }

    /// Sets where the row belongs.
    pub fn scope(mut self, scope: crate::scope::Scope) -> Self {
        self.scope = scope;
        self
    }

    /// Sets the importance.
    pub fn importance(mut self, importance: f64) -> Self {
        self.importance = importance;
        self
    }

    /// Sets the tags.
    pub fn tags<I: IntoIterator<Item = S>, S: Into<String>>(mut self, tags: I) -> Self {
        self.tags = tags.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the creation time (Unix milliseconds).
    pub fn created_at(mut self, created_at: i64) -> Self {
        self.created_at = Some(created_at);
        self
    }

    /// Sets the source reference.
    pub fn source_ref(mut self, source_ref: impl Into<String>) -> Self {
        self.source_ref = Some(source_ref.into());
        self
    }

    /// Defers embedding to a later backfill.
    pub fn defer_embedding(mut self, defer: bool) -> Self {
        self.defer_embedding = defer;
        self
    }

    /// Turns on import (preservation) mode.
    pub fn preserve(mut self, preserve: bool) -> Self {
        self.preserve = preserve;
        self
    }

    /// Sets who is writing.
    pub fn source(mut self, source: Source) -> Self {
        self.source = source;
        self
    }

    /// Sets the evidence consolidation found for it.
    pub fn evidence(mut self, evidence: crate::types::Evidence) -> Self {
        self.evidence = Some(evidence);
        self
    }
}

/// What an episodic write did. Refusals by a rule are
/// [`crate::MemoryError::Rejected`] instead.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EpisodicOutcome {
    /// Stored under `id`.
    Inserted {
        /// The new row's id.
        id: i64,
        /// Whether a vector in the current space was stored with it.
        has_vector: bool,
        /// Rows tombstoned to keep the store under its cap.
        evicted: Vec<i64>,
    },
    /// An active row already says this; nothing was stored.
    Duplicate {
        /// The active row it duplicates.
        of: i64,
        /// Cosine to that row (1 for the same text).
        cosine: f32,
    },
    /// Import mode and the store is at its cap; nothing was stored.
    StoreFull {
        /// The cap.
        cap: usize,
    },
}

/// A stored episodic row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EpisodicRecord {
    /// Where the row belongs.
    pub scope: crate::scope::Scope,
    /// Row id.
    pub id: i64,
    /// The fragment.
    pub text: String,
    /// Sanitised tags.
    pub tags: Vec<String>,
    /// Importance in `[0, 1]`.
    pub importance: f64,
    /// When it happened (Unix milliseconds).
    pub created_at: i64,
    /// When a search last returned it (Unix milliseconds).
    pub last_accessed: Option<i64>,
    /// The caller's reference.
    pub source_ref: Option<String>,
    /// Who wrote it.
    pub source: String,
    /// Whether it has a vector in the current embedding space.
    pub has_vector: bool,
    /// Where consolidation found it; `None` for rows written otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<crate::types::Evidence>,
}

/// How candidates are found and ranked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RetrievalMode {
    /// Vector and keyword candidates, fused, then (weighted) importance × age and MMR.
    #[default]
    Hybrid,
    /// The specification's pipeline: vector candidates only, scored
    /// `cos × (0.7 + 0.3 × importance) × exp(−0.03 × days)`, then MMR.
    PureVector,
    /// FTS5 bm25 candidates only.
    Keyword,
}

impl RetrievalMode {
    /// Parses `hybrid`, `vector` (or `pure_vector`) and `keyword`.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "hybrid" => RetrievalMode::Hybrid,
            "vector" | "pure_vector" => RetrievalMode::PureVector,
            "keyword" => RetrievalMode::Keyword,
            _ => return None,
        })
    }
}

/// How the vector and keyword lists are combined in hybrid mode.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Fusion {
    /// Reciprocal-rank fusion: `Σ 1 / (k + rank)` over the lists a row is in.
    Rrf {
        /// The `k` constant.
        k: f64,
    },
    /// `w × cosine + (1 − w) × bm25 / best bm25 of the query`.
    Weighted {
        /// Weight of the cosine.
        vector_weight: f64,
    },
}

impl Default for Fusion {
    /// The weighted sum with [`WEIGHTED_FUSION_VECTOR_WEIGHT`]: chosen over
    /// RRF by leave-one-conversation-out evaluation (`BENCHMARKS.md`).
    fn default() -> Self {
        Fusion::Weighted { vector_weight: WEIGHTED_FUSION_VECTOR_WEIGHT }
    }
}

impl Fusion {
    /// Parses `rrf` (k 60), `rrf:K`, `weighted` (the default weight) and
    /// `weighted:W` (`W` in `[0, 1]`); `None` for anything else.
    ///
    /// ```
    /// use cairn_memory_core::Fusion;
    /// assert_eq!(Fusion::parse("rrf:10"), Some(Fusion::Rrf { k: 10.0 }));
    /// assert_eq!(Fusion::parse("weighted:0.5"), Some(Fusion::Weighted { vector_weight: 0.5 }));
    /// assert_eq!(Fusion::parse("weighted:1.5"), None);
    /// ```
    pub fn parse(text: &str) -> Option<Self> {
        let (name, value) = match text.split_once(':') {
            Some((name, value)) => (name, Some(value.parse::<f64>().ok()?)),
            None => (text, None),
        };
        match (name, value) {
            ("rrf", None) => Some(Fusion::Rrf { k: RRF_K }),
            ("rrf", Some(k)) if k.is_finite() && k >= 0.0 => Some(Fusion::Rrf { k }),
            ("weighted", None) => Some(Fusion::Weighted { vector_weight: WEIGHTED_FUSION_VECTOR_WEIGHT }),
            ("weighted", Some(weight)) if (0.0..=1.0).contains(&weight) => {
                Some(Fusion::Weighted { vector_weight: weight })
            }
            _ => None,
        }
    }
}

/// A search request. [`EpisodicQuery::new`] gives the defaults: hybrid,
/// weighted-sum fusion (0.7 cosine), no importance × age, limit 8, no
/// relevance filter, MMR on, `now` = the clock.
#[derive(Debug, Clone, PartialEq)]
pub struct EpisodicQuery {
    /// Which scopes the search sees (every scope unless set).
    pub scopes: crate::scope::ScopeFilter,
    /// The query text (keywords are taken from it; it is embedded unless
    /// `vector` is given).
    pub text: String,
    /// A precomputed query vector in the current space.
    pub vector: Option<Vec<f32>>,
    /// Most results returned.
    pub limit: usize,
    /// Keep only rows admitted for a prompt (raw cosine gate or the keyword path).
    pub relevance_filter: bool,
    /// Diversify with MMR (Jaccard on word sets).
    pub mmr: bool,
    /// Hybrid mode: MMR's λ, the weight of relevance against novelty
    /// ([`crate::constants::EPISODIC_HYBRID_MMR_LAMBDA`] by default); the
    /// other modes keep the specification's 0.6.
    pub mmr_lambda: f32,
    /// "Now" for ages (Unix milliseconds); the clock when `None`.
    pub now: Option<i64>,
    /// Retrieval mode.
    pub mode: RetrievalMode,
    /// Fusion of hybrid mode.
    pub fusion: Fusion,
    /// Weight of importance × age in hybrid mode (see
    /// [`crate::constants::HYBRID_PRIOR_WEIGHT`]).
    pub prior_weight: f64,
    /// Record `last_accessed` on the returned rows (written in batches, at
    /// most a few seconds later, and when the store closes).
    pub touch: bool,
    /// Hybrid and keyword modes: a row whose `Name:` prefix names a speaker
    /// the query names scores `× (1 + speaker_boost)` (see
    /// [`crate::constants::EPISODIC_SPEAKER_BOOST`]).
    pub speaker_boost: f64,
    /// Hybrid and keyword modes: a row written within 30 minutes of a
    /// top-`limit` hit and next to it (row id ± 1) scores at least this
    /// share of the hit's score (see [`crate::constants::EPISODIC_NEIGHBOUR_WEIGHT`]).
    pub neighbour_weight: f64,
    /// Hybrid and keyword modes: a row created inside the time window the
    /// query names ("in May", "October 13, 2023", "last year") scores
    /// `× (1 + time_boost)` (see [`crate::constants::EPISODIC_TIME_BOOST`]).
    pub time_boost: f64,
    /// Under the relevance filter: the abstention floor, overriding the
    /// embedding model's ([`cairn_memory_vector::RelevanceGate::abstain_below`]).
    pub abstain_below: Option<f32>,
    /// Under the relevance filter: the abstention floor of a query that
    /// names nobody in a conversation, overriding the embedding model's
    /// ([`cairn_memory_vector::RelevanceGate::abstain_unnamed_below`]).
    pub abstain_unnamed_below: Option<f32>,
    /// Hybrid mode with a query vector: a row written within 30 minutes of one of
    /// the best [`crate::constants::EPISODIC_SESSION_ANCHORS`] rows (in the
    /// same sitting) scores `× (1 + session_boost)` (see
    /// [`crate::constants::EPISODIC_SESSION_BOOST`]).
    pub session_boost: f64,
    /// Hybrid mode with a query vector: each of the best `thread_anchors`
    /// rows lifts the same speaker's turns just before and after it in its
    /// sitting, and the answer to a question it asks, to at least
    /// `thread_weight ×` its score (see
    /// [`crate::constants::EPISODIC_THREAD_WEIGHT`]; 0 turns it off).
    pub thread_weight: f64,
    /// How many of the best rows lift their thread (at least 1; see
    /// [`crate::constants::EPISODIC_THREAD_ANCHORS`]).
    pub thread_anchors: usize,
    /// The thread lifts no row above the row ranked `thread_keep` (0: no
    /// cap; see [`crate::constants::EPISODIC_THREAD_KEEP`]).
    pub thread_keep: usize,
    /// Hybrid mode: candidates taken from each of the vector and the keyword
    /// lists before ranking (see [`crate::constants::HYBRID_CANDIDATES`]).
    pub candidates: usize,
    /// Hybrid mode, weighted fusion: bm25 is scaled by the best hit's bm25
    /// or by this share of the query's bm25 ceiling, whichever is larger
    /// (0 keeps the best hit's; see
    /// [`crate::constants::EPISODIC_KEYWORD_CEILING_SHARE`]).
    pub keyword_ceiling_share: f64,
    /// Hybrid mode, weighted fusion: a row with a cosine under this gets no
    /// keyword score unless its bm25 reaches
    /// [`crate::constants::EPISODIC_STRONG_KEYWORD_SHARE`] of the query's
    /// ceiling (see [`crate::constants::EPISODIC_KEYWORD_MIN_COSINE`]; 0
    /// turns it off).
    pub keyword_min_cosine: f64,
}

impl EpisodicQuery {
    /// The defaults for `text`.
    pub fn new(text: impl Into<String>) -> Self {
        EpisodicQuery {
            scopes: crate::scope::ScopeFilter::All,
            text: text.into(),
            vector: None,
            limit: EPISODIC_CONTEXT_LIMIT,
            relevance_filter: false,
            mmr: true,
            now: None,
            mode: RetrievalMode::Hybrid,
            fusion: Fusion::default(),
            prior_weight: crate::constants::HYBRID_PRIOR_WEIGHT,
            touch: true,
            speaker_boost: EPISODIC_SPEAKER_BOOST,
            neighbour_weight: EPISODIC_NEIGHBOUR_WEIGHT,
            time_boost: EPISODIC_TIME_BOOST,
            abstain_below: None,
            abstain_unnamed_below: None,
            session_boost: crate::constants::EPISODIC_SESSION_BOOST,
            thread_weight: crate::constants::EPISODIC_THREAD_WEIGHT,
            thread_anchors: crate::constants::EPISODIC_THREAD_ANCHORS,
            thread_keep: crate::constants::EPISODIC_THREAD_KEEP,
            candidates: crate::constants::HYBRID_CANDIDATES,
            keyword_ceiling_share: crate::constants::EPISODIC_KEYWORD_CEILING_SHARE,
            keyword_min_cosine: crate::constants::EPISODIC_KEYWORD_MIN_COSINE,
            mmr_lambda: crate::constants::EPISODIC_HYBRID_MMR_LAMBDA,
        }
    }

    /// Sets which scopes the search sees.
    pub fn scopes(mut self, scopes: crate::scope::ScopeFilter) -> Self {
        self.scopes = scopes;
        self
    }

    /// Sets the limit.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// Sets the relevance filter.
    pub fn relevance_filter(mut self, on: bool) -> Self {
        self.relevance_filter = on;
        self
    }

    /// Turns MMR on or off.
    pub fn mmr(mut self, on: bool) -> Self {
        self.mmr = on;
        self
    }

    /// Sets MMR's λ in hybrid mode (0 to 1: 1 is relevance alone).
    pub fn mmr_lambda(mut self, lambda: f32) -> Self {
        self.mmr_lambda = lambda;
        self
    }

    /// Sets "now" (Unix milliseconds).
    pub fn now(mut self, now: i64) -> Self {
        self.now = Some(now);
        self
    }

    /// Sets the mode.
    pub fn mode(mut self, mode: RetrievalMode) -> Self {
        self.mode = mode;
        self
    }

    /// Sets the fusion.
    pub fn fusion(mut self, fusion: Fusion) -> Self {
        self.fusion = fusion;
        self
    }

    /// Gives the query vector instead of embedding the text.
    pub fn vector(mut self, vector: Vec<f32>) -> Self {
        self.vector = Some(vector);
        self
    }

    /// Sets the weight of importance × age in hybrid mode.
    pub fn prior_weight(mut self, weight: f64) -> Self {
        self.prior_weight = weight;
        self
    }

    /// Turns `last_accessed` updates on or off.
    pub fn touch(mut self, on: bool) -> Self {
        self.touch = on;
        self
    }

    /// Sets the speaker boost (0 turns it off).
    pub fn speaker_boost(mut self, boost: f64) -> Self {
        self.speaker_boost = boost;
        self
    }

    /// Sets the neighbour weight (0 turns neighbours off).
    pub fn neighbour_weight(mut self, weight: f64) -> Self {
        self.neighbour_weight = weight;
        self
    }

    /// Sets the time-window boost (0 turns it off).
    pub fn time_boost(mut self, boost: f64) -> Self {
        self.time_boost = boost;
        self
    }

    /// Sets the session boost (0 turns it off).
    pub fn session_boost(mut self, boost: f64) -> Self {
        self.session_boost = boost;
        self
    }

    /// Sets the thread weight (0 turns the thread off).
    pub fn thread_weight(mut self, weight: f64) -> Self {
        self.thread_weight = weight;
        self
    }

    /// Sets how many of the best rows lift their thread (at least 1).
    pub fn thread_anchors(mut self, anchors: usize) -> Self {
        self.thread_anchors = anchors.max(1);
        self
    }

    /// Sets the rank the thread lifts no row above (0: no cap).
    pub fn thread_keep(mut self, keep: usize) -> Self {
        self.thread_keep = keep;
        self
    }

    /// Sets the share of the query's bm25 ceiling that scales bm25 when the
    /// best hit stays under it (0 turns it off).
    pub fn keyword_ceiling_share(mut self, share: f64) -> Self {
        self.keyword_ceiling_share = share;
        self
    }

    /// Sets the cosine under which a weak keyword match scores nothing (0 turns it off).
    pub fn keyword_min_cosine(mut self, cosine: f64) -> Self {
        self.keyword_min_cosine = cosine;
        self
    }

    /// Sets how many candidates hybrid mode takes from each list (at least 1).
    pub fn candidates(mut self, candidates: usize) -> Self {
        self.candidates = candidates.max(1);
        self
    }

    /// Overrides the abstention floor of the model's gate (0 never abstains).
    pub fn abstain_below(mut self, floor: f32) -> Self {
        self.abstain_below = Some(floor);
        self
    }

    /// Overrides the abstention floor of a query that names nobody in a
    /// conversation (0: none stronger than [`Self::abstain_below`]'s; with
    /// that floor at 0 nothing abstains).
    pub fn abstain_unnamed_below(mut self, floor: f32) -> Self {
        self.abstain_unnamed_below = Some(floor);
        self
    }
}

/// Why a hit was let into a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Admission {
    /// Its raw cosine reached the embedding model's gate
    /// ([`cairn_memory_vector::RelevanceGate`]: the specification's 0.55,
    /// 0.42 above 300 characters, unless the model has its own).
    Cosine,
    /// Under the cosine gate, but a top bm25 hit holding most query terms.
    Keyword,
    /// Written next to an admitted hit in the same session (see
    /// [`EpisodicQuery::neighbour_weight`]), or carrying on the thread of
    /// one of the best hits (see [`EpisodicQuery::thread_weight`]).
    Neighbour,
}

/// Why a hit ranked where it did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScoreBreakdown {
    /// Raw cosine to the query, when both have vectors.
    pub cosine: Option<f32>,
    /// Rank in the vector candidate list (from 1).
    pub vector_rank: Option<usize>,
    /// Rank in the keyword candidate list (from 1).
    pub keyword_rank: Option<usize>,
    /// bm25 relevance (SQLite's score negated: higher is better).
    pub bm25: Option<f64>,
    /// The largest bm25 the query could reach in the keyword index (each
    /// term's idf × (k1 + 1)), when the index could tell it.
    pub keyword_ceiling: Option<f64>,
    /// The fused relevance before importance and age (the cosine in pure-vector mode).
    pub fused: f64,
    /// Importance of the row.
    pub importance: f64,
    /// Age in days at "now".
    pub age_days: f64,
    /// The final score MMR and ordering used.
    pub score: f64,
    /// Why it was admitted, when the relevance filter was on.
    pub admitted: Option<Admission>,
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EpisodicHit {
    /// Where the row belongs.
    pub scope: crate::scope::Scope,
    /// Row id.
    pub id: i64,
    /// The fragment.
    pub text: String,
    /// Tags.
    pub tags: Vec<String>,
    /// The caller's reference.
    pub source_ref: Option<String>,
    /// When it happened (Unix milliseconds).
    pub created_at: i64,
    /// Why it ranked.
    pub score: ScoreBreakdown,
}

/// What a backfill did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct BackfillReport {
    /// Rows that got a vector.
    pub embedded: usize,
    /// Rows still without one (no ready embedder, an embedding error, or a
    /// model swap in the middle).
    pub remaining: usize,
}

/// Step of the episodic backfill ([`crate::MemoryDb::backfill_missing_embeddings`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BackfillStep {
    /// No backfill with rows to embed has run in this process.
    #[default]
    Idle,
    /// Rows are being embedded.
    Running,
    /// The last backfill finished (`remaining` says whether rows are left).
    Done,
    /// The last backfill stopped on an error.
    Failed,
}

/// Progress of the running (or last) episodic backfill that had rows to
/// embed; a backfill that finds nothing to do leaves it as it was.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct BackfillProgress {
    /// Step.
    pub step: BackfillStep,
    /// Counts the backfills with rows to embed this store ran; a caller that
    /// scheduled one waits for a higher number.
    pub run: u64,
    /// Rows that got a vector so far.
    pub done: usize,
    /// Rows without a vector in the current space when it started.
    pub total: usize,
    /// Rows still without one when it ended.
    pub remaining: usize,
    /// Why it failed.
    pub error: Option<String>,
}

/// Step of a model swap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReembedStep {
    /// No swap has run.
    #[default]
    Idle,
    /// The new model is installed and loading.
    Applying,
    /// Rows are being re-embedded.
    Running,
    /// Every row was re-embedded and the new space recorded.
    Done,
    /// The swap failed and the previous model is back.
    Failed,
}

/// Progress of the current (or last) model swap.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ReembedProgress {
    /// Step.
    pub step: ReembedStep,
    /// Rows re-embedded so far.
    pub done: usize,
    /// Rows to re-embed.
    pub total: usize,
    /// Why it failed.
    pub error: Option<String>,
}

/// The state of the in-memory vector index against the table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EpisodicIndexStatus {
    /// Vectors in the index (0 when there is none).
    pub index_len: usize,
    /// Active rows with a vector in the current space.
    pub active_with_vectors: usize,
    /// Active rows.
    pub active: usize,
    /// Whether an index is built and in step with the table.
    pub ready: bool,
    /// Whether a background build is running.
    pub building: bool,
    /// The space the index holds.
    pub space: Option<String>,
    /// Rows in the in-memory keyword index (`None` before it is built).
    pub keyword_index_len: Option<usize>,
    /// Whether the index in use was loaded from the snapshot file beside
    /// `memory.db` rather than built from the table.
    pub loaded_from_snapshot: bool,
    /// Approximate heap bytes of the vector index (with the id table of
    /// its vector file, when it keeps one).
    pub index_bytes: usize,
    /// Approximate heap bytes of the in-memory keyword index.
    pub keyword_index_bytes: usize,
}
