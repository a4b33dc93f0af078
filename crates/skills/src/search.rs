//! `skill_search`: find installed skills by name and description, falling
//! back to bodies only when metadata finds nothing.

use std::path::PathBuf;

use serde::Serialize;
use tracing::debug;

use crate::catalog::SkillCatalog;
use crate::constants::{SEARCH_BODY_SCAN_BYTES, SEARCH_BODY_SCAN_SKILLS, SEARCH_MAX_LIMIT};

/// Where a search hit matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchedIn {
    /// Name or description.
    Metadata,
    /// The body (only searched on a metadata miss).
    Body,
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SearchHit {
    /// SkillCatalog name.
    pub name: String,
    /// Description.
    pub description: String,
    /// `SKILL.md` path.
    pub path: PathBuf,
    /// Where the terms were found.
    pub matched_in: MatchedIn,
    /// How many query terms matched.
    pub score: usize,
}

impl SkillCatalog {
    /// Searches installed skills. Query terms are case-folded words; a skill
    /// scores one point per term found in its name or description. Only if
    /// no skill matches that way are bodies scanned (the first
    /// [`SEARCH_BODY_SCAN_BYTES`] of at most [`SEARCH_BODY_SCAN_SKILLS`]
    /// skills). `limit` is clamped to `1..=50`. Searching records no usage.
    pub fn search(&self, query: &str, limit: usize) -> Vec<SearchHit> {
        let span = tracing::debug_span!("skills.search", limit);
        let _enter = span.enter();
        let limit = limit.clamp(1, SEARCH_MAX_LIMIT);
        let terms: Vec<String> = query
            .split(|ch: char| !ch.is_alphanumeric() && ch != '-' && ch != '/')
            .filter(|term| !term.is_empty())
            .map(str::to_lowercase)
            .collect();
        if terms.is_empty() {
            return Vec::new();
        }
        let snapshot = self.snapshot();
        let score = |haystack: &str| terms.iter().filter(|term| haystack.contains(term.as_str())).count();
        let mut hits: Vec<SearchHit> = snapshot
            .skills
            .iter()
            .filter_map(|skill| {
                let haystack = format!("{} {}", skill.name, skill.description()).to_lowercase();
                let score = score(&haystack);
                (score > 0).then(|| SearchHit {
                    name: skill.name.clone(),
                    description: skill.description().to_owned(),
                    path: skill.path.clone(),
                    matched_in: MatchedIn::Metadata,
                    score,
                })
            })
            .collect();
        if hits.is_empty() {
            hits = snapshot
                .skills
                .iter()
                .take(SEARCH_BODY_SCAN_SKILLS)
                .filter_map(|skill| {
                    let body = skill.body();
                    let body = body[..body.floor_char_boundary(SEARCH_BODY_SCAN_BYTES)].to_lowercase();
                    let score = score(&body);
                    (score > 0).then(|| SearchHit {
                        name: skill.name.clone(),
                        description: skill.description().to_owned(),
                        path: skill.path.clone(),
                        matched_in: MatchedIn::Body,
                        score,
                    })
                })
                .collect();
        }
        hits.sort_by(|a, b| b.score.cmp(&a.score).then_with(|| a.name.cmp(&b.name)));
        hits.truncate(limit);
        debug!(terms = terms.len(), hits = hits.len(), "skill search");
        hits
    }
}
