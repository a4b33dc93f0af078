//! The `[Episodic Memory]` context block.

use serde::Serialize;

use super::EpisodicHit;
use crate::constants::{EPISODIC_BLOCK_HEADER, EPISODIC_FRAGMENT_CHARS};
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
