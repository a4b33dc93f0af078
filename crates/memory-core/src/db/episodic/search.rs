//! [`MemoryDb::search_episodic`]: gathering candidates from the indexes
//! and the rows; ranking is [`crate::episodic::search`]'s.

use crate::bm25;
use crate::clock::now_ms;
use crate::constants::{FTS_MAX_QUERY_TERMS, HYBRID_CANDIDATES, KEYWORD_ADMISSION_MAX_RANK, SCOPE_POOL_FACTOR};
use crate::db::MemoryDb;
use crate::episodic::index::{IndexAccess, Probes, TOUCH_BATCH_ROWS, TOUCH_BATCH_WAIT, exact_hits, file_cosines};
use crate::episodic::keyword::KeywordAccess;
use crate::episodic::search::{
    Candidate, FILTERED_PROBES, ListPositions, fetch_rows, rank, read_neighbours, sanitize_fts_query, scan,
};
use crate::episodic::{EpisodicHit, EpisodicQuery, RetrievalMode};
use crate::error::{MemoryError, Result};
use crate::store::Counter;
use crate::store::space_signature;
use cairn_memory_vector::constants::MMR_MAX_POOL;
use cairn_memory_vector::{AutoIndex, Hit, RelevanceGate, VectorFile};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

impl MemoryDb {
    /// Searches episodic memory (see [`EpisodicQuery`] for the options).
    ///
    /// The ladder: the vector index (or, while it builds, an exact scan of
    /// the stored vectors) when there is a query vector, FTS5 keywords (OR
    /// over text and tags) always in hybrid mode and alone when there is
    /// no query vector at all. Only active rows are returned. With
    /// `relevance_filter`, admission runs on the *raw* cosine before any
    /// ranking or limit (hybrid mode adds the keyword path, see
    /// [`Admission::Keyword`](crate::Admission::Keyword)). Each hit carries its [`ScoreBreakdown`](crate::ScoreBreakdown).
    pub fn search_episodic(&self, query: &EpisodicQuery) -> Result<Vec<EpisodicHit>> {
        let _span = tracing::debug_span!("search_episodic", mode = ?query.mode).entered();
        let now = query.now.unwrap_or_else(now_ms);
        let embedder = self.embedder();
        let space = embedder.as_ref().map(|embedder| space_signature(&**embedder));
        let mut query_vector: Option<Vec<f32>> = None;
        if query.mode != RetrievalMode::Keyword
            && let Some(embedder) = &embedder
        {
            query_vector = match &query.vector {
                Some(vector) => Some(vector.clone()),
                None if embedder.is_ready() && !query.text.trim().is_empty() => embedder.embed(&query.text).ok(),
                None => None,
            };
            query_vector = query_vector.filter(|vector| vector.len() == embedder.dim());
            if let Some(vector) = &mut query_vector {
                cairn_embedder::l2_normalize(vector);
            }
        }
        let fts_query = sanitize_fts_query(&query.text);
        let use_keywords = query.mode != RetrievalMode::PureVector || query_vector.is_none();
        let dim = embedder.as_ref().map_or(0, |embedder| embedder.dim());
        // The gate is the model's; the specification's pipeline keeps the
        // specification's gate whatever the model.
        let gate = match (&embedder, query.mode) {
            (Some(embedder), RetrievalMode::Hybrid | RetrievalMode::Keyword) => {
                RelevanceGate::for_model(embedder.model_id())
            }
            _ => RelevanceGate::SPECIFICATION,
        };

        // A search reading some scopes only drops other scopes' rows after
        // the indexes answer; when other scopes held at least as many of the
        // candidates as the visible ones and fewer rows than asked for are
        // left, it runs once more with wider pools.
        let factors: &[usize] = if query.scopes.narrows() { &[1, SCOPE_POOL_FACTOR] } else { &[1] };
        let candidates = self.rows().read("searching episodic memory", |tx| {
            let mut out = Vec::new();
            for &factor in factors {
                let dropped;
                let gathered = self.gather(
                    tx,
                    query,
                    factor,
                    query_vector.as_deref(),
                    space.as_deref(),
                    dim,
                    &gate,
                    use_keywords,
                    fts_query.as_deref(),
                )?;
                (out, dropped) = gathered;
                if dropped == 0 || dropped < out.len() || out.len() >= query.limit {
                    break;
                }
            }
            let vector = query_vector.as_deref();
            let space = space.as_deref();
            rank(out, query, &gate, vector.is_some(), now, &mut |row, reach| {
                let mut neighbours = read_neighbours(tx, row, reach, space, vector)?;
                neighbours.retain(|(neighbour, _)| query.scopes.admits(&neighbour.scope));
                Ok(neighbours)
            })
        })?;
        let hits = candidates;
        if query.touch && !hits.is_empty() {
            self.touch_episodic(&hits, now_ms());
        }
        Ok(hits)
    }

    /// The candidates of one search: vector and keyword hits in pools
    /// `factor` times the usual, each with its row; and how many rows of
    /// other scopes were dropped.
    ///
    /// A large store's in-memory keyword lookup runs on a thread of its own
    /// (with the file cosines of its hits, for an index that keeps codes
    /// only) while this one walks the vector index and reads the rows of
    /// the vector hits the gate admits; the rows only the keyword hits
    /// bring are read once it is done.
    #[allow(clippy::too_many_arguments)]
    fn gather(
        &self,
        tx: &mut dyn crate::store::StoreTx,
        query: &EpisodicQuery,
        factor: usize,
        query_vector: Option<&[f32]>,
        space: Option<&str>,
        dim: usize,
        gate: &RelevanceGate,
        use_keywords: bool,
        fts_query: Option<&str>,
    ) -> Result<(Vec<Candidate>, usize)> {
        let mut by_id: HashMap<i64, ListPositions> = HashMap::new();
        let mut bm25_ceiling = None;
        let keyword_k = match query.mode {
            RetrievalMode::Hybrid => query.candidates.clamp(1, MMR_MAX_POOL),
            _ => query.limit.clamp(HYBRID_CANDIDATES, MMR_MAX_POOL),
        } * factor;
        // Both indexes' revisions in one read (one statement on a server).
        let wants_keywords = use_keywords && fts_query.is_some();
        let wants_vectors = query_vector.is_some() && space.is_some();
        let counters: Vec<Counter> = [(wants_keywords, Counter::EpisodicText), (wants_vectors, Counter::Episodic)]
            .into_iter()
            .filter_map(|(wanted, counter)| wanted.then_some(counter))
            .collect();
        let mut revisions = tx.revisions(&counters)?.into_iter();
        let mut revision = || revisions.next().expect("a revision for every counter asked for");
        let keyword_access = if wants_keywords { Some(self.keyword_index_for_read(revision())?) } else { None };
        let terms = match &keyword_access {
            Some(KeywordAccess::Ready(_)) => bm25::query_terms(&query.text, FTS_MAX_QUERY_TERMS),
            _ => Vec::new(),
        };
        let vector_access = match (query_vector, space) {
            (Some(vector), Some(space)) => Some((vector, space, self.index_for_read(revision(), space, dim)?)),
            _ => None,
        };
        // The index's exact copy of the vectors, when it has one: its own, or
        // the vector file of an index that keeps codes only.
        let exact_copy = match &vector_access {
            Some((vector, _, IndexAccess::Ready(index, vectors))) if index.exact() || vectors.is_some() => {
                Some((*vector, Arc::clone(index), vectors.clone()))
            }
            _ => None,
        };
        let mut rows = HashMap::new();
        let mut keyword_cosines: HashMap<i64, f32> = HashMap::new();
        std::thread::scope(|scope| -> Result<()> {
            let beside = match &keyword_access {
                Some(KeywordAccess::Ready(index)) if index.len() >= self.episodic_config.keyword_beside_rows => {
                    let (terms, exact_copy) = (&terms, &exact_copy);
                    Some(scope.spawn(move || {
                        let hits = index.search(terms, keyword_k);
                        let ids: Vec<u64> = hits.iter().map(|(id, _)| *id).collect();
                        let cosines = exact_cosines(exact_copy.as_ref(), &ids);
                        (hits, cosines)
                    }))
                }
                _ => None,
            };
            if let Some((vector, space, access)) = &vector_access {
                // While a large store's index is first made ready, the
                // keyword path answers alone.
                let skip_scan = matches!(access, IndexAccess::Scan) && self.too_large_to_scan();
                let mut probes = Probes::default();
                let mut search = |k: usize, next: usize| -> Result<Vec<Hit>> {
                    probes.next = next;
                    match access {
                        IndexAccess::Ready(index, vectors) => {
                            exact_hits(tx, index, vectors.as_deref(), space, vector, k, &mut probes)
                        }
                        IndexAccess::Scan if skip_scan => Ok(Vec::new()),
                        IndexAccess::Scan => scan(tx, space, vector, k),
                    }
                };
                let pool = if query.mode == RetrievalMode::Hybrid {
                    query.candidates.clamp(1, MMR_MAX_POOL)
                } else {
                    MMR_MAX_POOL
                };
                let pool = pool * factor;
                let hits = if query.relevance_filter {
                    // Hits come in cosine order: once a probe ends below the
                    // lowest gate, a wider one adds nothing admissible.
                    let mut hits = Vec::new();
                    let probe_sizes = FILTERED_PROBES.map(|k| k.min(pool));
                    for (at, &k) in probe_sizes.iter().enumerate() {
                        let next = probe_sizes.get(at + 1).copied().unwrap_or(0);
                        hits = search(k, next)?;
                        let may_continue =
                            hits.len() == k && hits.last().is_some_and(|hit| hit.cosine >= gate.lowest());
                        if !may_continue || k == pool {
                            break;
                        }
                    }
                    hits
                } else {
                    search(pool, 0)?
                };
                for (rank, hit) in hits.iter().enumerate() {
                    by_id.entry(hit.id as i64).or_default().0 = Some((rank + 1, hit.cosine));
                }
                // While the keyword lookup runs: the rows of the vector hits
                // every gate admits whatever their keyword rank.
                if beside.is_some() {
                    let admitted: Vec<(i64, bool)> = hits
                        .iter()
                        .filter(|hit| !query.relevance_filter || hit.cosine >= gate.lowest())
                        .map(|hit| (hit.id as i64, false))
                        .collect();
                    rows = fetch_rows(tx, &admitted, Some(space))?;
                }
            }
            let hits: Vec<(i64, f64)> = match &keyword_access {
                Some(KeywordAccess::Ready(index)) => {
                    bm25_ceiling = Some(index.ceiling(&terms));
                    let hits = match beside {
                        Some(search) => {
                            let (hits, cosines) =
                                search.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                            keyword_cosines = cosines?;
                            hits
                        }
                        None => index.search(&terms, keyword_k),
                    };
                    hits.into_iter().map(|(id, score)| (id as i64, score)).collect()
                }
                // Only a backend with its own keyword index builds the
                // in-memory one in the background, started once this
                // search has its answer.
                Some(KeywordAccess::Own { start }) => {
                    let fts_query = fts_query.expect("keyword access is resolved only with a query");
                    let hits = tx.episodic_keyword_hits(fts_query, keyword_k)?.unwrap_or_default();
                    if *start {
                        self.start_keyword_build();
                    }
                    hits
                }
                None => Vec::new(),
            };
            for (rank, (id, bm25)) in hits.into_iter().enumerate() {
                by_id.entry(id).or_default().1 = Some((rank + 1, bm25));
            }
            Ok(())
        })?;
        // Keyword-only rows take their cosine from the index's exact copy
        // of their vector when there is one, not from the stored blob.
        let keyword_only: Vec<u64> = by_id
            .iter()
            .filter(|(id, (vector_hit, _))| vector_hit.is_none() && !keyword_cosines.contains_key(id))
            .map(|(id, _)| *id as u64)
            .collect();
        let mut index_cosines = exact_cosines(exact_copy.as_ref(), &keyword_only)?;
        index_cosines.extend(keyword_cosines);
        let mut ids: Vec<_> = by_id.into_iter().collect();
        ids.sort_by_key(|(id, _)| *id);
        // Under the filter, a hit below every cosine gate that is not
        // among the top keyword hits cannot be admitted: not read.
        ids.retain(|(id, (vector_hit, keyword_hit))| {
            let known_cosine = vector_hit.map(|(_, cosine)| cosine).or(index_cosines.get(id).copied());
            !(query.relevance_filter
                && keyword_hit.is_none_or(|(rank, _)| rank > KEYWORD_ADMISSION_MAX_RANK)
                && known_cosine.is_some_and(|cosine| cosine < gate.lowest()))
        });
        let wanted: Vec<(i64, bool)> = ids
            .iter()
            .filter(|(id, _)| !rows.contains_key(id))
            .map(|(id, (vector_hit, _))| {
                let known = vector_hit.is_some() || index_cosines.contains_key(id);
                (*id, !known && query_vector.is_some())
            })
            .collect();
        if !wanted.is_empty() {
            rows.extend(fetch_rows(tx, &wanted, space)?);
        }
        let mut dropped = 0;
        let mut out = Vec::with_capacity(ids.len());
        for (id, (vector_hit, keyword_hit)) in ids {
            let known_cosine = vector_hit.map(|(_, cosine)| cosine).or(index_cosines.get(&id).copied());
            let Some(row) = rows.remove(&id) else { continue };
            if !query.scopes.admits(&row.scope) {
                dropped += 1;
                continue;
            }
            let cosine = match (known_cosine, &row.vector, query_vector) {
                (Some(cosine), _, _) => Some(cosine),
                (None, Some(stored), Some(vector)) if stored.len() == vector.len() => {
                    Some(cairn_memory_vector::dot(vector, stored))
                }
                _ => None,
            };
            out.push(Candidate {
                row,
                cosine,
                vector_rank: vector_hit.map(|(rank, _)| rank),
                keyword_rank: keyword_hit.map(|(rank, _)| rank),
                bm25: keyword_hit.map(|(_, bm25)| bm25),
                bm25_ceiling,
            });
        }
        if dropped > 0 {
            rerank_visible(&mut out);
        }
        Ok((out, dropped))
    }

    /// Records `last_accessed` on returned rows, outside the read path and
    /// in batches (see [`crate::episodic::index::PendingTouches`]).
    fn touch_episodic(&self, hits: &[EpisodicHit], at: i64) {
        let due = {
            let mut pending = self.episodic.touches.lock();
            pending.at.extend(hits.iter().map(|hit| (hit.id, at)));
            let since = *pending.since.get_or_insert_with(Instant::now);
            since.elapsed() >= TOUCH_BATCH_WAIT || pending.at.len() >= TOUCH_BATCH_ROWS
        };
        if due {
            self.write_touches();
        }
    }

    /// Writes the `last_accessed` times searches left waiting, in one
    /// transaction, and answers how many rows it recorded. Skipped, the
    /// times kept, while another thread holds the episodic writer (they are
    /// advisory); a failure drops them. A long-running process calls it
    /// now and then, so an idle store's times do not wait for its close.
    pub fn write_touches(&self) -> usize {
        let Some(_episodic) = self.try_lock_episodic() else { return 0 };
        let waiting = {
            let mut pending = self.episodic.touches.lock();
            pending.since = None;
            std::mem::take(&mut pending.at)
        };
        if waiting.is_empty() {
            return 0;
        }
        let rows = waiting.len();
        let mut touches: Vec<(i64, i64)> = waiting.into_iter().collect();
        touches.sort_unstable();
        let written = self.rows().write("recording last_accessed", |tx| tx.touch_episodic(&touches));
        match written {
            Ok(()) => rows,
            Err(error) => {
                tracing::debug!(%error, "could not record last_accessed");
                0
            }
        }
    }
}

/// Renumbers the vector and keyword ranks among the candidates a scope
/// filter kept, so a search over some scopes ranks (and admits by keyword
/// rank) as one over a store holding only those rows would.
fn rerank_visible(candidates: &mut [Candidate]) {
    for list in [0, 1] {
        let rank_of = |candidate: &Candidate| if list == 0 { candidate.vector_rank } else { candidate.keyword_rank };
        let mut ranks: Vec<usize> = candidates.iter().filter_map(rank_of).collect();
        ranks.sort_unstable();
        for candidate in candidates.iter_mut() {
            let slot = if list == 0 { &mut candidate.vector_rank } else { &mut candidate.keyword_rank };
            if let Some(rank) = *slot {
                *slot = Some(ranks.partition_point(|&other| other < rank) + 1);
            }
        }
    }
}

/// A query vector with the index that can score it exactly: the index and,
/// for one that keeps codes only, its vector file.
type ExactCopy<'a> = (&'a [f32], Arc<AutoIndex>, Option<Arc<VectorFile>>);

/// The exact cosines of `query` with the rows `ids` from an index's exact
/// copy of their vectors (its own, or the vector file of one that keeps
/// codes only): rows it cannot answer for (not in the index, not in the
/// file, or a file not believed) are left out, for the caller to read.
fn exact_cosines(copy: Option<&ExactCopy<'_>>, ids: &[u64]) -> Result<HashMap<i64, f32>> {
    let Some((query, index, vectors)) = copy else { return Ok(HashMap::new()) };
    let mut cosines = index
        .similarities(query, ids)
        .map_err(|source| MemoryError::Index { operation: "scoring keyword hits", source })?;
    if let Some(file) = vectors.as_deref().filter(|_| !index.exact()) {
        // A row the codes do not hold is not active in this space.
        let held: Vec<u64> =
            ids.iter().zip(&cosines).filter(|(_, cosine)| cosine.is_some()).map(|(&id, _)| id).collect();
        let mut exact = file_cosines(index, file, query, &held).into_iter();
        for cosine in cosines.iter_mut().filter(|cosine| cosine.is_some()) {
            *cosine = exact.next().flatten();
        }
    }
    Ok(ids.iter().zip(cosines).filter_map(|(&id, cosine)| Some((id as i64, cosine?))).collect())
}
