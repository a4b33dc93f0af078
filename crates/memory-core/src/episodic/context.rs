//! The `[Episodic Memory]` context block.

use serde::Serialize;

use super::{Episodic, EpisodicHit, EpisodicQuery};
use crate::constants::{EPISODIC_BLOCK_HEADER, EPISODIC_FRAGMENT_CHARS, EPISODIC_INJECT_CAP};
use crate::error::Result;
use crate::validate;

/// A rendered context block and the hits it holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EpisodicContext {
    /// The block (empty when nothing was admitted).
    pub block: String,
    /// The admitted hits that fit, in block order.
    pub hits: Vec<EpisodicHit>,
}

/// Renders admitted hits: the header, then one `- fragment` line per hit
/// (credentials and exfiltration URLs redacted, cut to 1,500 characters),
/// skipping lines that would take the block past `budget` characters.
pub(crate) fn render(hits: Vec<EpisodicHit>, budget: usize, quote: &dyn Fn(&str) -> String) -> EpisodicContext {
    let mut block = String::from(EPISODIC_BLOCK_HEADER);
    let mut used = EPISODIC_BLOCK_HEADER.chars().count();
    let mut kept = Vec::new();
    if used >= budget {
        return EpisodicContext { block: String::new(), hits: kept };
    }
    for hit in hits {
        let fragment = validate::cut(&quote(&cairn_guard::redact_all(&hit.text)), EPISODIC_FRAGMENT_CHARS);
        let fragment = fragment.replace('\n', " ");
        let line_chars = 3 + fragment.chars().count(); // "\n- " + fragment
        if used + line_chars > budget {
            continue;
        }
        block.push_str("\n- ");
        block.push_str(&fragment);
        used += line_chars;
        kept.push(hit);
    }
    if kept.is_empty() {
        block.clear();
    }
    EpisodicContext { block, hits: kept }
}

impl Episodic<'_> {
    /// The work of [`MemoryDb::episodic_context`](crate::MemoryDb::episodic_context).
    pub(crate) fn episodic_context(&self, query: &str, limit: usize, cap: usize) -> Result<String> {
        Ok(self.episodic_context_for(&self.episodic_query(query).limit(limit), cap)?.block)
    }

    /// The work of [`MemoryDb::episodic_query`](crate::MemoryDb::episodic_query).
    pub(crate) fn episodic_query(&self, text: impl Into<String>) -> EpisodicQuery {
        let config = self.episodic_config;
        EpisodicQuery::new(text).mode(config.mode).fusion(config.fusion).prior_weight(config.prior_weight)
    }

    /// The work of [`MemoryDb::episodic_context_for`](crate::MemoryDb::episodic_context_for).
    pub(crate) fn episodic_context_for(&self, query: &EpisodicQuery, cap: usize) -> Result<EpisodicContext> {
        self.episodic_context_quoted(query, cap, &|text| text.to_owned())
    }

    /// The work of [`MemoryDb::episodic_context_quoted`](crate::MemoryDb::episodic_context_quoted).
    pub(crate) fn episodic_context_quoted(
        &self,
        query: &EpisodicQuery,
        cap: usize,
        quote: &dyn Fn(&str) -> String,
    ) -> Result<EpisodicContext> {
        let query = query.clone().relevance_filter(true);
        let hits = self.search_episodic(&query)?;
        Ok(render(hits, cap.min(EPISODIC_INJECT_CAP), quote))
    }
}
