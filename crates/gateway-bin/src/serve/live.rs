//! The settings a running gateway applies without a restart.
//!
//! Everything the gateway builds from `memory.*`, `skills.*`, `hooks.*`,
//! `agent.*`, `context.*` and `host.*` lives in one [`Live`] value, swapped
//! whole when the settings change: `cairn config set|unset` asks the
//! running gateway to reload (`POST /api/config/reload`), and the gateway
//! also notices an edit of `config.json` by itself within a few seconds.
//! A request works on the `Live` it started with. `server.*`,
//! `embedding.*`, `storage.*`, `llm.*` and `memory.episodic_cap` are read
//! once at start (the listener, the model and pool, the store and the
//! consolidating model);
//! a change to one of them is reported as needing a restart.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use cairn_context::{ChannelHistory, ContextBuilder};
use cairn_hooks::{ConfigHooks, MergeReport};
use cairn_memory_core::{MemoryDb, MemoryFiles};
use cairn_skills::SkillCatalog;
use serde::Serialize;

use super::{AgentsHandle, AppState};
use crate::home::{ContextParts, Home, SkillSources};

/// Sections read once at start.
const RESTART_SECTIONS: &[&str] = &["server", "embedding", "storage", "llm"];
/// Keys of the other sections read once at start (the store is opened with them).
const RESTART_KEYS: &[&str] = &["memory.episodic_cap"];
/// How often the gateway looks at `config.json`.
pub(crate) const CONFIG_POLL: Duration = Duration::from_secs(2);

/// The parts of the gateway built from settings that may change.
pub(crate) struct Live {
    /// The settings and the way every store is opened.
    pub(crate) home: Home,
    pub(crate) skills: Arc<SkillCatalog>,
    /// `hooks` of config.json: auto-replies, transforms, context rules, tool decisions.
    pub(crate) config_hooks: Arc<ConfigHooks>,
    /// Warnings of the `hooks` section.
    pub(crate) hook_warnings: Vec<String>,
    /// The user's kiro-cli hooks after the merge (`agent.kiro_hooks`),
    /// with what was dropped and why.
    pub(crate) user_hooks: MergeReport,
    /// The context builder over this gateway's stores, skills, hooks and
    /// channel buffers.
    pub(crate) context: ContextBuilder,
    /// The channel buffers the session API quotes (`[CHANNEL HISTORY]`);
    /// one per gateway, kept across reloads.
    pub(crate) channels: Arc<ChannelHistory>,
    pub(crate) agents: AgentsHandle,
}

impl Live {
    /// Builds everything settings-dependent for `home` over the gateway's
    /// stores; the skill catalog of `previous` is kept when its settings
    /// did not change (its usage ledger and caches with it).
    pub(crate) fn build(
        home: Home,
        memory: &Arc<MemoryDb>,
        files: &Arc<MemoryFiles>,
        previous: Option<&Live>,
    ) -> anyhow::Result<Self> {
        let skill_sources = SkillSources { record_usage: true, ..SkillSources::default() };
        let same_skills = previous.is_some_and(|previous| {
            previous.home.settings().skills == home.settings().skills
                && previous.home.settings().agent.project_dir == home.settings().agent.project_dir
        });
        let skills = match previous {
            Some(previous) if same_skills => Arc::clone(&previous.skills),
            _ => {
                if let Some(previous) = previous
                    && let Err(error) = previous.skills.ledger().flush()
                {
                    tracing::warn!(%error, "could not flush the skills usage ledger");
                }
                Arc::new(home.skills(&skill_sources))
            }
        };
        let (config_hooks, hook_warnings) = home.config_hooks()?;
        for warning in &hook_warnings {
            tracing::warn!("{warning}");
        }
        let config_hooks = Arc::new(config_hooks);
        let user_hooks = home.user_hooks(&cairn_hooks::HookSet::new());
        for dropped in &user_hooks.dropped {
            tracing::warn!(location = %dropped.location, reason = %dropped.reason, "a user hook was dropped");
        }
        let channels = previous
            .map_or_else(|| Arc::new(ChannelHistory::in_home(home.dir())), |previous| Arc::clone(&previous.channels));
        let context = home
            .context_builder(ContextParts {
                memory: Some(Arc::clone(memory)),
                files: Some(Arc::clone(files)),
                skills: Some(Arc::clone(&skills)),
                hooks: Some(Arc::clone(&config_hooks)),
            })
            .with_channels(Arc::clone(&channels));
        let agents = AgentsHandle {
            dirs: home.agent_dirs(None, None)?,
            project_dir: home.settings().agent.project_dir.clone(),
            pins: home.pins()?,
            sensitive: home.sensitive().clone(),
            skills_root: home.skills_config(&skill_sources).owned_dir(),
            user_home: home.settings().user_home.clone(),
            write_lock: previous.map_or_else(Arc::default, |previous| Arc::clone(&previous.agents.write_lock)),
        };
        Ok(Self { home, skills, config_hooks, hook_warnings, user_hooks, context, channels, agents })
    }
}

/// What a reload did.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct ReloadReport {
    /// Changed keys now in effect.
    pub(crate) applied: Vec<String>,
    /// Changed keys that take effect at the next start.
    pub(crate) restart_required: Vec<String>,
}

/// Whether `key` is read only at start.
pub(crate) fn needs_restart(key: &str) -> bool {
    RESTART_KEYS.contains(&key) || key.split_once('.').is_some_and(|(section, _)| RESTART_SECTIONS.contains(&section))
}

impl AppState {
    /// The settings-dependent parts as they are now.
    pub(crate) fn live(&self) -> Arc<Live> {
        Arc::clone(&self.live.read())
    }

    /// Reads the settings again and swaps in what they build; the
    /// sessions' consolidation and auto-skill settings and the memory
    /// settings follow. A file that does not load leaves everything as
    /// it was. Blocking (reads files).
    pub(crate) fn reload(&self) -> anyhow::Result<ReloadReport> {
        let _one_at_a_time = self.reload_lock.lock();
        let current = self.live();
        let settings = current.home.settings().reload()?;
        let changed = current.home.settings().changed_keys(&settings);
        if changed.is_empty() {
            return Ok(ReloadReport::default());
        }
        let (restart_required, applied): (Vec<String>, Vec<String>) =
            changed.into_iter().partition(|key| needs_restart(key));
        let home = Home::new(settings);
        let next = Live::build(home, &self.memory, &self.files, Some(&current))?;
        self.sessions.reconfigure(&next.home, Arc::clone(&next.skills));
        *self.settings.write() = next.home.settings().memory.clone();
        *self.live.write() = Arc::new(next);
        tracing::info!(?applied, ?restart_required, "settings reloaded");
        Ok(ReloadReport { applied, restart_required })
    }
}

/// The modification time and length of `path`, to notice an edit.
fn stamp(path: &PathBuf) -> Option<(SystemTime, u64)> {
    let metadata = std::fs::metadata(path).ok()?;
    Some((metadata.modified().ok()?, metadata.len()))
}

/// Reloads the settings whenever `config.json` changes, until the gateway stops.
pub(crate) async fn watch_config(state: Arc<AppState>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let path = state.config_path.clone();
    let mut seen = stamp(&path);
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            () = tokio::time::sleep(CONFIG_POLL) => {}
        }
        let now = stamp(&path);
        if now == seen {
            continue;
        }
        seen = now;
        let worker = Arc::clone(&state);
        match tokio::task::spawn_blocking(move || worker.reload()).await {
            Ok(Ok(report)) if !report.restart_required.is_empty() => tracing::warn!(
                keys = ?report.restart_required,
                "config.json changed settings that take effect at the next start"
            ),
            Ok(Ok(_)) => {}
            Ok(Err(error)) => {
                tracing::warn!(error = %format!("{error:#}"), "config.json did not load; settings unchanged")
            }
            Err(error) => tracing::warn!(%error, "the settings reload did not finish"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_only_sections_need_a_restart_and_the_rest_apply_live() {
        for key in ["server.port", "embedding.pool_workers", "storage.url", "llm.model"] {
            assert!(needs_restart(key), "{key}");
        }
        for key in
            ["memory.history_idle_hours", "skills.max_triggered", "hooks", "agent.kiro_hooks", "host.start_gateway"]
        {
            assert!(!needs_restart(key), "{key}");
        }
    }
}
