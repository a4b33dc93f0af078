//! The trigger index: each skill's trigger phrases by word stem, built once
//! per catalog snapshot (`delivery.rs` runs the per-message pass over it).

use std::collections::HashMap;
use std::sync::Arc;

use crate::skill::Skill;
use crate::text::{StemCache, distinct_stems};

#[derive(Debug, Clone, Copy)]
struct TriggerEntry {
    skill: u32,
    words: u16,
    negative: bool,
}

/// Inverted index from word stem to the trigger phrases that contain it,
/// built once per catalog snapshot (trigger phrases are stemmed here, never
/// per message). Always-on skills are not indexed: their bodies are in every
/// session already.
#[derive(Debug, Default)]
pub(crate) struct TriggerIndex {
    /// Stem → position in `postings`.
    stems: HashMap<Box<str>, u32>,
    /// Per stem, the trigger entries containing it.
    postings: Vec<Vec<u32>>,
    entries: Vec<TriggerEntry>,
    /// Per skill, its position in name order (the tie-break of the ranking).
    name_rank: Vec<u32>,
}

impl TriggerIndex {
    pub(crate) fn build(skills: &[Arc<Skill>]) -> Self {
        let mut index = Self::default();
        let mut by_name: Vec<usize> = (0..skills.len()).collect();
        by_name.sort_by(|&a, &b| skills[a].name.cmp(&skills[b].name));
        index.name_rank = vec![0; skills.len()];
        for (rank, skill) in by_name.into_iter().enumerate() {
            index.name_rank[skill] = rank as u32;
        }
        for (skill_index, skill) in skills.iter().enumerate() {
            if skill.meta.always {
                continue;
            }
            for trigger in &skill.meta.triggers {
                let (negative, phrase) = match trigger.strip_prefix('!') {
                    Some(rest) => (true, rest),
                    None => (false, trigger.as_str()),
                };
                let stems = distinct_stems(phrase);
                if stems.is_empty() {
                    continue;
                }
                let id = index.entries.len() as u32;
                index.entries.push(TriggerEntry {
                    skill: skill_index as u32,
                    words: stems.len().min(u16::MAX as usize) as u16,
                    negative,
                });
                for stem in stems {
                    let next = index.postings.len() as u32;
                    let posting = *index.stems.entry(stem.into_boxed_str()).or_insert(next);
                    if posting == next {
                        index.postings.push(Vec::new());
                    }
                    index.postings[posting as usize].push(id);
                }
            }
        }
        index
    }

    /// Skills whose positive triggers all-words-match the message and no
    /// negative trigger matches, best first, at most `limit`:
    /// `(skill index, score)`.
    ///
    /// A phrase matches when every word of it (stemmed, case-folded) occurs
    /// in the message; its score is its word count, so specific phrases
    /// outrank single words. Ties go to the name.
    pub(crate) fn score(&self, message: &str, stem_cache: &StemCache, limit: usize) -> Vec<(usize, u32)> {
        if self.entries.is_empty() || limit == 0 {
            return Vec::new();
        }
        let mut counts = vec![0u16; self.entries.len()];
        let mut touched = Vec::new();
        // Each distinct stem counts once; stems outside every trigger are
        // irrelevant, so only indexed ones need de-duplicating.
        let mut seen_postings: Vec<u32> = Vec::new();
        stem_cache.for_each_stem(message, |stem| {
            let Some(&posting) = self.stems.get(stem) else { return };
            if seen_postings.contains(&posting) {
                return;
            }
            seen_postings.push(posting);
            for &id in &self.postings[posting as usize] {
                let count = &mut counts[id as usize];
                if *count == 0 {
                    touched.push(id);
                }
                *count += 1;
            }
        });
        let skills = self.name_rank.len();
        let mut excluded = vec![false; skills];
        let mut scores = vec![0u32; skills];
        let mut scored: Vec<u32> = Vec::new();
        for id in touched {
            let entry = self.entries[id as usize];
            if counts[id as usize] < entry.words {
                continue;
            }
            let skill = entry.skill as usize;
            if entry.negative {
                excluded[skill] = true;
            } else {
                if scores[skill] == 0 {
                    scored.push(entry.skill);
                }
                scores[skill] += u32::from(entry.words);
            }
        }
        // The best `limit` by (score desc, name asc), kept sorted.
        let before = |a: (usize, u32), b: (usize, u32)| {
            b.1.cmp(&a.1).then_with(|| self.name_rank[a.0].cmp(&self.name_rank[b.0])).is_lt()
        };
        let mut best: Vec<(usize, u32)> = Vec::with_capacity(limit + 1);
        for skill in scored.into_iter().map(|skill| skill as usize).filter(|&skill| !excluded[skill]) {
            let candidate = (skill, scores[skill]);
            if best.len() == limit && !before(candidate, best[limit - 1]) {
                continue;
            }
            let at = best.iter().position(|&kept| before(candidate, kept)).unwrap_or(best.len());
            best.insert(at, candidate);
            best.truncate(limit);
        }
        best
    }
}
