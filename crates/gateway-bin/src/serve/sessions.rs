//! Session transcripts and consolidation in the gateway.
//!
//! `POST /api/sessions/{key}/messages` appends to an in-memory transcript
//! per session and hands the whole transcript to the memory-core
//! [`Consolidator`] (the preferences path fires every 30 new messages);
//! the heartbeat's `check_idle_sessions` job runs the history path for
//! sessions idle longer than `memory.history_idle_hours`. Both run on the
//! embed pool (they call the LLM and write embedding-bearing rows), never
//! on the async executor. Consolidation exists only when an LLM is
//! configured.
//!
//! Transcripts live only in this process: a restart starts every session
//! empty (the persisted history markers of the Consolidator stay).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cairn_memory_core::{
    ConsolidationReport, Consolidator, ConsolidatorConfig, MemoryDb, MemoryFiles, Result, TranscriptMessage,
};
use parking_lot::Mutex;

use super::llm::{LlmClient, LlmSummarizer};

/// One session's transcript. The async lock serialises posts to a session
/// without holding a thread while a post waits for the one before it.
pub(crate) type Transcript = Arc<tokio::sync::Mutex<Vec<TranscriptMessage>>>;

/// The gateway's consolidation: the Consolidator and the transcripts it reads.
pub(crate) struct Consolidation {
    consolidator: Consolidator,
    transcripts: Mutex<HashMap<String, Transcript>>,
}

impl std::fmt::Debug for Consolidation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consolidation")
            .field("consolidator", &self.consolidator)
            .field("sessions", &self.transcripts.lock().len())
            .finish()
    }
}

/// `memory.history_idle_hours` as a duration.
pub(crate) fn idle_from_hours(hours: f64) -> Duration {
    Duration::try_from_secs_f64(hours.max(0.0) * 3600.0).unwrap_or(Duration::MAX)
}

/// Unix milliseconds now.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
}

impl Consolidation {
    /// Consolidation over the stores of `home`, asking `client`; sessions
    /// go idle after `idle`.
    pub(crate) fn new(
        home: &Path,
        memory: Arc<MemoryDb>,
        files: Arc<MemoryFiles>,
        client: LlmClient,
        idle: Duration,
    ) -> Self {
        let config = ConsolidatorConfig { idle, ..ConsolidatorConfig::default() };
        Self {
            consolidator: Consolidator::new(home, memory, files, Arc::new(LlmSummarizer(client)), config),
            transcripts: Mutex::new(HashMap::new()),
        }
    }

    /// The transcript of `key`, created empty on first use.
    pub(crate) fn transcript(&self, key: &str) -> Transcript {
        Arc::clone(self.transcripts.lock().entry(key.to_owned()).or_default())
    }

    /// Appends `messages` to the session's `transcript` (its lock held by
    /// the caller) and lets the Consolidator decide whether the
    /// preferences path is due. Blocking: the LLM may be asked.
    pub(crate) fn append(
        &self,
        key: &str,
        transcript: &mut Vec<TranscriptMessage>,
        messages: Vec<TranscriptMessage>,
        now_ms: i64,
    ) -> Result<Option<ConsolidationReport>> {
        transcript.extend(messages);
        self.consolidator.maybe_consolidate(key, transcript, now_ms)
    }

    /// Runs the history path for every session idle longer than `idle`
    /// (the live setting, which may differ from the one the Consolidator
    /// was built with). Blocking: the LLM may be asked once per session.
    pub(crate) fn check_idle(&self, now_ms: i64, idle: Duration) -> Vec<(String, Result<ConsolidationReport>)> {
        self.consolidator.check_sessions_idle_for(now_ms, idle)
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
    let mut history = 0;
    let mut consolidated = 0;
    let mut failures = Vec::new();
    for (key, result) in results {
        match result {
            Ok(report) => {
                consolidated += 1;
                episodic += report.episodic_written;
                lessons += report.lessons_written;
                history += usize::from(report.history_appended);
            }
            Err(error) => failures.push(format!("{key}: {error}")),
        }
    }
    let summary = format!(
        "consolidated {consolidated} idle sessions: {episodic} episodic, {lessons} lessons, {history} history entries"
    );
    if failures.is_empty() {
        Ok(summary)
    } else {
        anyhow::bail!("{summary}; {} failed (retried next tick): {}", failures.len(), failures.join("; "))
    }
}
