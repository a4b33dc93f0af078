//! [`MemoryDb::episodic_context`]: the `[Episodic Memory]` block for a
//! prompt, rendered by [`crate::episodic::context`].

use crate::constants::EPISODIC_INJECT_CAP;
use crate::db::MemoryDb;
use crate::episodic::EpisodicQuery;
use crate::episodic::context::{EpisodicContext, render};
use crate::error::Result;

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
