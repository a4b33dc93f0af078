//! Episodic search: candidates (vector index or exact scan, FTS5 bm25),
//! admission (the embedding model's [`RelevanceGate`], which may abstain),
//! fusion, importance × age, speaker and time signals, the sitting and the
//! thread of the best hits, neighbouring turns, MMR, the limit.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use cairn_memory_vector::constants::{MMR_LAMBDA, MMR_MAX_POOL};
use cairn_memory_vector::{AutoIndex, Hit, MmrCandidate, RelevanceGate, VectorFile, decay_score, mmr};

use super::index::{IndexAccess, Probes, TOUCH_BATCH_ROWS, TOUCH_BATCH_WAIT, exact_hits, file_cosines};
use super::keyword::KeywordAccess;
use super::{Admission, Episodic, EpisodicHit, EpisodicQuery, Fusion, RetrievalMode, ScoreBreakdown, signals};
use crate::bm25;
use crate::clock::now_ms;
use crate::constants::{
    EPISODIC_NEIGHBOUR_MAX_GAP_MS, EPISODIC_SESSION_ANCHORS, EPISODIC_STRONG_KEYWORD_SHARE, EPISODIC_THREAD_REACH,
    FTS_MAX_QUERY_TERMS, HYBRID_CANDIDATES, KEYWORD_ADMISSION_MAX_RANK, KEYWORD_ADMISSION_MIN_COVERAGE,
    SCOPE_POOL_FACTOR,
};
use crate::error::{MemoryError, Result};
use crate::keywords;
use crate::keywords::OnlyStopwords;
use crate::store::{Counter, StoreTx, blob_vector, space_signature};

const MS_PER_DAY: f64 = 86_400_000.0;
/// A capped thread lift stops this share under the kept row's score.
const THREAD_KEEP_MARGIN: f64 = 1e-6;
/// Vector probes of a relevance-filtered search: each is tried only while
/// the previous probe's last hit could still be admitted (the pool caps it).
pub(crate) const FILTERED_PROBES: [usize; 3] = [64, 256, 1_024];

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
pub(crate) struct Row {
    pub(crate) id: i64,
    pub(crate) text: String,
    pub(crate) tags: String,
    pub(crate) importance: f64,
    pub(crate) created_at: i64,
    pub(crate) source_ref: Option<String>,
    pub(crate) vector: Option<Vec<f32>>,
    pub(crate) scope: String,
}

/// The active ones of rows `ids`, by id, read in one call each for the
/// rows that need their vector (`with_vector`) and those that do not.
pub(crate) fn fetch_rows(
    tx: &mut dyn StoreTx,
    ids: &[(i64, bool)],
    space: Option<&str>,
) -> Result<std::collections::HashMap<i64, Row>> {
    let mut out = std::collections::HashMap::with_capacity(ids.len());
    for with_vector in [false, true] {
        let chosen: Vec<i64> = ids.iter().filter(|(_, wanted)| *wanted == with_vector).map(|(id, _)| *id).collect();
        if chosen.is_empty() {
            continue;
        }
        let vector_space = if with_vector { space } else { None };
        for (row, blob) in tx.episodic_rows(&chosen, vector_space)? {
            if let Some(row) = active_row(row, blob) {
                out.insert(row.id, row);
            }
        }
    }
    Ok(out)
}

fn active_row(row: crate::store::EpisodicRow, blob: Option<Vec<u8>>) -> Option<Row> {
    (!row.is_deleted).then(|| Row {
        id: row.id,
        text: row.text,
        tags: row.tags_json,
        importance: row.importance,
        created_at: row.created_at,
        source_ref: row.source_ref,
        vector: blob.as_deref().and_then(blob_vector),
        scope: row.scope,
    })
}

/// Exact scan over the stored vectors of `space`: the ladder's middle rung.
pub(crate) fn scan(tx: &mut dyn StoreTx, space: &str, query: &[f32], k: usize) -> Result<Vec<Hit>> {
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
pub(crate) type ListPositions = (Option<(usize, f32)>, Option<(usize, f64)>);

/// One candidate with everything scoring needs.
pub(crate) struct Candidate {
    pub(crate) row: Row,
    pub(crate) cosine: Option<f32>,
    pub(crate) vector_rank: Option<usize>,
    pub(crate) keyword_rank: Option<usize>,
    pub(crate) bm25: Option<f64>,
    /// The query's bm25 ceiling ([`crate::bm25::Bm25::ceiling`]), when the
    /// keyword index could tell it.
    pub(crate) bm25_ceiling: Option<f64>,
}

/// Reads the rows written up to `reach` rows before and after a row in its
/// session (ids `row.id ± 1 ..= reach`, by id), each with its raw cosine to
/// the query when known.
pub(crate) type NeighbourReader<'a> = dyn FnMut(&Row, i64) -> Result<Vec<(Row, Option<f32>)>> + 'a;

/// Admission (with abstention), scoring, speaker and time signals,
/// neighbour propagation, MMR and the limit over the fetched candidates.
pub(crate) fn rank(
    candidates: Vec<Candidate>,
    query: &EpisodicQuery,
    gate: &RelevanceGate,
    have_vector: bool,
    now: i64,
    neighbours: &mut NeighbourReader<'_>,
) -> Result<Vec<EpisodicHit>> {
    let mut gate = *gate;
    if let Some(floor) = query.abstain_below {
        gate.abstain_below = floor;
    }
    if let Some(floor) = query.abstain_unnamed_below {
        gate.abstain_unnamed_below = floor;
    }
    let signals = query.mode != RetrievalMode::PureVector;
    // The query's words, read once: for the speaker signal and for the abstention floor of a query naming nobody.
    let query_words = if (signals && query.speaker_boost > 0.0) || query.relevance_filter {
        signals::words(&query.text)
    } else {
        BTreeSet::new()
    };
    if query.relevance_filter && have_vector && abstains(&candidates, &query_words, &gate) {
        return Ok(Vec::new());
    }
    let query_stems: BTreeSet<String> =
        if query.relevance_filter { keywords::stems(&query.text) } else { BTreeSet::new() };
    let window = if signals && query.time_boost > 0.0 { signals::time_window(&query.text, now) } else { None };
    let best_bm25 = candidates.iter().filter_map(|c| c.bm25).fold(0.0f64, f64::max);
    let keyword_ceiling = candidates.iter().find_map(|c| c.bm25_ceiling);
    // The weighted sum scales bm25 by the best hit's, unless that hit stays
    // under a share of what the query could reach (its telling words are
    // missing): then by that share, so a weak match is not worth a full one.
    let bm25_scale = match keyword_ceiling {
        Some(ceiling) if query.keyword_ceiling_share > 0.0 => best_bm25.max(query.keyword_ceiling_share * ceiling),
        _ => best_bm25,
    };
    let mut scored: Vec<(Candidate, ScoreBreakdown)> = Vec::with_capacity(candidates.len());
    for candidate in candidates {
        let Some(admitted) = admission(&candidate, query, &gate, have_vector, &query_stems) else { continue };
        let age_days = (now - candidate.row.created_at) as f64 / MS_PER_DAY;
        let importance = candidate.row.importance;
        let (fused, mut score) =
            fused_score(&candidate, query, have_vector, (bm25_scale, keyword_ceiling), importance, age_days);
        if signals {
            score *= signal_factor(query, &query_words, window, &candidate.row);
        }
        let breakdown = ScoreBreakdown {
            cosine: candidate.cosine,
            vector_rank: candidate.vector_rank,
            keyword_rank: candidate.keyword_rank,
            bm25: candidate.bm25,
            keyword_ceiling,
            fused,
            importance,
            age_days,
            score,
            admitted,
        };
        scored.push((candidate, breakdown));
    }
    // Hybrid only: keyword mode's rank-based scores sit too close together
    // for a fixed factor (it was chosen on the hybrid ranking).
    if query.mode == RetrievalMode::Hybrid && have_vector && query.session_boost > 0.0 {
        boost_anchor_sessions(&mut scored, query.session_boost);
    }
    if query.mode == RetrievalMode::Hybrid && have_vector && query.thread_weight > 0.0 && query.limit > 0 {
        lift_threads(&mut scored, query, now, neighbours)?;
    }
    if signals && query.neighbour_weight > 0.0 && query.limit > 0 {
        propagate_to_neighbours(&mut scored, query, now, neighbours)?;
    }
    let order = final_order(&scored, query);
    let mut slots: Vec<Option<(Candidate, ScoreBreakdown)>> = scored.into_iter().map(Some).collect();
    Ok(order
        .into_iter()
        .filter_map(|position| slots[position].take())
        .map(|(candidate, score)| EpisodicHit {
            scope: crate::scope::Scope::parse(&candidate.row.scope).unwrap_or_default(),
            id: candidate.row.id,
            tags: serde_json::from_str(&candidate.row.tags).unwrap_or_default(),
            text: candidate.row.text,
            source_ref: candidate.row.source_ref,
            created_at: candidate.row.created_at,
            score,
        })
        .collect())
}

/// How a candidate is admitted under the relevance filter: `Some(None)`
/// without the filter, `None` when it is not admitted.
fn admission(
    candidate: &Candidate,
    query: &EpisodicQuery,
    gate: &RelevanceGate,
    have_vector: bool,
    query_stems: &BTreeSet<String>,
) -> Option<Option<Admission>> {
    if !query.relevance_filter {
        return Some(None);
    }
    let chars = candidate.row.text.chars().count();
    if candidate.cosine.is_some_and(|cosine| gate.admit(cosine, chars)) {
        Some(Some(Admission::Cosine))
    } else if query.mode == RetrievalMode::PureVector && have_vector {
        None
    } else if query.mode == RetrievalMode::PureVector {
        // The specification's keyword rung: rows carry no cosine, nothing to gate on.
        Some(Some(Admission::Keyword))
    } else if candidate.keyword_rank.is_some_and(|rank| rank <= KEYWORD_ADMISSION_MAX_RANK)
        && coverage(query_stems, &candidate.row) >= KEYWORD_ADMISSION_MIN_COVERAGE
    {
        Some(Some(Admission::Keyword))
    } else {
        None
    }
}

/// A candidate's fused relevance and its score under the prior, by mode:
/// `keywords` is the bm25 scale and the query's keyword ceiling.
fn fused_score(
    candidate: &Candidate,
    query: &EpisodicQuery,
    have_vector: bool,
    keywords: (f64, Option<f64>),
    importance: f64,
    age_days: f64,
) -> (f64, f64) {
    let (bm25_scale, keyword_ceiling) = keywords;
    match (query.mode, have_vector) {
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
                Fusion::Rrf { .. } => rrf_normalised(query.fusion, &[candidate.vector_rank, candidate.keyword_rank], 2),
                Fusion::Weighted { vector_weight } => {
                    let w = vector_weight.clamp(0.0, 1.0);
                    let cosine = f64::from(candidate.cosine.unwrap_or(0.0)).max(0.0);
                    let keyword = match candidate.bm25 {
                        Some(bm25) if bm25_scale > 0.0 && !weak_keyword_match(query, candidate, keyword_ceiling) => {
                            bm25 / bm25_scale
                        }
                        _ => 0.0,
                    };
                    w * cosine + (1.0 - w) * keyword
                }
            };
            (fused, fused * prior(query.prior_weight, importance, age_days))
        }
    }
}

/// The positions of the hits to return, in order: MMR over the scores, or
/// the scores descending (ties by id), cut to the limit.
fn final_order(scored: &[(Candidate, ScoreBreakdown)], query: &EpisodicQuery) -> Vec<usize> {
    if query.mmr {
        let texts: Vec<MmrCandidate<'_>> = scored
            .iter()
            .map(|(candidate, breakdown)| MmrCandidate { relevance: breakdown.score as f32, text: &candidate.row.text })
            .collect();
        // The specification's λ outside hybrid mode; hybrid's is the query's
        // (the specification's by default).
        let lambda = if query.mode == RetrievalMode::Hybrid { query.mmr_lambda } else { MMR_LAMBDA };
        mmr(&texts, lambda, query.limit)
    } else {
        let mut order: Vec<usize> = (0..scored.len()).collect();
        order.sort_by(|&a, &b| {
            scored[b].1.score.total_cmp(&scored[a].1.score).then(scored[a].0.row.id.cmp(&scored[b].0.row.id))
        });
        order.truncate(query.limit);
        order
    }
}

/// Whether a keyword hit is a weak match the model finds unrelated: its
/// raw cosine (when it has one) stays under `keyword_min_cosine` and its
/// bm25 under [`EPISODIC_STRONG_KEYWORD_SHARE`] of the query's ceiling
/// (when the keyword index can tell it).
fn weak_keyword_match(query: &EpisodicQuery, candidate: &Candidate, ceiling: Option<f64>) -> bool {
    match (candidate.cosine, candidate.bm25, ceiling) {
        (Some(cosine), Some(bm25), Some(ceiling)) => {
            f64::from(cosine) < query.keyword_min_cosine && bm25 < EPISODIC_STRONG_KEYWORD_SHARE * ceiling
        }
        _ => false,
    }
}

/// Whether nothing relevant is stored: no candidate's raw cosine reaches
/// the gate's abstention floor, or, when the candidates are turns of a
/// conversation whose speakers the query does not name, its floor for such
/// a query. Rows still without a vector carry no cosine: with none at all
/// there is nothing to judge by.
fn abstains(candidates: &[Candidate], query_words: &BTreeSet<String>, gate: &RelevanceGate) -> bool {
    let Some(best_cosine) = candidates.iter().filter_map(|c| c.cosine).reduce(f32::max) else { return false };
    if gate.abstains(best_cosine) {
        tracing::debug!(best_cosine, floor = gate.abstain_below, "nothing relevant stored: abstaining");
        return true;
    }
    if gate.abstains_unnamed(best_cosine)
        && signals::names_nobody(query_words, candidates.iter().map(|c| c.row.text.as_str()))
    {
        tracing::debug!(
            best_cosine,
            floor = gate.abstain_unnamed_below,
            "a query naming nobody in a conversation: abstaining"
        );
        return true;
    }
    false
}

/// The speaker and time-window factor of a row's score.
fn signal_factor(query: &EpisodicQuery, query_words: &BTreeSet<String>, window: Option<(i64, i64)>, row: &Row) -> f64 {
    let mut factor = 1.0;
    if query.speaker_boost > 0.0
        && signals::speaker(&row.text).is_some_and(|speaker| signals::names_speaker(query_words, &speaker))
    {
        factor *= 1.0 + query.speaker_boost;
    }
    if let Some((start, end)) = window
        && (start..end).contains(&row.created_at)
    {
        factor *= 1.0 + query.time_boost;
    }
    factor
}

/// Rows written in the same sitting as one of the best
/// [`EPISODIC_SESSION_ANCHORS`] rows (within [`EPISODIC_NEIGHBOUR_MAX_GAP_MS`]
/// of it, the anchors themselves excepted) score `× (1 + boost)`.
fn boost_anchor_sessions(scored: &mut [(Candidate, ScoreBreakdown)], boost: f64) {
    let anchors: Vec<(usize, i64)> =
        best(scored, EPISODIC_SESSION_ANCHORS).iter().map(|&i| (i, scored[i].0.row.created_at)).collect();
    for (i, (candidate, breakdown)) in scored.iter_mut().enumerate() {
        let created_at = candidate.row.created_at;
        if anchors.iter().all(|&(anchor, _)| anchor != i)
            && anchors.iter().any(|&(_, at)| (created_at - at).abs() <= EPISODIC_NEIGHBOUR_MAX_GAP_MS)
        {
            breakdown.score *= 1.0 + boost;
        }
    }
}

/// Indexes of `scored`, best first (ties by id), at most `count`.
fn best(scored: &[(Candidate, ScoreBreakdown)], count: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scored.len()).collect();
    order.sort_by(|&a, &b| {
        scored[b].1.score.total_cmp(&scored[a].1.score).then(scored[a].0.row.id.cmp(&scored[b].0.row.id))
    });
    order.truncate(count);
    order
}

/// A source row's id, score, fused score and creation time.
struct Source {
    id: i64,
    score: f64,
    fused: f64,
    created_at: i64,
}

impl Source {
    fn of(scored: &[(Candidate, ScoreBreakdown)], index: usize) -> Self {
        let (candidate, breakdown) = &scored[index];
        Source {
            id: candidate.row.id,
            score: breakdown.score,
            fused: breakdown.fused,
            created_at: candidate.row.created_at,
        }
    }

    /// What the neighbour reader needs of it.
    fn row(&self) -> Row {
        Row {
            id: self.id,
            text: String::new(),
            tags: String::new(),
            importance: 0.0,
            created_at: self.created_at,
            source_ref: None,
            vector: None,
            scope: String::new(),
        }
    }
}

/// Lifts `row` to at least `weight ×` the source's score: a candidate keeps
/// the higher score, a row not yet one is added (admitted as
/// [`Admission::Neighbour`]).
struct Lifter<'a> {
    scored: &'a mut Vec<(Candidate, ScoreBreakdown)>,
    position: HashMap<i64, usize>,
    weight: f64,
    /// No lift goes above this score.
    ceiling: f64,
    relevance_filter: bool,
    now: i64,
}

impl<'a> Lifter<'a> {
    fn new(scored: &'a mut Vec<(Candidate, ScoreBreakdown)>, weight: f64, relevance_filter: bool, now: i64) -> Self {
        let position = scored.iter().enumerate().map(|(i, (candidate, _))| (candidate.row.id, i)).collect();
        Lifter { scored, position, weight: weight.clamp(0.0, 1.0), ceiling: f64::INFINITY, relevance_filter, now }
    }

    /// Caps every lift just under `score` (that of the row the best rows
    /// before it keep their places above), when there is one.
    fn capped_under(mut self, score: Option<f64>) -> Self {
        if let Some(score) = score {
            self.ceiling = score * (1.0 - THREAD_KEEP_MARGIN);
        }
        self
    }

    fn lift(&mut self, source: &Source, row: Row, cosine: Option<f32>) {
        let lifted = (self.weight * source.score).min(self.ceiling);
        if let Some(&i) = self.position.get(&row.id) {
            if self.scored[i].1.score < lifted {
                self.scored[i].1.score = lifted;
            }
            return;
        }
        let breakdown = ScoreBreakdown {
            cosine,
            vector_rank: None,
            keyword_rank: None,
            bm25: None,
            keyword_ceiling: None,
            fused: self.weight * source.fused,
            importance: row.importance,
            age_days: (self.now - row.created_at) as f64 / MS_PER_DAY,
            score: lifted,
            admitted: self.relevance_filter.then_some(Admission::Neighbour),
        };
        self.position.insert(row.id, self.scored.len());
        self.scored.push((
            Candidate { row, cosine, vector_rank: None, keyword_rank: None, bm25: None, bm25_ceiling: None },
            breakdown,
        ));
    }
}

/// Each of the top `limit` rows lifts the rows written next to it to at
/// least `neighbour_weight ×` its score (the rows not yet candidates are
/// read and added, admitted as [`Admission::Neighbour`]). Only the top
/// `limit` can lift anything into the top `limit`: the weight is below 1.
fn propagate_to_neighbours(
    scored: &mut Vec<(Candidate, ScoreBreakdown)>,
    query: &EpisodicQuery,
    now: i64,
    neighbours: &mut NeighbourReader<'_>,
) -> Result<()> {
    let sources: Vec<Source> = best(scored, query.limit).into_iter().map(|i| Source::of(scored, i)).collect();
    let mut lifter = Lifter::new(scored, query.neighbour_weight, query.relevance_filter, now);
    for source in sources {
        for (row, cosine) in neighbours(&source.row(), 1)? {
            lifter.lift(&source, row, cosine);
        }
    }
    Ok(())
}

/// Each of the best `thread_anchors` rows lifts the rows that carry its
/// thread on to at least `thread_weight ×` its score (never above the row
/// ranked `thread_keep` before the lift): the nearest turn of
/// the same speaker before it and after it (within
/// [`EPISODIC_THREAD_REACH`] rows, in its sitting), and, when it asks a
/// question, the next row when another speaker wrote it (the answer). Rows
/// without a `Name:` speaker have no thread.
fn lift_threads(
    scored: &mut Vec<(Candidate, ScoreBreakdown)>,
    query: &EpisodicQuery,
    now: i64,
    neighbours: &mut NeighbourReader<'_>,
) -> Result<()> {
    // One ranking gives the anchors and the row the lifts stay under.
    let anchors = query.thread_anchors.max(1);
    let order = best(scored, anchors.max(query.thread_keep));
    let kept = query.thread_keep.checked_sub(1).and_then(|at| order.get(at)).map(|&i| scored[i].1.score);
    // Only a row with a speaker has a thread.
    let sources: Vec<(Source, String, bool)> = order
        .iter()
        .take(anchors)
        .filter_map(|&i| {
            let text = &scored[i].0.row.text;
            signals::speaker(text).map(|speaker| (Source::of(scored, i), speaker, text.contains('?')))
        })
        .collect();
    let mut lifter = Lifter::new(scored, query.thread_weight, query.relevance_filter, now).capped_under(kept);
    for (source, speaker, asks) in sources {
        let around = neighbours(&source.row(), EPISODIC_THREAD_REACH)?;
        let speakers: Vec<Option<String>> = around.iter().map(|(row, _)| signals::speaker(&row.text)).collect();
        let same = |i: &usize| speakers[*i].as_deref() == Some(speaker.as_str());
        let before = (0..around.len()).rev().filter(|&i| around[i].0.id < source.id).find(same);
        let after = (0..around.len()).filter(|&i| around[i].0.id > source.id).find(same);
        let answer = (0..around.len()).find(|&i| {
            asks && around[i].0.id == source.id + 1 && speakers[i].as_deref().is_some_and(|other| other != speaker)
        });
        let mut picked: Vec<usize> = [before, after, answer].into_iter().flatten().collect();
        picked.sort_unstable();
        picked.dedup();
        let mut around: Vec<Option<(Row, Option<f32>)>> = around.into_iter().map(Some).collect();
        for i in picked {
            if let Some((row, cosine)) = around[i].take() {
                lifter.lift(&source, row, cosine);
            }
        }
    }
    Ok(())
}

/// The active rows written up to `reach` rows before and after `row`
/// (ids `row.id ± 1 ..= reach`) within [`EPISODIC_NEIGHBOUR_MAX_GAP_MS`]
/// of it, by id.
pub(crate) fn read_neighbours(
    tx: &mut dyn StoreTx,
    row: &Row,
    reach: i64,
    space: Option<&str>,
    query_vector: Option<&[f32]>,
) -> Result<Vec<(Row, Option<f32>)>> {
    let with_vector = query_vector.is_some();
    let ids: Vec<(i64, bool)> =
        (row.id - reach..=row.id + reach).filter(|&id| id != row.id).map(|id| (id, with_vector)).collect();
    let mut found = fetch_rows(tx, &ids, space)?;
    let mut out = Vec::new();
    for (id, _) in ids {
        let Some(neighbour) = found.remove(&id) else { continue };
        if (neighbour.created_at - row.created_at).abs() > EPISODIC_NEIGHBOUR_MAX_GAP_MS {
            continue;
        }
        let cosine = match (&neighbour.vector, query_vector) {
            (Some(stored), Some(vector)) if stored.len() == vector.len() => {
                Some(cairn_memory_vector::dot(vector, stored))
            }
            _ => None,
        };
        out.push((neighbour, cosine));
    }
    Ok(out)
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

impl Episodic<'_> {
    /// The work of [`MemoryDb::search_episodic`](crate::MemoryDb::search_episodic).
    pub(crate) fn search_episodic(&self, query: &EpisodicQuery) -> Result<Vec<EpisodicHit>> {
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
    pub(crate) fn gather(
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
        let keyword_k = keyword_pool(query) * factor;
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
        let exact_copy = vector_access.as_ref().and_then(|(vector, _, access)| exact_copy(vector, access));
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
                let hits = vector_hits(tx, query, factor, gate, (vector, space, access), skip_scan)?;
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
                    self.backend_keyword_hits(tx, fts_query, keyword_k, *start)?
                }
                None => Vec::new(),
            };
            for (rank, (id, bm25)) in hits.into_iter().enumerate() {
                by_id.entry(id).or_default().1 = Some((rank + 1, bm25));
            }
            Ok(())
        })?;
        let found = Found { by_id, rows, keyword_cosines, exact_copy, bm25_ceiling };
        candidates(tx, query, gate, query_vector, space, found)
    }

    /// The keyword hits of a backend with its own keyword index; `start`
    /// starts the in-memory index's build in the background once they are in.
    fn backend_keyword_hits(
        &self,
        tx: &mut dyn StoreTx,
        fts_query: &str,
        k: usize,
        start: bool,
    ) -> Result<Vec<(i64, f64)>> {
        let hits = tx.episodic_keyword_hits(fts_query, k)?.unwrap_or_default();
        if start {
            self.start_keyword_build();
        }
        Ok(hits)
    }

    /// Records `last_accessed` on returned rows, outside the read path and
    /// in batches (see [`crate::episodic::index::PendingTouches`]).
    pub(crate) fn touch_episodic(&self, hits: &[EpisodicHit], at: i64) {
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

    /// The work of [`MemoryDb::write_touches`](crate::MemoryDb::write_touches).
    pub(crate) fn write_touches(&self) -> usize {
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

/// How many keyword hits a search reads (before the widening `factor`).
fn keyword_pool(query: &EpisodicQuery) -> usize {
    match query.mode {
        RetrievalMode::Hybrid => query.candidates.clamp(1, MMR_MAX_POOL),
        _ => query.limit.clamp(HYBRID_CANDIDATES, MMR_MAX_POOL),
    }
}

/// The index's exact copy of the vectors, when it has one: its own, or the
/// vector file of an index that keeps codes only.
fn exact_copy<'a>(vector: &'a [f32], access: &IndexAccess) -> Option<ExactCopy<'a>> {
    match access {
        IndexAccess::Ready(index, vectors) if index.exact() || vectors.is_some() => {
            Some((vector, Arc::clone(index), vectors.clone()))
        }
        _ => None,
    }
}

/// What a search's two lists found before the rows are scored: each row's
/// place in either list, the rows read so far, the keyword hits' exact
/// cosines, the index's exact copy of the vectors, the keyword ceiling.
struct Found<'a> {
    by_id: HashMap<i64, ListPositions>,
    rows: HashMap<i64, Row>,
    keyword_cosines: HashMap<i64, f32>,
    exact_copy: Option<ExactCopy<'a>>,
    bm25_ceiling: Option<f64>,
}

/// The vector list: the index (or a scan of the stored vectors) probed
/// for the pool, in widening probes under the relevance filter.
fn vector_hits(
    tx: &mut dyn StoreTx,
    query: &EpisodicQuery,
    factor: usize,
    gate: &RelevanceGate,
    (vector, space, access): (&[f32], &str, &IndexAccess),
    skip_scan: bool,
) -> Result<Vec<Hit>> {
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
    let pool = if query.mode == RetrievalMode::Hybrid { query.candidates.clamp(1, MMR_MAX_POOL) } else { MMR_MAX_POOL };
    let pool = pool * factor;
    if query.relevance_filter {
        // Hits come in cosine order: once a probe ends below the lowest
        // gate, a wider one adds nothing admissible.
        let mut hits = Vec::new();
        let probe_sizes = FILTERED_PROBES.map(|k| k.min(pool));
        for (at, &k) in probe_sizes.iter().enumerate() {
            let next = probe_sizes.get(at + 1).copied().unwrap_or(0);
            hits = search(k, next)?;
            let may_continue = hits.len() == k && hits.last().is_some_and(|hit| hit.cosine >= gate.lowest());
            if !may_continue || k == pool {
                break;
            }
        }
        Ok(hits)
    } else {
        search(pool, 0)
    }
}

/// The candidates of a search from what its lists found: keyword-only rows
/// scored from the index's exact copy, rows no gate can admit left unread,
/// the rest read and kept within the query's scopes; how many the scopes
/// dropped.
fn candidates(
    tx: &mut dyn StoreTx,
    query: &EpisodicQuery,
    gate: &RelevanceGate,
    query_vector: Option<&[f32]>,
    space: Option<&str>,
    found: Found<'_>,
) -> Result<(Vec<Candidate>, usize)> {
    let Found { by_id, mut rows, keyword_cosines, exact_copy, bm25_ceiling } = found;
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
