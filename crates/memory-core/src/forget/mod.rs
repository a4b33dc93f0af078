//! Forgetting: one operation that removes what a request selects from
//! every layer of the store (episodic rows, facts, lessons, transcript
//! messages) and keeps fingerprints of it, so the same thing is refused
//! when a later write (consolidation, an import, a restore, a remember)
//! would bring it back.
//!
//! A fingerprint is never the text: it is the SHA-256 of the normalised
//! text and the set of its hashed word bigrams ("shingles"). A new text
//! brings a forgotten one back when its normalised text is the same, or
//! when it *contains* the forgotten one: at least
//! [`FORGOTTEN_CONTAINMENT`] of the forgotten text's shingles occur in it
//! (Broder's containment measure; a text of fewer than
//! [`MIN_CONTAINMENT_SHINGLES`] shingles is matched exactly only, so
//! forgetting "vim" does not refuse every later sentence naming vim).
//! Fingerprints block in every scope: what was forgotten in one project
//! does not come back through the global layer.
//!
//! The Markdown history entries live beside the store; their part of a
//! forget is [`crate::MemoryFiles::forget_history`].

use std::collections::BTreeSet;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::clock::now_ms;
use crate::constants::LESSON_PREFIX;
use crate::db::MemoryDb;
use crate::error::{MemoryError, Rejected, Result};
use crate::scope::{Scope, ScopeFilter, split_stored_key, stored_key_scope};
use crate::semantic::{PreparedWrite, apply_delete, apply_to_existing, load_existing, memory_type};
use crate::store::{ForgottenRow, SessionMessage, StoreTx};
use crate::types::{Source, WriteOutcome};
use crate::validate;

/// Share of a forgotten text's shingles a new text must hold to bring it back.
pub const FORGOTTEN_CONTAINMENT: f64 = 0.8;
/// Fewest shingles a forgotten text needs to be matched by containment.
pub const MIN_CONTAINMENT_SHINGLES: usize = 3;
/// Characters of a listed item's text in a forget report.
const LISTED_CHARS: usize = 160;

/// What to forget. A row goes when it matches every criterion given; at
/// least one of `episode_ids`, `keys`, `query`, a date bound, or a
/// [`ScopeFilter::Only`] scope must be given (an empty request is refused
/// rather than read as "everything").
#[derive(Debug, Clone)]
pub struct ForgetRequest {
    /// Episodic row ids.
    pub episode_ids: Vec<i64>,
    /// Fact or lesson keys (as written, without a scope).
    pub keys: Vec<String>,
    /// Text every forgotten item contains (case and spacing ignored).
    pub query: Option<String>,
    /// Items created at or after this time (Unix milliseconds).
    pub from: Option<i64>,
    /// Items created before this time (Unix milliseconds).
    pub until: Option<i64>,
    /// Which scopes the forget reaches.
    pub scopes: ScopeFilter,
    /// List what would go and change nothing.
    pub dry_run: bool,
    /// Who asks.
    pub source: Source,
}

impl Default for ForgetRequest {
    fn default() -> Self {
        ForgetRequest {
            episode_ids: Vec::new(),
            keys: Vec::new(),
            query: None,
            from: None,
            until: None,
            scopes: ScopeFilter::All,
            dry_run: false,
            source: Source::UserExplicit,
        }
    }
}

impl ForgetRequest {
    fn selects_something(&self) -> bool {
        !self.episode_ids.is_empty()
            || !self.keys.is_empty()
            || self.query.as_deref().is_some_and(|query| !normalise(query).is_empty())
            || self.from.is_some()
            || self.until.is_some()
            || matches!(self.scopes, ScopeFilter::Only(_))
    }

    fn in_range(&self, at: i64) -> bool {
        self.from.is_none_or(|from| at >= from) && self.until.is_none_or(|until| at < until)
    }

    fn matches_text(&self, text: &str) -> bool {
        match self.query.as_deref().map(normalise) {
            Some(query) => normalise(text).contains(&query),
            None => true,
        }
    }
}

/// One item a forget removes (or, in a dry run, would remove).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ForgottenItem {
    /// `episodic`, `fact`, `lesson` or `transcript`.
    pub layer: &'static str,
    /// The row's id: an episodic id, a key, or `<session>#<seq>`.
    pub id: String,
    /// Its scope.
    pub scope: Scope,
    /// The start of its text, redacted.
    pub text: String,
}

/// Exact counts per layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ForgetCounts {
    /// Episodic rows.
    pub episodic: usize,
    /// Facts (semantic rows other than lessons).
    pub facts: usize,
    /// Lessons.
    pub lessons: usize,
    /// Transcript messages.
    pub transcripts: usize,
    /// Entries of the Markdown daily history.
    pub history_entries: usize,
}

/// What a forget removed, or would remove in a dry run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ForgetReport {
    /// Nothing was changed: this is what would go.
    pub dry_run: bool,
    /// Exact counts per layer.
    pub counts: ForgetCounts,
    /// Every item, in the order of the layers above.
    pub items: Vec<ForgottenItem>,
}

impl ForgetReport {
    /// Lists what a forget selected (episodes, facts and lessons by their
    /// stored key, transcript messages) and counts it per layer.
    fn list(
        &mut self,
        episodes: &[(i64, String, String)],
        facts: &[(String, Scope, String, String)],
        messages: &[SessionMessage],
    ) {
        for (id, scope, text) in episodes {
            self.items.push(ForgottenItem {
                layer: "episodic",
                id: id.to_string(),
                scope: Scope::parse(scope).unwrap_or_default(),
                text: listed(text),
            });
        }
        for (stored, scope, text, _) in facts {
            let layer = if stored.starts_with(LESSON_PREFIX) { "lesson" } else { "fact" };
            let (key, _) = split_stored_key(stored);
            self.items.push(ForgottenItem { layer, id: key.to_owned(), scope: scope.clone(), text: listed(text) });
        }
        for message in messages {
            self.items.push(ForgottenItem {
                layer: "transcript",
                id: format!("{}#{}", message.session_key, message.row.seq),
                scope: Scope::parse(&message.scope).unwrap_or_default(),
                text: listed(&message.row.content),
            });
        }
        self.counts = ForgetCounts {
            episodic: episodes.len(),
            facts: facts.iter().filter(|(key, ..)| !key.starts_with(LESSON_PREFIX)).count(),
            lessons: facts.iter().filter(|(key, ..)| key.starts_with(LESSON_PREFIX)).count(),
            transcripts: messages.len(),
            history_entries: 0,
        };
    }
}

/// Lower-case words of `text`, joined by one space.
fn normalise(text: &str) -> String {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

fn hash64(text: &str) -> u64 {
    let digest = Sha256::digest(text.as_bytes());
    u64::from_le_bytes(digest[..8].try_into().expect("eight bytes"))
}

/// The hashed word bigrams of a normalised text (its one word for a single word).
fn shingles(normalised: &str) -> BTreeSet<u64> {
    let words: Vec<&str> = normalised.split(' ').filter(|word| !word.is_empty()).collect();
    match words.len() {
        0 => BTreeSet::new(),
        1 => BTreeSet::from([hash64(words[0])]),
        _ => words.windows(2).map(|pair| hash64(&format!("{} {}", pair[0], pair[1]))).collect(),
    }
}

/// A text's fingerprint: the hash of its normalised form and its shingles.
pub(crate) struct Fingerprint {
    hash: String,
    shingles: BTreeSet<u64>,
}

impl Fingerprint {
    pub(crate) fn of(text: &str) -> Fingerprint {
        let normalised = normalise(text);
        let hash = Sha256::digest(normalised.as_bytes()).iter().map(|byte| format!("{byte:02x}")).collect();
        Fingerprint { hash, shingles: shingles(&normalised) }
    }

    fn row(&self, kind: &str, scope: &str, key: Option<&str>) -> ForgottenRow {
        ForgottenRow {
            kind: kind.to_owned(),
            scope: scope.to_owned(),
            key: key.map(str::to_owned),
            fingerprint: self.hash.clone(),
            shingles: self.shingles.iter().flat_map(|hash| hash.to_le_bytes()).collect(),
            at: now_ms(),
        }
    }

    /// Whether this (new) text, written under `key` when it is a fact or
    /// lesson, brings back the forgotten `row`. A short forgotten value
    /// ("dark") comes back only under its own key.
    fn brings_back(&self, row: &ForgottenRow, key: Option<&str>) -> bool {
        let forgotten: Vec<u64> = row
            .shingles
            .chunks_exact(8)
            .map(|bytes| u64::from_le_bytes(bytes.try_into().expect("eight bytes")))
            .collect();
        let long = forgotten.len() >= MIN_CONTAINMENT_SHINGLES;
        if self.hash == row.fingerprint {
            let same_key = match (&row.key, key) {
                (None, _) => true,
                (Some(stored), Some(key)) => split_stored_key(stored).0 == key,
                (Some(_), None) => false,
            };
            if same_key || long {
                return true;
            }
        }
        if !long {
            return false;
        }
        let held = forgotten.iter().filter(|hash| self.shingles.contains(hash)).count();
        held as f64 >= FORGOTTEN_CONTAINMENT * forgotten.len() as f64
    }
}

/// The refusal when `text` (an episode, or the value of the fact or
/// lesson `key`) would bring back something forgotten.
pub(crate) fn check_not_forgotten(tx: &mut dyn StoreTx, text: &str, key: Option<&str>) -> Result<Result<(), Rejected>> {
    let forgotten = tx.forgotten_rows()?;
    if forgotten.is_empty() {
        return Ok(Ok(()));
    }
    let fingerprint = Fingerprint::of(text);
    Ok(match forgotten.iter().find(|row| fingerprint.brings_back(row, key)) {
        Some(row) => Err(Rejected::Forgotten { kind: row.kind.clone() }),
        None => Ok(()),
    })
}

fn listed(text: &str) -> String {
    let shown: String = text.chars().take(LISTED_CHARS).collect();
    cairn_guard::redact_all(&shown).replace(['\n', '\r'], " ")
}

impl MemoryDb {
    /// [`crate::semantic::apply_write_replacing`] of a value first checked,
    /// under the write's lock, against what was forgotten: `shown` (the
    /// value as its rules saw it) must not bring back a forgotten item of
    /// `plain_key` (the key without its scope). A refusal changes nothing.
    pub(crate) fn apply_write_unless_forgotten(
        tx: &mut dyn StoreTx,
        write: &PreparedWrite<'_>,
        shown: &str,
        plain_key: &str,
    ) -> Result<Result<(WriteOutcome, Option<String>), Rejected>> {
        let existing = load_existing(tx, write.key)?;
        if let Err(rejected) = check_not_forgotten(tx, shown, Some(plain_key))? {
            return Ok(Err(rejected));
        }
        apply_to_existing(tx, write, existing).map(Ok)
    }

    /// Refuses a write of `text` (the value of `key` for a fact or lesson)
    /// that would bring back something forgotten.
    pub(crate) fn refuse_forgotten(&self, text: &str, key: Option<&str>) -> Result<Result<(), Rejected>> {
        self.rows().read("checking forgotten items", |tx| check_not_forgotten(tx, text, key))
    }

    /// Forgets what `request` selects from the store's layers (the Markdown
    /// history is [`crate::MemoryFiles::forget_history`]'s) and records
    /// fingerprints of it; with `dry_run`, lists exactly that and changes
    /// nothing. One write transaction for the rows; the episodic index is
    /// brought in step after it.
    pub fn forget(&self, request: &ForgetRequest) -> Result<ForgetReport> {
        let _span = tracing::debug_span!("forget", dry_run = request.dry_run).entered();
        if !request.selects_something() {
            return Err(MemoryError::Rejected(Rejected::NothingSelected));
        }
        request.source.validate()?;
        self.refuse_when_damaged()?;
        let keys: BTreeSet<&str> = request.keys.iter().map(String::as_str).collect();
        let by_id = !request.episode_ids.is_empty() || !keys.is_empty();
        let mut report = ForgetReport { dry_run: request.dry_run, ..ForgetReport::default() };
        let mut episodes = Vec::new();
        let mut facts = Vec::new();
        let mut messages = Vec::new();
        self.rows().read("selecting what to forget", |tx| {
            for row in tx.episodic_page(usize::MAX, 0)? {
                let chosen = if by_id { request.episode_ids.contains(&row.id) } else { true };
                if chosen
                    && request.scopes.admits(&row.scope)
                    && request.in_range(row.created_at)
                    && request.matches_text(&row.text)
                {
                    episodes.push((row.id, row.scope.clone(), row.text.clone()));
                }
            }
            for row in tx.live_semantic("")? {
                let (key, scope) = split_stored_key(&row.key);
                let chosen = if by_id { keys.contains(key) } else { true };
                let text = format!("{key}: {}", row.value);
                if chosen
                    && request.scopes.admits(scope.as_str())
                    && request.in_range(row.created_at)
                    && (request.matches_text(&row.value) || request.matches_text(key))
                {
                    facts.push((row.key.clone(), scope, text, row.value.clone()));
                }
            }
            if !by_id {
                for message in tx.session_messages()? {
                    if request.scopes.admits(&message.scope)
                        && request.in_range(message.row.created_at)
                        && request.matches_text(&message.row.content)
                    {
                        messages.push(message);
                    }
                }
            }
            Ok(())
        })?;
        report.list(&episodes, &facts, &messages);
        if request.dry_run {
            return Ok(report);
        }
        let source = request.source.clone();
        self.rows().write("forgetting facts and transcripts", |tx| {
            for (stored, _, _, value) in &facts {
                apply_delete(tx, stored, &source, Some("forgotten"))?;
                // The value alone is what a later write would bring back.
                let shown = serde_json::from_str::<serde_json::Value>(value)
                    .map(|value| validate::display_value(&value))
                    .unwrap_or_else(|_| value.clone());
                let kind = if memory_type(stored) == "lesson" { "lesson" } else { "fact" };
                tx.record_forgotten(&Fingerprint::of(&shown).row(kind, stored_key_scope(stored), Some(stored)))?;
            }
            for (_, scope, text) in &episodes {
                tx.record_forgotten(&Fingerprint::of(text).row("episode", scope, None))?;
            }
            let keys: Vec<(String, i64)> =
                messages.iter().map(|message| (message.session_key.clone(), message.row.seq)).collect();
            tx.delete_session_messages(&keys)?;
            Ok(())
        })?;
        let ids: Vec<i64> = episodes.iter().map(|(id, ..)| *id).collect();
        if !ids.is_empty() {
            self.tombstone_episodic(&ids, source.as_str(), "forgotten")?;
        }
        if !facts.is_empty() || !episodes.is_empty() {
            self.forget_in_runs()?;
        }
        tracing::info!(
            episodic = report.counts.episodic,
            facts = report.counts.facts,
            lessons = report.counts.lessons,
            transcripts = report.counts.transcripts,
            "forgot"
        );
        Ok(report)
    }
}

/// Forgets what `request` selects from the store and from the Markdown
/// daily history beside it (an entry belongs to the project its tag names,
/// else to the global memory; a request naming ids or keys reaches no
/// history entry): the one forget every surface runs.
pub fn forget_memory(db: &MemoryDb, files: &crate::MemoryFiles, request: &ForgetRequest) -> Result<ForgetReport> {
    let mut report = db.forget(request)?;
    let by_id = !request.episode_ids.is_empty() || !request.keys.is_empty();
    if !by_id {
        let entries = files.forget_history(
            request.query.as_deref(),
            request.from,
            request.until,
            &request.scopes,
            request.dry_run,
        )?;
        report.counts.history_entries = entries.len();
        report.items.extend(entries.into_iter().map(|(date, scope, text)| ForgottenItem {
            layer: "history",
            id: date,
            scope: Scope::parse(&scope).unwrap_or_default(),
            text: listed(&text),
        }));
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forgotten(text: &str) -> ForgottenRow {
        Fingerprint::of(text).row("episode", "global", None)
    }

    #[test]
    fn a_forgotten_text_comes_back_only_when_repeated_or_contained() {
        let row = forgotten("The staging database lives on host orca-7 behind the VPN");
        for (text, back) in [
            ("The staging database lives on host orca-7 behind the VPN", true),
            ("the STAGING database   lives on host orca-7, behind the vpn!", true),
            ("Note: the staging database lives on host orca-7 behind the VPN since May.", true),
            ("The staging database lives on host orca-7", false),
            ("The production database lives elsewhere", false),
        ] {
            assert_eq!(Fingerprint::of(text).brings_back(&row, None), back, "{text}");
        }
    }

    #[test]
    fn a_short_forgotten_text_is_matched_exactly_only() {
        let row = Fingerprint::of("vim").row("fact", "global", Some("pref.editor"));
        assert!(Fingerprint::of("Vim").brings_back(&row, Some("pref.editor")));
        assert!(!Fingerprint::of("vim").brings_back(&row, Some("pref.pager")));
        assert!(!Fingerprint::of("I switched from vim to helix last year").brings_back(&row, None));
    }
}

#[cfg(test)]
mod scoped;
