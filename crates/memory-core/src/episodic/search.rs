//! Episodic search: candidates (vector index or exact scan, FTS5 bm25),
//! fusion, admission (the embedding model's [`RelevanceGate`]),
//! importance × age, MMR, the limit.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use cairn_memory_vector::constants::{MMR_LAMBDA, MMR_MAX_POOL};
use cairn_memory_vector::{Hit, MmrCandidate, RelevanceGate, decay_score, mmr};

use super::index::IndexAccess;
use super::{Admission, EpisodicHit, EpisodicQuery, Fusion, RetrievalMode, ScoreBreakdown};
use crate::constants::{
    FTS_MAX_QUERY_TERMS, HYBRID_CANDIDATES, KEYWORD_ADMISSION_MAX_RANK, KEYWORD_ADMISSION_MIN_COVERAGE,
};
use crate::db::{MemoryDb, now_ms, space_signature};
use crate::error::{MemoryError, Result};
use crate::keywords::OnlyStopwords;
use crate::store::{Counter, StoreTx, blob_vector};
use crate::{bm25, keywords};

const MS_PER_DAY: f64 = 86_400_000.0;
/// Vector probes of a relevance-filtered search: each is tried only while
/// the previous probe's last hit could still be admitted (the pool caps it).
const FILTERED_PROBES: [usize; 3] = [64, 256, 1_024];

/// Turns free text into a safe FTS5 query: lower-cased alphanumeric words
/// of at least 2 characters, stop words dropped, each quoted as a string
/// (so no user text is FTS syntax), joined with `OR`, at most 32 terms.
/// `None` when nothing is left.
///
/// ```
/// use cairn_memory_core::sanitize_fts_query;
/// assert_eq!(sanitize_fts_query("NEAR(\"tea\" OR cats*)"), Some("\"near\" OR \"tea\" OR \"cats\"".into()));
/// assert_eq!(sanitize_fts_query("what is it?"), None);
/// ```
pub fn sanitize_fts_query(text: &str) -> Option<String> {
    keywords::fts_query(text, FTS_MAX_QUERY_TERMS, OnlyStopwords::MatchNothing)
}

/// Reciprocal-rank fusion of the 1-based ranks a row has.
pub(crate) fn rrf(k: f64, ranks: &[Option<usize>]) -> f64 {
    ranks.iter().flatten().map(|rank| 1.0 / (k + *rank as f64)).sum()
}

/// `(1 − w) + w × (0.7 + 0.3 × importance) × exp(−0.03 × days)`.
pub(crate) fn prior(weight: f64, importance: f64, age_days: f64) -> f64 {
    let weight = weight.clamp(0.0, 1.0);
    (1.0 - weight) + weight * f64::from(decay_score(1.0, importance as f32, age_days as f32))
}

/// A candidate row, as read from the table.
struct Row {
    id: i64,
    text: String,
    tags: String,
    importance: f64,
    created_at: i64,
    source_ref: Option<String>,
    vector: Option<Vec<f32>>,
}

fn fetch_row(tx: &mut dyn StoreTx, id: i64, space: Option<&str>, with_vector: bool) -> Result<Option<Row>> {
    let vector_space = if with_vector { space } else { None };
    Ok(tx.episodic_row(id, vector_space)?.filter(|(row, _)| !row.is_deleted).map(|(row, blob)| Row {
        id,
        text: row.text,
        tags: row.tags_json,
        importance: row.importance,
        created_at: row.created_at,
        source_ref: row.source_ref,
        vector: blob.as_deref().and_then(blob_vector),
    }))
}

/// Exact scan over the stored vectors of `space`: the ladder's middle rung.
pub(super) fn scan(tx: &mut dyn StoreTx, space: &str, query: &[f32], k: usize) -> Result<Vec<Hit>> {
    let mut hits = Vec::new();
    for (id, blob) in tx.episodic_vectors(space, None)? {
        if let Some(vector) = blob_vector(&blob)
            && vector.len() == query.len()
        {
            hits.push(Hit { id: id as u64, cosine: cairn_memory_vector::dot(query, &vector) });
        }
    }
    hits.sort_by(Hit::rank_cmp);
    hits.truncate(k);
    Ok(hits)
}

/// A row's (rank, cosine) in the vector list and (rank, bm25) in the keyword list.
type ListPositions = (Option<(usize, f32)>, Option<(usize, f64)>);

/// One candidate with everything scoring needs.
struct Candidate {
    row: Row,
    cosine: Option<f32>,
    vector_rank: Option<usize>,
    keyword_rank: Option<usize>,
    bm25: Option<f64>,
}

impl MemoryDb {
    /// Searches episodic memory (see [`EpisodicQuery`] for the options).
    ///
    /// The ladder: the vector index (or, while it builds, an exact scan of
    /// the stored vectors) when there is a query vector, FTS5 keywords (OR
    /// over text and tags) always in hybrid mode and alone when there is
    /// no query vector at all. Only active rows are returned. With
    /// `relevance_filter`, admission runs on the *raw* cosine before any
    /// ranking or limit (hybrid mode adds the keyword path, see
    /// [`Admission::Keyword`]). Each hit carries its [`ScoreBreakdown`].
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

        let candidates = self.rows().read("searching episodic memory", |tx| {
            let mut by_id: HashMap<i64, ListPositions> = HashMap::new();
            let mut ready_index = None;
            if let (Some(vector), Some(space)) = (&query_vector, &space) {
                let revision = tx.revision(Counter::Episodic)?;
                let access = self.index_for_read(revision, space, dim)?;
                if let IndexAccess::Ready(index) = &access {
                    ready_index = Some(Arc::clone(index));
                }
                let mut search = |k: usize| -> Result<Vec<Hit>> {
                    match &access {
                        IndexAccess::Ready(index) => index
                            .search(vector, k)
                            .map_err(|source| MemoryError::Index { operation: "searching episodic vectors", source }),
                        IndexAccess::Scan => scan(tx, space, vector, k),
                    }
                };
                let pool = if query.mode == RetrievalMode::Hybrid { HYBRID_CANDIDATES } else { MMR_MAX_POOL };
                let hits = if query.relevance_filter {
                    // Hits come in cosine order: once a probe ends below the
                    // lowest gate, a wider one adds nothing admissible.
                    let mut hits = Vec::new();
                    for k in FILTERED_PROBES.map(|k| k.min(pool)) {
                        hits = search(k)?;
                        let may_continue =
                            hits.len() == k && hits.last().is_some_and(|hit| hit.cosine >= gate.lowest());
                        if !may_continue || k == pool {
                            break;
                        }
                    }
                    hits
                } else {
                    search(pool)?
                };
                for (rank, hit) in hits.iter().enumerate() {
                    by_id.entry(hit.id as i64).or_default().0 = Some((rank + 1, hit.cosine));
                }
            }
            if use_keywords && let Some(fts_query) = &fts_query {
                let k = if query.mode == RetrievalMode::Hybrid {
                    HYBRID_CANDIDATES
                } else {
                    query.limit.clamp(HYBRID_CANDIDATES, MMR_MAX_POOL)
                };
                let hits = match self.keyword_index_for_read(tx.revision(Counter::EpisodicText)?)? {
                    Some(index) => index
                        .search(&bm25::query_terms(&query.text, FTS_MAX_QUERY_TERMS), k)
                        .into_iter()
                        .map(|(id, score)| (id as i64, score))
                        .collect(),
                    // Only a backend with its own keyword index builds the in-memory one in the background.
                    None => tx.episodic_keyword_hits(fts_query, k)?.unwrap_or_default(),
                };
                for (rank, (id, bm25)) in hits.into_iter().enumerate() {
                    by_id.entry(id).or_default().1 = Some((rank + 1, bm25));
                }
            }
            // Keyword-only rows take their cosine from the index's copy of
            // their vector when there is one, not from the stored blob.
            let mut index_cosines: HashMap<i64, f32> = HashMap::new();
            if let (Some(index), Some(vector)) = (&ready_index, &query_vector) {
                let keyword_only: Vec<u64> = by_id
                    .iter()
                    .filter(|(_, (vector_hit, _))| vector_hit.is_none())
                    .map(|(id, _)| *id as u64)
                    .collect();
                let cosines = index
                    .similarities(vector, &keyword_only)
                    .map_err(|source| MemoryError::Index { operation: "scoring keyword hits", source })?;
                for (id, cosine) in keyword_only.into_iter().zip(cosines) {
                    if let Some(cosine) = cosine {
                        index_cosines.insert(id as i64, cosine);
                    }
                }
            }
            let mut out = Vec::with_capacity(by_id.len());
            let mut ids: Vec<_> = by_id.into_iter().collect();
            ids.sort_by_key(|(id, _)| *id);
            for (id, (vector_hit, keyword_hit)) in ids {
                let index_cosine = index_cosines.get(&id).copied();
                // Under the filter, a hit below every cosine gate that is not
                // among the top keyword hits cannot be admitted: not read.
                let known_cosine = vector_hit.map(|(_, cosine)| cosine).or(index_cosine);
                if query.relevance_filter
                    && keyword_hit.is_none_or(|(rank, _)| rank > KEYWORD_ADMISSION_MAX_RANK)
                    && known_cosine.is_some_and(|cosine| cosine < gate.lowest())
                {
                    continue;
                }
                let need_vector = known_cosine.is_none() && query_vector.is_some();
                let Some(row) = fetch_row(tx, id, space.as_deref(), need_vector)? else { continue };
                let cosine = match (known_cosine, &row.vector, &query_vector) {
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
                });
            }
            Ok(out)
        })?;

        let hits = rank(candidates, query, &gate, query_vector.is_some(), now);
        if query.touch && !hits.is_empty() {
            self.touch_episodic(&hits, now_ms());
        }
        Ok(hits)
    }

    /// Records `last_accessed` on returned rows, outside the read path: it
    /// is skipped when another thread holds the writer (it is advisory).
    fn touch_episodic(&self, hits: &[EpisodicHit], at: i64) {
        let Some(_episodic) = self.try_lock_episodic() else { return };
        let ids: Vec<i64> = hits.iter().map(|hit| hit.id).collect();
        if let Err(error) = self.rows().write("recording last_accessed", |tx| tx.touch_episodic(&ids, at)) {
            tracing::debug!(%error, "could not record last_accessed");
        }
    }
}

/// Admission, scoring, MMR and the limit over the fetched candidates.
fn rank(
    candidates: Vec<Candidate>,
    query: &EpisodicQuery,
    gate: &RelevanceGate,
    have_vector: bool,
    now: i64,
) -> Vec<EpisodicHit> {
    let query_stems: BTreeSet<String> =
        if query.relevance_filter { keywords::stems(&query.text) } else { BTreeSet::new() };
    let best_bm25 = candidates.iter().filter_map(|c| c.bm25).fold(0.0f64, f64::max);
    let mut scored: Vec<(Candidate, ScoreBreakdown)> = Vec::with_capacity(candidates.len());
    for candidate in candidates {
        let chars = candidate.row.text.chars().count();
        let admitted = if !query.relevance_filter {
            None
        } else if candidate.cosine.is_some_and(|cosine| gate.admit(cosine, chars)) {
            Some(Admission::Cosine)
        } else if query.mode == RetrievalMode::PureVector && have_vector {
            continue;
        } else if query.mode == RetrievalMode::PureVector {
            // The specification's keyword rung: rows carry no cosine, nothing to gate on.
            Some(Admission::Keyword)
        } else if candidate.keyword_rank.is_some_and(|rank| rank <= KEYWORD_ADMISSION_MAX_RANK)
            && coverage(&query_stems, &candidate.row) >= KEYWORD_ADMISSION_MIN_COVERAGE
        {
            Some(Admission::Keyword)
        } else {
            continue;
        };
        let age_days = (now - candidate.row.created_at) as f64 / MS_PER_DAY;
        let importance = candidate.row.importance;
        let (fused, score) = match (query.mode, have_vector) {
            (RetrievalMode::PureVector, true) => {
                let cosine = candidate.cosine.unwrap_or(0.0);
                (f64::from(cosine), f64::from(decay_score(cosine, importance as f32, age_days as f32)))
            }
            (RetrievalMode::PureVector, false) => {
                let fused = rrf_normalised(query.fusion, &[candidate.keyword_rank], 1);
                (fused, fused * prior(1.0, importance, age_days))
            }
            (RetrievalMode::Keyword, _) | (RetrievalMode::Hybrid, false) => {
                let fused = rrf_normalised(query.fusion, &[candidate.keyword_rank], 1);
                (fused, fused * prior(query.prior_weight, importance, age_days))
            }
            (RetrievalMode::Hybrid, true) => {
                let fused = match query.fusion {
                    Fusion::Rrf { .. } => {
                        rrf_normalised(query.fusion, &[candidate.vector_rank, candidate.keyword_rank], 2)
                    }
                    Fusion::Weighted { vector_weight } => {
                        let w = vector_weight.clamp(0.0, 1.0);
                        let cosine = f64::from(candidate.cosine.unwrap_or(0.0)).max(0.0);
                        let keyword = match candidate.bm25 {
                            Some(bm25) if best_bm25 > 0.0 => bm25 / best_bm25,
                            _ => 0.0,
                        };
                        w * cosine + (1.0 - w) * keyword
                    }
                };
                (fused, fused * prior(query.prior_weight, importance, age_days))
            }
        };
        let breakdown = ScoreBreakdown {
            cosine: candidate.cosine,
            vector_rank: candidate.vector_rank,
            keyword_rank: candidate.keyword_rank,
            bm25: candidate.bm25,
            fused,
            importance,
            age_days,
            score,
            admitted,
        };
        scored.push((candidate, breakdown));
    }
    let order: Vec<usize> = if query.mmr {
        let texts: Vec<MmrCandidate<'_>> = scored
            .iter()
            .map(|(candidate, breakdown)| MmrCandidate { relevance: breakdown.score as f32, text: &candidate.row.text })
            .collect();
        mmr(&texts, MMR_LAMBDA, query.limit)
    } else {
        let mut order: Vec<usize> = (0..scored.len()).collect();
        order.sort_by(|&a, &b| {
            scored[b].1.score.total_cmp(&scored[a].1.score).then(scored[a].0.row.id.cmp(&scored[b].0.row.id))
        });
        order.truncate(query.limit);
        order
    };
    let mut slots: Vec<Option<(Candidate, ScoreBreakdown)>> = scored.into_iter().map(Some).collect();
    order
        .into_iter()
        .filter_map(|position| slots[position].take())
        .map(|(candidate, score)| EpisodicHit {
            id: candidate.row.id,
            tags: serde_json::from_str(&candidate.row.tags).unwrap_or_default(),
            text: candidate.row.text,
            source_ref: candidate.row.source_ref,
            created_at: candidate.row.created_at,
            score,
        })
        .collect()
}

/// RRF over `ranks`, scaled so a row ranked first in all `lists` lists scores 1.
fn rrf_normalised(fusion: Fusion, ranks: &[Option<usize>], lists: usize) -> f64 {
    let k = match fusion {
        Fusion::Rrf { k } => k.max(0.0),
        Fusion::Weighted { .. } => crate::constants::RRF_K,
    };
    rrf(k, ranks) / (lists as f64 / (k + 1.0))
}

/// Share of the query's stems found in the row's text and tags.
fn coverage(query_stems: &BTreeSet<String>, row: &Row) -> f64 {
    if query_stems.is_empty() {
        return 0.0;
    }
    let row_stems = keywords::stems(&format!("{} {}", row.text, row.tags));
    query_stems.intersection(&row_stems).count() as f64 / query_stems.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitiser_neutralises_fts_syntax() {
        let cases: &[(&str, Option<&str>)] = &[
            ("", None),
            ("   ", None),
            ("a I x", None),
            ("the and of", None),
            ("\"unbalanced quote", Some("\"unbalanced\" OR \"quote\"")),
            ("(tea AND (coffee", Some("\"tea\" OR \"coffee\"")),
            ("tea NOT coffee", Some("\"tea\" OR \"coffee\"")),
            ("col:umn ^start title*", Some("\"col\" OR \"umn\" OR \"start\" OR \"title\"")),
            ("NEAR(a b, 3)", Some("\"near\"")),
            ("Berlin berlin BERLIN", Some("\"berlin\"")),
            ("über café", Some("\"über\" OR \"café\"")),
        ];
        for (input, expected) in cases {
            assert_eq!(sanitize_fts_query(input).as_deref(), *expected, "{input:?}");
        }
        let long: String = (0..100).map(|i| format!("word{i} ")).collect();
        assert_eq!(sanitize_fts_query(&long).unwrap().matches(" OR ").count(), FTS_MAX_QUERY_TERMS - 1);
    }

    #[test]
    fn rrf_matches_hand_computed_values() {
        // Rank 1 in both lists at k = 60: 2/61.
        assert!((rrf(60.0, &[Some(1), Some(1)]) - 2.0 / 61.0).abs() < 1e-12);
        // Rank 3 in one list only: 1/63.
        assert!((rrf(60.0, &[Some(3), None]) - 1.0 / 63.0).abs() < 1e-12);
        // Ranks 2 and 10: 1/62 + 1/70.
        assert!((rrf(60.0, &[Some(2), Some(10)]) - (1.0 / 62.0 + 1.0 / 70.0)).abs() < 1e-12);
        assert_eq!(rrf(60.0, &[None, None]), 0.0);
        // Normalised: first in both lists is 1; first in one list is 0.5.
        let fusion = Fusion::Rrf { k: 60.0 };
        assert!((rrf_normalised(fusion, &[Some(1), Some(1)], 2) - 1.0).abs() < 1e-12);
        assert!((rrf_normalised(fusion, &[Some(1), None], 2) - 0.5).abs() < 1e-12);
        // A row 2nd in both beats one that is 1st in one list only.
        assert!(rrf(60.0, &[Some(2), Some(2)]) > rrf(60.0, &[Some(1), None]));
    }

    #[test]
    fn fusion_names_parse_and_bad_ones_are_refused() {
        let table: &[(&str, Option<Fusion>)] = &[
            ("weighted", Some(Fusion::Weighted { vector_weight: 0.7 })),
            ("weighted:0.5", Some(Fusion::Weighted { vector_weight: 0.5 })),
            ("weighted:0", Some(Fusion::Weighted { vector_weight: 0.0 })),
            ("weighted:1", Some(Fusion::Weighted { vector_weight: 1.0 })),
            ("rrf", Some(Fusion::Rrf { k: 60.0 })),
            ("rrf:10", Some(Fusion::Rrf { k: 10.0 })),
            ("weighted:1.01", None),
            ("weighted:-0.1", None),
            ("weighted:NaN", None),
            ("rrf:-1", None),
            ("rrf:inf", None),
            ("rrf:", None),
            ("rrf:ten", None),
            ("RRF", None),
            ("cosine", None),
            ("", None),
        ];
        for (text, expected) in table {
            assert_eq!(Fusion::parse(text), *expected, "{text:?}");
        }
        assert_eq!(
            Fusion::default(),
            Fusion::Weighted { vector_weight: crate::constants::WEIGHTED_FUSION_VECTOR_WEIGHT }
        );
    }

    #[test]
    fn prior_interpolates_to_the_specification_factor() {
        assert!((prior(1.0, 0.8, 30.0) - 0.94 * (-0.9f64).exp()).abs() < 1e-5);
        assert_eq!(prior(0.0, 0.0, 1000.0), 1.0);
        let half = prior(0.5, 1.0, 0.0);
        assert!((half - 1.0).abs() < 1e-6);
        assert!((prior(0.25, 0.0, 1e9) - 0.75).abs() < 1e-6);
    }
}
