//! Hybrid semantic retrieval on [`MemoryDb`]: the snapshot of
//! [`crate::snapshot`], kept current with the semantic revision, and the
//! hybrid scoring over it. Scoring is an exact scan: semantic memory holds
//! at most a few thousand entries.

use crate::constants::{KEY_MATCH_WEIGHT, SEMANTIC_BLOCK_HEADER, SEMANTIC_KEYWORD_WEIGHT, SEMANTIC_VECTOR_WEIGHT};
use crate::db::MemoryDb;
use crate::error::{MemoryError, Result};
use crate::keywords;
use crate::scope::ScopeFilter;
use crate::snapshot::{Snapshot, SnapshotEntry, derive_entry, dot, unit};
use crate::store::Counter;
use crate::types::SemanticHit;
use std::collections::HashMap;
use std::sync::Arc;

impl MemoryDb {
    /// The current snapshot: reused when the revision has not moved; rebuilt
    /// otherwise, re-deriving only the entries whose row changed.
    pub(crate) fn snapshot(&self) -> Result<Arc<Snapshot>> {
        let space = self.space();
        if let Some(cached) = self.snapshot.current.lock().clone().filter(|cached| cached.space == space) {
            let revision = self.rows().read("reading the semantic revision", |tx| tx.revision(Counter::Semantic))?;
            if cached.revision == revision {
                return Ok(cached);
            }
        }
        let _rebuilding = self.snapshot.rebuild.lock();
        let cached = self.snapshot.current.lock().clone();
        // One read transaction: the revision and the rows it describes are consistent.
        let snapshot = self.rows().read("loading the semantic snapshot", |tx| {
            let revision = tx.revision(Counter::Semantic)?;
            let cached = cached.filter(|cached| cached.space == space);
            if let Some(cached) = cached.as_ref().filter(|cached| cached.revision == revision) {
                return Ok(cached.clone());
            }
            let previous: HashMap<&str, &Arc<SnapshotEntry>> = cached
                .as_ref()
                .map(|cached| cached.entries.iter().map(|entry| (entry.key.as_str(), entry)).collect())
                .unwrap_or_default();
            let heads = tx.semantic_heads()?;
            let reused: Vec<Option<Arc<SnapshotEntry>>> = heads
                .iter()
                .map(|head| {
                    previous
                        .get(head.key.as_str())
                        .filter(|entry| {
                            entry.version == head.version
                                && entry.space == head.embedding_space
                                && entry.updated_at == head.updated_at
                        })
                        .map(|entry| Arc::clone(entry))
                })
                .collect();
            // The changed rows in one read, with their vectors in this space.
            let changed: Vec<&str> = heads
                .iter()
                .zip(&reused)
                .filter(|(_, reused)| reused.is_none())
                .map(|(head, _)| head.key.as_str())
                .collect();
            let mut fresh: HashMap<String, (crate::store::SemanticRow, Option<Vec<f32>>)> = tx
                .semantic_rows_with_vectors(&changed, space.as_deref())?
                .into_iter()
                .map(|(row, vector)| (row.key.clone(), (row, vector)))
                .collect();
            let rederived = changed.len();
            let mut entries = Vec::with_capacity(heads.len());
            for (head, reused) in heads.into_iter().zip(reused) {
                if let Some(entry) = reused {
                    entries.push(entry);
                    continue;
                }
                let (row, vector) = fresh.remove(&head.key).ok_or_else(|| MemoryError::CorruptRow {
                    table: "semantic_memory",
                    reason: format!("row {} vanished inside a read transaction", head.key),
                })?;
                let vector = if head.embedding_space.is_some() { vector } else { None };
                let mut entry =
                    derive_entry(head.key, head.version, head.embedding_space, &row.value, vector, space.as_deref())?;
                entry.updated_at = head.updated_at;
                entries.push(Arc::new(entry));
            }
            let mut key_postings: HashMap<Arc<str>, Vec<u32>> = HashMap::new();
            let mut value_postings: HashMap<Arc<str>, Vec<u32>> = HashMap::new();
            for (index, entry) in entries.iter().enumerate() {
                for form in &entry.key_forms {
                    key_postings.entry(Arc::clone(form)).or_default().push(index as u32);
                }
                for form in &entry.value_forms {
                    value_postings.entry(Arc::clone(form)).or_default().push(index as u32);
                }
            }
            tracing::debug!(revision, entries = entries.len(), rederived, "rebuilt the semantic snapshot");
            Ok(Arc::new(Snapshot { revision, space: space.clone(), entries, key_postings, value_postings }))
        })?;
        let mut current = self.snapshot.current.lock();
        if current.as_ref().is_none_or(|current| current.revision <= snapshot.revision) {
            *current = Some(snapshot.clone());
        }
        Ok(snapshot)
    }

    /// Scores every live entry against `query`: `(entry index, score, keyword, vector)`.
    fn score(&self, snapshot: &Snapshot, query: &str) -> Vec<(usize, f64, f64, Option<f64>)> {
        let terms = keywords::terms(query);
        let mut keyword = vec![0.0f64; snapshot.entries.len()];
        if !terms.is_empty() {
            let mut in_key = vec![false; snapshot.entries.len()];
            let mut in_value = vec![false; snapshot.entries.len()];
            for term in &terms {
                in_key.iter_mut().for_each(|flag| *flag = false);
                in_value.iter_mut().for_each(|flag| *flag = false);
                for form in [&term.word, &term.stem] {
                    for &index in snapshot.key_postings.get(form.as_str()).into_iter().flatten() {
                        in_key[index as usize] = true;
                    }
                    for &index in snapshot.value_postings.get(form.as_str()).into_iter().flatten() {
                        in_value[index as usize] = true;
                    }
                }
                for (index, score) in keyword.iter_mut().enumerate() {
                    if in_key[index] {
                        *score += KEY_MATCH_WEIGHT;
                    }
                    if in_value[index] {
                        *score += 1.0;
                    }
                }
            }
            let max = (KEY_MATCH_WEIGHT + 1.0) * terms.len() as f64;
            keyword.iter_mut().for_each(|score| *score /= max);
        }
        // The query vector is computed outside every lock; none is held here.
        let query_vector =
            if query.trim().is_empty() { None } else { self.try_embed(query).map(|(vector, _)| unit(vector)) };
        snapshot
            .entries
            .iter()
            .enumerate()
            .map(|(index, entry)| {
                let vector_score = match (&query_vector, &entry.vector) {
                    // Both are unit length, so the dot product is the cosine.
                    (Some(query), Some(vector)) if query.len() == vector.len() => {
                        Some(f64::from(dot(query, vector)).clamp(0.0, 1.0))
                    }
                    _ => None,
                };
                let score = match vector_score {
                    Some(cosine) => SEMANTIC_VECTOR_WEIGHT * cosine + SEMANTIC_KEYWORD_WEIGHT * keyword[index],
                    None => keyword[index],
                };
                (index, score, keyword[index], vector_score)
            })
            .collect()
    }

    /// The `limit` best live entries for `query` (lessons included), best
    /// first. The score is `0.6 × cosine + 0.4 × keyword` when the query and
    /// the entry have vectors, the keyword score alone otherwise; the
    /// keyword score counts query words (and their snowball stems) found in
    /// the key three times as much as those found in the value. Entries
    /// scoring 0 are left out.
    pub fn search_semantic(&self, query: &str, limit: usize) -> Result<Vec<SemanticHit>> {
        self.search_semantic_in(query, limit, &ScopeFilter::All)
    }

    /// [`search_semantic`](Self::search_semantic) over the rows `scopes` admits.
    pub fn search_semantic_in(&self, query: &str, limit: usize, scopes: &ScopeFilter) -> Result<Vec<SemanticHit>> {
        let _span = tracing::debug_span!("search_semantic", limit).entered();
        let snapshot = self.snapshot()?;
        let mut scored: Vec<_> = self
            .score(&snapshot, query)
            .into_iter()
            .filter(|(index, score, ..)| *score > 0.0 && scopes.admits(snapshot.entries[*index].scope.as_str()))
            .collect();
        scored.sort_by(|a, b| {
            b.1.total_cmp(&a.1).then_with(|| snapshot.entries[a.0].key.cmp(&snapshot.entries[b.0].key))
        });
        scored.truncate(limit);
        Ok(scored
            .into_iter()
            .map(|(index, score, keyword_score, vector_score)| {
                let entry = &snapshot.entries[index];
                SemanticHit {
                    key: entry.plain_key.clone(),
                    scope: entry.scope.clone(),
                    value: entry.value.clone(),
                    score,
                    keyword_score,
                    vector_score,
                }
            })
            .collect())
    }

    /// The `[Semantic Memory]` block for a prompt: one `key: value` line per
    /// live non-lesson entry, best match for `query` first (the most
    /// recently updated first among equals), values redacted and kept on one
    /// line. Lowest-scored lines are dropped until the block fits
    /// `cap_chars`; an empty string when nothing fits or nothing is stored.
    pub fn semantic_context(&self, query: &str, cap_chars: usize) -> Result<String> {
        self.semantic_context_in(query, cap_chars, &ScopeFilter::All)
    }

    /// [`semantic_context`](Self::semantic_context) over the rows `scopes` admits.
    pub fn semantic_context_in(&self, query: &str, cap_chars: usize, scopes: &ScopeFilter) -> Result<String> {
        let _span = tracing::debug_span!("semantic_context", cap_chars).entered();
        let snapshot = self.snapshot()?;
        let mut scored: Vec<_> = self
            .score(&snapshot, query)
            .into_iter()
            .filter(|(index, ..)| {
                let entry = &snapshot.entries[*index];
                !entry.is_lesson && scopes.admits(entry.scope.as_str())
            })
            .collect();
        scored.sort_by(|a, b| {
            let (left, right) = (&snapshot.entries[a.0], &snapshot.entries[b.0]);
            b.1.total_cmp(&a.1)
                .then_with(|| right.updated_at.cmp(&left.updated_at))
                .then_with(|| left.key.cmp(&right.key))
        });
        let mut block = String::from(SEMANTIC_BLOCK_HEADER);
        let mut used = block.chars().count();
        let mut kept = 0;
        for (index, ..) in &scored {
            let entry = &snapshot.entries[*index];
            let line = &entry.line;
            let cost = 1 + entry.line_chars;
            if used + cost > cap_chars {
                break;
            }
            block.push('\n');
            block.push_str(line);
            used += cost;
            kept += 1;
        }
        tracing::debug!(kept, dropped = scored.len() - kept, "semantic context built");
        Ok(if kept == 0 { String::new() } else { block })
    }
}
