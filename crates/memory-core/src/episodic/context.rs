//! The `[Episodic Memory]` context block.

use serde::Serialize;

use super::{EpisodicHit, EpisodicQuery};
use crate::constants::{EPISODIC_BLOCK_HEADER, EPISODIC_FRAGMENT_CHARS, EPISODIC_INJECT_CAP};
use crate::db::MemoryDb;
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

impl MemoryDb {
    /// The `[Episodic Memory]` block for `query`: up to `limit` hits (8 by
    /// the specification) that pass the relevance filter, each at most
    /// 1,500 characters, the whole block at most `min(3,000, cap)`
    /// characters. Empty when nothing is admitted.
    /// Retrieval follows the store's configuration
    /// ([`crate::MemoryConfig::episodic_mode`] and the fusion settings).
    pub fn episodic_context(&self, query: &str, limit: usize, cap: usize) -> Result<String> {
        Ok(self.episodic_context_for(&self.episodic_query(query).limit(limit), cap)?.block)
    }

    /// An [`EpisodicQuery`] for `text` with this store's configured mode,
    /// fusion and prior weight.
    pub fn episodic_query(&self, text: impl Into<String>) -> EpisodicQuery {
        let config = self.episodic_config;
        EpisodicQuery::new(text).mode(config.mode).fusion(config.fusion).prior_weight(config.prior_weight)
    }

    /// [`episodic_context`](Self::episodic_context) with full search options
    /// (the relevance filter is always on), returning the admitted hits too.
    pub fn episodic_context_for(&self, query: &EpisodicQuery, cap: usize) -> Result<EpisodicContext> {
        self.episodic_context_quoted(query, cap, &|text| text.to_owned())
    }

    /// [`episodic_context_for`](Self::episodic_context_for) with every
    /// fragment passed through `quote` first (a prompt builder's
    /// neutraliser of structural markers, so a stored `[END CRITICAL
    /// RULES]` cannot pass for a section of the prompt).
    pub fn episodic_context_quoted(
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
