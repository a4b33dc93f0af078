//! Session transcripts and consolidation in the gateway.
//!
//! `POST /api/sessions/{key}/messages` appends to the session's transcript
//! and, when an LLM is configured, hands it to the memory-core
//! [`Consolidator`] (the preferences path fires every 30 new messages);
//! the heartbeat's `check_idle_sessions` job runs the history path for
//! sessions idle longer than `memory.history_idle_hours`. Both run on the
//! embed pool (they call the LLM and write embedding-bearing rows), never
//! on the async executor. Transcripts live in `memory.db` (so a restart
//! neither skips nor repeats a message) and are also the thread history of
//! a session start.
//!
//! With `skills.auto_create_from_sessions`, the history path also asks for
//! a skill when the session passes the gate (enough messages with tool
//! calls, none touching a sensitive location); the proposal is redacted
//! and handed to the skills crate's auto-skill pipeline
//! ([`AutoSkillReceiver`]), which stages it under `skills/auto/.pending/`.
//! With `skills.auto_refine_on_deviation`, the prompt also shows the
//! current procedures of the generated skills the session used (by name
//! or trigger phrase, redacted and screened), and a refinement of one is
//! staged as a pending update when approval is required.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cairn_memory_core::{
    ConsolidationReport, Consolidator, ConsolidatorConfig, CurrentSkill, MemoryDb, MemoryFiles, Result, SkillGate,
    SkillProposal, SkillProposalKind, SkillProposer, TranscriptMessage,
};
use cairn_skills::SkillCatalog;
use cairn_skills::auto::{AutoSkills, ProposalKind};
use parking_lot::{Mutex, RwLock};
use serde_json::Value;

use crate::home::Home;

use crate::llm::{LlmClient, LlmSummarizer};

/// Serialises posts to one session without holding a thread while a post
/// waits for the one before it.
pub(crate) type SessionLock = Arc<tokio::sync::Mutex<()>>;

/// The gateway's sessions: their transcripts in the store and, with an
/// LLM, the Consolidator that reads them.
pub(crate) struct Sessions {
    memory: Arc<MemoryDb>,
    files: Arc<MemoryFiles>,
    client: Option<LlmClient>,
    /// Rebuilt when the settings change (`reconfigure`); a run holds its own.
    consolidator: RwLock<Option<Arc<Consolidator>>>,
    auto: RwLock<Arc<AutoSkills>>,
    locks: Mutex<HashMap<String, SessionLock>>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("consolidator", &self.consolidator.read())
            .field("sessions", &self.locks.lock().len())
            .finish()
    }
}

/// `memory.history_idle_hours` as a duration.
pub(crate) fn idle_from_hours(hours: f64) -> Duration {
    Duration::try_from_secs_f64(hours.max(0.0) * 3600.0).unwrap_or(Duration::MAX)
}

/// Redacts a proposed skill's texts (credentials, exfiltration URLs) and
/// hands it to the auto-skill pipeline; the catalog forgets its file list
/// when a skill went live.
pub(crate) struct AutoSkillReceiver {
    auto: Arc<AutoSkills>,
    catalog: Arc<SkillCatalog>,
}

/// Every string in `value`, `<private>` spans withheld and redacted.
fn redact_strings(value: &Value) -> Value {
    match value {
        Value::String(text) => Value::String(cairn_guard::redact_all(&cairn_guard::strip_private(text)).into_owned()),
        Value::Array(items) => Value::Array(items.iter().map(redact_strings).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(key, value)| (key.clone(), redact_strings(value))).collect())
        }
        other => other.clone(),
    }
}

impl SkillProposer for AutoSkillReceiver {
    fn propose(&self, proposal: &SkillProposal) -> std::result::Result<(), String> {
        let kind = match proposal.kind {
            SkillProposalKind::New => ProposalKind::New,
            SkillProposalKind::Refined => ProposalKind::Refined,
        };
        let skill = redact_strings(&proposal.skill);
        match self.auto.propose(kind, &skill, &proposal.session_key) {
            Ok(outcome) => {
                tracing::info!(session = %proposal.session_key, ?outcome, "auto skill proposal accepted");
                self.catalog.invalidate();
                Ok(())
            }
            Err(error) => {
                tracing::info!(session = %proposal.session_key, code = error.code(), %error, "auto skill proposal refused");
                Err(format!("{}: {error}", error.code()))
            }
        }
    }

    fn current_skills(&self, transcript: &str) -> Vec<CurrentSkill> {
        self.auto
            .refinable(transcript)
            .into_iter()
            .map(|skill| CurrentSkill { name: skill.name, procedure: skill.procedure })
            .collect()
    }
}

impl Sessions {
    /// Sessions over the stores of `home`; with `client`, consolidated by
    /// asking it, idle after `idle`, and, with
    /// `skills.auto_create_from_sessions`, proposing skills to the home's
    /// auto-skill pipeline.
    pub(crate) fn new(
        home_ctx: &Home,
        memory: Arc<MemoryDb>,
        files: Arc<MemoryFiles>,
        client: Option<LlmClient>,
        catalog: Arc<SkillCatalog>,
    ) -> Self {
        let (consolidator, auto) = Self::parts(home_ctx, &memory, &files, client.as_ref(), catalog);
        Self {
            memory,
            files,
            client,
            consolidator: RwLock::new(consolidator),
            auto: RwLock::new(auto),
            locks: Mutex::new(HashMap::new()),
        }
    }

    /// The Consolidator (with an LLM) and the auto-skill pipeline the
    /// settings of `home_ctx` describe.
    fn parts(
        home_ctx: &Home,
        memory: &Arc<MemoryDb>,
        files: &Arc<MemoryFiles>,
        client: Option<&LlmClient>,
        catalog: Arc<SkillCatalog>,
    ) -> (Option<Arc<Consolidator>>, Arc<AutoSkills>) {
        let home: &Path = home_ctx.dir();
        let settings = home_ctx.settings();
        let auto_settings = &settings.skills.auto;
        let auto = Arc::new(home_ctx.auto_skills());
        let config = ConsolidatorConfig {
            idle: idle_from_hours(settings.memory.history_idle_hours),
            skills_enabled: auto_settings.create_from_sessions,
            write_approval: settings.write_approval,
            ..ConsolidatorConfig::default()
        };
        let gate = SkillGate {
            min_tool_calls: auto_settings.min_tool_calls,
            refine: auto_settings.refine_on_deviation,
            scripts: auto_settings.generate_scripts,
        };
        let receiver = Arc::new(AutoSkillReceiver { auto: Arc::clone(&auto), catalog });
        let consolidator = client.map(|client| {
            Arc::new(
                Consolidator::new(
                    home,
                    Arc::clone(memory),
                    Arc::clone(files),
                    Arc::new(LlmSummarizer(client.clone())),
                    config,
                )
                .with_skill_proposer(receiver)
                .with_skill_gate(gate),
            )
        });
        (consolidator, auto)
    }

    /// Applies changed settings (auto skills, idle time) to the sessions'
    /// consolidation from the next run on; a run in progress finishes with
    /// the settings it started with.
    pub(crate) fn reconfigure(&self, home_ctx: &Home, catalog: Arc<SkillCatalog>) {
        let (consolidator, auto) = Self::parts(home_ctx, &self.memory, &self.files, self.client.as_ref(), catalog);
        *self.consolidator.write() = consolidator;
        *self.auto.write() = auto;
    }

    fn consolidator(&self) -> Option<Arc<Consolidator>> {
        self.consolidator.read().clone()
    }

    /// The home's auto-skill pipeline (pending review, lifecycle).
    pub(crate) fn auto_skills(&self) -> Arc<AutoSkills> {
        Arc::clone(&self.auto.read())
    }

    /// Whether an LLM consolidates these sessions.
    pub(crate) fn consolidates(&self) -> bool {
        self.consolidator.read().is_some()
    }

    /// The lock that orders posts to `key`.
    pub(crate) fn lock(&self, key: &str) -> SessionLock {
        Arc::clone(self.locks.lock().entry(key.to_owned()).or_default())
    }

    /// Whether `key` has no stored message yet.
    pub(crate) fn is_new(&self, key: &str) -> Result<bool> {
        Ok(self.memory.transcript_state(key)?.is_none_or(|state| state.next_seq == 0))
    }

    /// The newest `limit` messages of `key`, oldest first.
    pub(crate) fn tail(&self, key: &str, limit: usize) -> Result<Vec<TranscriptMessage>> {
        Ok(self.memory.transcript_tail(key, limit)?.into_iter().map(|stored| stored.message).collect())
    }

    /// Stores `messages` in the session's transcript and, with an LLM,
    /// lets the Consolidator decide whether the preferences path is due.
    /// Blocking: the LLM may be asked.
    pub(crate) fn append(
        &self,
        key: &str,
        messages: &[TranscriptMessage],
        now_ms: i64,
    ) -> Result<Option<ConsolidationReport>> {
        match self.consolidator() {
            Some(consolidator) => consolidator.record_messages(key, messages, now_ms),
            None => {
                self.memory.append_transcript_at(key, messages, now_ms)?;
                Ok(None)
            }
        }
    }

    /// Stores `messages` in the session's transcript, durably, and nothing
    /// else: a caller that must answer quickly (a host hook) records first
    /// and asks for [`consolidate_if_due`](Self::consolidate_if_due) off
    /// its own path.
    /// Appends `messages` to session `key`'s transcript; a new session runs in `scope`.
    pub(crate) fn record_in(
        &self,
        scope: &cairn_memory_core::Scope,
        key: &str,
        messages: &[TranscriptMessage],
        now_ms: i64,
    ) -> Result<()> {
        self.memory.append_transcript_in(scope, key, messages, now_ms)?;
        Ok(())
    }

    /// With an LLM, runs the preferences path when 30 stored messages of
    /// `key` are past its marker. Blocking: the LLM may be asked.
    pub(crate) fn consolidate_if_due(&self, key: &str) -> Result<Option<ConsolidationReport>> {
        match self.consolidator() {
            Some(consolidator) => consolidator.consolidate_if_due(key),
            None => Ok(None),
        }
    }

    /// Runs the history path for every session idle longer than `idle`
    /// (the live setting, which may differ from the one the Consolidator
    /// was built with). Blocking: the LLM may be asked once per session.
    pub(crate) fn check_idle(&self, now_ms: i64, idle: Duration) -> Vec<(String, Result<ConsolidationReport>)> {
        match self.consolidator() {
            Some(consolidator) => consolidator.check_sessions_idle_for(now_ms, idle),
            None => Vec::new(),
        }
    }
}

/// A heartbeat line for the results of one `check_idle` run; an error when
/// any session failed (its marker stays and the next tick retries it).
pub(crate) fn describe_idle_run(results: &[(String, Result<ConsolidationReport>)]) -> anyhow::Result<String> {
    if results.is_empty() {
        return Ok("no idle session to consolidate".to_owned());
    }
    let mut episodic = 0;
    let mut lessons = 0;
    let mut skills = 0;
    let mut history = 0;
    let mut consolidated = 0;
    let mut failures = Vec::new();
    for (key, result) in results {
        match result {
            Ok(report) => {
                consolidated += 1;
                episodic += report.counts.episodic_written;
                lessons += report.counts.lessons_written;
                skills += report.skills_proposed;
                history += usize::from(report.history_appended);
            }
            Err(error) => failures.push(format!("{key}: {error}")),
        }
    }
    let summary = format!(
        "consolidated {consolidated} idle sessions: {episodic} episodic, {lessons} lessons, {history} history entries, {skills} skills proposed"
    );
    if failures.is_empty() {
        Ok(summary)
    } else {
        anyhow::bail!("{summary}; {} failed (retried next tick): {}", failures.len(), failures.join("; "))
    }
}
