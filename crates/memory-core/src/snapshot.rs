//! The semantic snapshot that [`crate::search`] scores: each live entry's
//! value, context line, keyword forms and unit vector, derived once per row
//! version.
//!
//! The snapshot (values, keyword postings, decoded vectors) is rebuilt only
//! when the database's semantic revision changes, which every accepted
//! change bumps in its own transaction; so a snapshot is never stale, even
//! after another process wrote.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::constants::LESSON_PREFIX;
use crate::error::{MemoryError, Result};
use crate::keywords;
use crate::validate;

pub(crate) struct SnapshotEntry {
    /// The stored key (`<key>@<project>` for a project's row).
    pub(super) key: String,
    /// The key as written, without its scope.
    pub(super) plain_key: String,
    /// The row's scope.
    pub(super) scope: crate::scope::Scope,
    /// Identifies the row content this entry was derived from: a change
    /// bumps the version, a backfill changes the space.
    pub(super) version: i64,
    pub(super) space: Option<String>,
    pub(super) value: serde_json::Value,
    /// `key: value` on one line, redacted, as the context block shows it.
    pub(super) line: String,
    pub(super) line_chars: usize,
    /// Unit-length vector in the current space, if stored.
    pub(super) vector: Option<Vec<f32>>,
    pub(super) key_forms: Vec<Arc<str>>,
    pub(super) value_forms: Vec<Arc<str>>,
    pub(super) is_lesson: bool,
    pub(super) updated_at: i64,
}

pub(crate) struct Snapshot {
    pub(super) revision: i64,
    pub(super) space: Option<String>,
    pub(super) entries: Vec<Arc<SnapshotEntry>>,
    /// Form (word or stem) → entries whose key contains it.
    pub(super) key_postings: HashMap<Arc<str>, Vec<u32>>,
    /// Form → entries whose value contains it.
    pub(super) value_postings: HashMap<Arc<str>, Vec<u32>>,
}

#[derive(Default)]
pub(crate) struct SnapshotCache {
    pub(super) current: Mutex<Option<Arc<Snapshot>>>,
    /// Held while one thread rebuilds: the others wait for its result
    /// instead of all rebuilding the same revision at once.
    pub(super) rebuild: Mutex<()>,
}

pub(super) fn unit(mut vector: Vec<f32>) -> Vec<f32> {
    cairn_embedder::l2_normalize(&mut vector);
    vector
}

pub(super) fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Eight independent lanes so the compiler vectorises the loop.
    let mut lanes = [0.0f32; 8];
    let (a_chunks, b_chunks) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a_chunks.remainder().iter().zip(b_chunks.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in a_chunks.zip(b_chunks) {
        for lane in 0..8 {
            lanes[lane] += x[lane] * y[lane];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

pub(super) fn derive_entry(
    key: String,
    version: i64,
    entry_space: Option<String>,
    value_text: &str,
    vector: Option<Vec<f32>>,
    space: Option<&str>,
) -> Result<SnapshotEntry> {
    let value: serde_json::Value = serde_json::from_str(value_text).map_err(|error| MemoryError::CorruptRow {
        table: "semantic_memory",
        reason: format!("value of {key}: {error}"),
    })?;
    let vector = match (space, &entry_space, vector) {
        (Some(space), Some(entry_space), Some(vector)) if space == entry_space => Some(unit(vector)),
        _ => None,
    };
    let (plain_key, scope) = crate::scope::split_stored_key(&key);
    let (plain_key, scope) = (plain_key.to_owned(), scope);
    let key_forms = keywords::forms(&plain_key).into_iter().map(Arc::from).collect();
    let value_forms = keywords::forms(&validate::screen_text(&value)).into_iter().map(Arc::from).collect();
    let shown = validate::display_value(&value).replace(['\n', '\r'], " ");
    let line = cairn_guard::redact_all(&format!("{plain_key}: {shown}")).into_owned();
    Ok(SnapshotEntry {
        is_lesson: key.starts_with(LESSON_PREFIX),
        plain_key,
        scope,
        line_chars: line.chars().count(),
        key,
        version,
        space: entry_space,
        value,
        line,
        vector,
        key_forms,
        value_forms,
        updated_at: 0,
    })
}
