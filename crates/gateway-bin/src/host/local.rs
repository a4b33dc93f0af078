//! The hook's in-process fallback: the home's stores opened in this
//! process without the embedding model (loading it would take longer than
//! any deadline), so recall is keyword-only and says so; transcript
//! messages are appended to the store directly, where the gateway's
//! session pipeline finds them (its consolidation reads the store).

use std::cell::OnceCell;
use std::sync::Arc;

use cairn_context::{AgentContext, ContextBuilder};
use cairn_guard::SensitivePaths;
use cairn_hooks::{ConfigHooks, ToolDecision};
use cairn_memory_core::{MemoryDb, ProjectRule, Scope, TranscriptMessage};

use super::Recall;
use super::engine::HookBackend;
use crate::home::{ContextParts, Home, SkillSources};

/// Why a fallback's recall is keyword-only.
pub(crate) const FALLBACK_REASON: &str = "the home's gateway did not answer, so this hook answered on its own";

/// The home's stores, opened on first use.
pub(crate) struct LocalBackend<'a> {
    home: &'a Home,
    memory: OnceCell<Option<Arc<MemoryDb>>>,
    context: OnceCell<ContextBuilder>,
    hooks: OnceCell<Arc<ConfigHooks>>,
    /// Told when a transcript message is durably appended.
    recorded: Option<std::sync::mpsc::Sender<()>>,
}

impl<'a> LocalBackend<'a> {
    pub(crate) fn new(home: &'a Home) -> Self {
        Self { home, memory: OnceCell::new(), context: OnceCell::new(), hooks: OnceCell::new(), recorded: None }
    }

    /// The backend, telling `recorded` after each appended message (the
    /// hook waits for that past its answer's deadline).
    pub(crate) fn notifying(mut self, recorded: std::sync::mpsc::Sender<()>) -> Self {
        self.recorded = Some(recorded);
        self
    }

    fn memory(&self) -> anyhow::Result<Arc<MemoryDb>> {
        let memory = self.memory.get_or_init(|| match self.home.open_memory() {
            Ok(memory) => Some(Arc::new(memory)),
            Err(error) => {
                tracing::warn!(error = %format!("{error:#}"), "the hook could not open memory");
                None
            }
        });
        memory.clone().ok_or_else(|| anyhow::anyhow!("the memory store could not be opened"))
    }

    fn hooks(&self) -> anyhow::Result<Arc<ConfigHooks>> {
        if let Some(hooks) = self.hooks.get() {
            return Ok(Arc::clone(hooks));
        }
        let (hooks, warnings) = self.home.config_hooks()?;
        for warning in warnings {
            tracing::warn!("{warning}");
        }
        Ok(Arc::clone(self.hooks.get_or_init(|| Arc::new(hooks))))
    }
}

impl HookBackend for LocalBackend<'_> {
    fn context(&self) -> anyhow::Result<&ContextBuilder> {
        if let Some(context) = self.context.get() {
            return Ok(context);
        }
        let home = self.home;
        let files = if home.dir().join(cairn_memory_core::MEMORY_DIR).is_dir() {
            Some(Arc::new(home.open_files()?))
        } else {
            None
        };
        let skills = Arc::new(home.skills(&SkillSources { record_usage: true, ..SkillSources::default() }));
        let parts =
            ContextParts { memory: self.memory().ok(), files, skills: Some(skills), hooks: Some(self.hooks()?) };
        Ok(self.context.get_or_init(|| home.context_builder(parts)))
    }

    fn tool_decision(&self, tool: &str) -> anyhow::Result<ToolDecision> {
        Ok(self.hooks()?.tool_decision(tool))
    }

    fn record(&self, key: &str, scope: &Scope, message: TranscriptMessage) -> anyhow::Result<()> {
        self.memory()?.append_transcript_in(scope, key, &[message], crate::clock::now_ms())?;
        if let Some(recorded) = &self.recorded {
            let _ = recorded.send(());
        }
        Ok(())
    }

    fn agent(&self, name: &str) -> anyhow::Result<AgentContext> {
        self.home.agent_context(name, None, None)
    }

    fn sensitive(&self) -> &SensitivePaths {
        self.home.sensitive()
    }

    fn recall(&self) -> Recall {
        Recall::Keyword(FALLBACK_REASON)
    }

    fn max_inject_chars(&self) -> usize {
        self.home.settings().context.max_inject_chars
    }

    fn project_rule(&self) -> ProjectRule {
        self.home.settings().project_rule
    }
}
