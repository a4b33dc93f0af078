//! The lifecycle of live auto skills, run by the host's periodic job:
//! pending candidates expire after `pending_ttl_days`; a live skill unused
//! for `stale_after_days` is stale (still offered, marked), and unused for
//! `archive_after_days` it is archived (moved out of the catalog, not
//! deleted). Pinned skills and skills the host names as exempt (a
//! scheduled job refers to them) stay active. A skill never used since it
//! went live is left alone for [`AUTO_NEVER_USED_GRACE_DAYS`] at least.
//! Past `max_auto_skills` live skills, the least recently used ones that
//! are not exempt are archived.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;

use serde::{Deserialize, Serialize};

use super::{AUTO_DIR, AutoSkillError, AutoSkills, PENDING_DIR, Parsed, carry_forward, parse_rfc3339, slugs_in};
use crate::audit::SkillAuditAction;
use crate::constants::AUTO_NEVER_USED_GRACE_DAYS;
use crate::error::SkillsError;
use crate::fsutil::atomic_write;
use crate::ledger::UsageEntry;

const DAY_MS: u64 = 24 * 60 * 60 * 1000;
/// The lifecycle file inside the auto directory.
const STATE_FILE: &str = ".lifecycle.json";
/// Largest lifecycle file read.
const MAX_STATE_BYTES: u64 = 4 * 1024 * 1024;

/// What the lifecycle knows about one live auto skill.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AutoSkillState {
    /// When it went live (Unix milliseconds).
    pub activated_ms: u64,
    /// Its last use seen in the usage ledger (Unix milliseconds).
    #[serde(default)]
    pub last_used_ms: Option<u64>,
    /// Stale: unused for `stale_after_days`.
    #[serde(default)]
    pub stale: bool,
    /// Uses seen (hits of the usage ledger).
    #[serde(default)]
    pub reuse_count: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct StateFile {
    #[serde(default)]
    version: u32,
    #[serde(default)]
    skills: BTreeMap<String, AutoSkillState>,
}

/// What one lifecycle run changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LifecycleReport {
    /// Pending candidates removed past their review window.
    pub expired: Vec<String>,
    /// Live skills that turned stale.
    pub staled: Vec<String>,
    /// Stale skills used again.
    pub reactivated: Vec<String>,
    /// Live skills archived for disuse.
    pub archived: Vec<String>,
    /// Live skills archived over `max_auto_skills`.
    pub archived_over_cap: Vec<String>,
}

impl AutoSkills {
    fn state_path(&self) -> std::path::PathBuf {
        self.root().join(STATE_FILE)
    }

    fn load_states(&self) -> StateFile {
        let path = self.state_path();
        if !path.exists() {
            return StateFile::default();
        }
        match cairn_guard::safe_read_file_bounded(&path, MAX_STATE_BYTES) {
            Ok(text) => serde_json::from_str(&text).unwrap_or_else(|error| {
                tracing::warn!(path = %path.display(), %error, "auto-skill lifecycle file unreadable; starting over");
                StateFile::default()
            }),
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "auto-skill lifecycle file unreadable; starting over");
                StateFile::default()
            }
        }
    }

    fn save_states(&self, states: &StateFile) -> Result<(), AutoSkillError> {
        let path = self.state_path();
        let bytes =
            serde_json::to_vec_pretty(states).map_err(|source| SkillsError::Ledger { path: path.clone(), source })?;
        self.ensure_dir(&self.root())?;
        atomic_write(&path, &bytes)?;
        Ok(())
    }

    pub(super) fn mark_live(&self, slug: &str, now_ms: u64) -> Result<(), AutoSkillError> {
        let mut states = self.load_states();
        states.version = 1;
        states.skills.insert(slug.to_owned(), AutoSkillState { activated_ms: now_ms, ..AutoSkillState::default() });
        self.save_states(&states)
    }

    pub(super) fn forget(&self, slug: &str) -> Result<(), AutoSkillError> {
        let mut states = self.load_states();
        if states.skills.remove(slug).is_some() {
            self.save_states(&states)?;
        }
        Ok(())
    }

    /// Slugs of the live skills under auto/ whose frontmatter says
    /// `source: auto` (the ones Cairn generated).
    pub fn live_generated(&self) -> Vec<String> {
        self.live()
            .into_iter()
            .filter(|slug| {
                Parsed::read(&self.root().join(slug).join("SKILL.md")).is_ok_and(|parsed| parsed.is_generated())
            })
            .collect()
    }

    /// The lifecycle state of every live generated skill (catalog name → state).
    pub fn states(&self) -> BTreeMap<String, AutoSkillState> {
        let states = self.load_states();
        self.live_generated()
            .into_iter()
            .map(|slug| {
                let state = states.skills.get(&slug).copied().unwrap_or_default();
                (format!("{AUTO_DIR}/{slug}"), state)
            })
            .collect()
    }

    /// One lifecycle pass. `usage` is the catalog's usage ledger (keyed by
    /// catalog name, `auto/<slug>`); `exempt` names skills a scheduled job
    /// refers to.
    pub fn run_lifecycle(
        &self,
        usage: &HashMap<String, UsageEntry>,
        exempt: &BTreeSet<String>,
    ) -> Result<LifecycleReport, AutoSkillError> {
        let _write = self.write_lock.lock();
        let now = self.clock.now_millis();
        let mut report = LifecycleReport::default();
        self.expire_pending(now, &mut report)?;

        // Only skills Cairn generated (`source: auto`) are managed: a
        // hand-written skill placed under auto/ is never staled or archived.
        let live = self.live_generated();
        if live.is_empty() && !self.state_path().exists() {
            // Nothing generated is live: write nothing (the feature may be off).
            return Ok(report);
        }
        let mut states = self.load_states();
        states.version = 1;
        states.skills.retain(|slug, _| live.contains(slug));
        let stale_ms = self.config.stale_after_days.saturating_mul(DAY_MS);
        let archive_ms = self.config.archive_after_days.saturating_mul(DAY_MS);
        let grace_ms = AUTO_NEVER_USED_GRACE_DAYS * DAY_MS;
        let mut to_archive = Vec::new();
        // (last reference, slug) of the skills the cap may retire.
        let mut candidates = Vec::new();
        for slug in &live {
            let name = format!("{AUTO_DIR}/{slug}");
            let state =
                states.skills.entry(slug.clone()).or_insert(AutoSkillState { activated_ms: now, ..Default::default() });
            if let Some(entry) = usage.get(&name) {
                let used = entry.last_used.saturating_mul(1000);
                if entry.last_used > 0 && state.last_used_ms.is_none_or(|last| used > last) {
                    state.last_used_ms = Some(used);
                }
                if entry.hits > state.reuse_count {
                    state.reuse_count = entry.hits;
                    self.write_reuse_count(slug, entry.hits);
                }
            }
            let file = self.root().join(slug).join("SKILL.md");
            let pinned = Parsed::read(&file).map(|parsed| parsed.meta.pinned).unwrap_or(false);
            let reference = state.last_used_ms.unwrap_or(0).max(state.activated_ms);
            let idle = now.saturating_sub(reference);
            if pinned || exempt.contains(&name) {
                if state.stale {
                    state.stale = false;
                    report.reactivated.push(name);
                }
                continue;
            }
            candidates.push((reference, slug.clone()));
            if state.last_used_ms.is_none() && now.saturating_sub(state.activated_ms) < grace_ms {
                continue;
            }
            if idle >= archive_ms {
                to_archive.push(slug.clone());
            } else if idle >= stale_ms {
                if !state.stale {
                    state.stale = true;
                    report.staled.push(name.clone());
                    self.record(
                        SkillAuditAction::AutoSkillStale,
                        slug,
                        true,
                        format!("unused for {} days", idle / DAY_MS),
                    );
                }
            } else if state.stale {
                state.stale = false;
                report.reactivated.push(name);
            }
        }
        self.save_states(&states)?;
        for slug in &to_archive {
            self.archive_locked(slug, "unused past skills.archive_after_days")?;
            report.archived.push(format!("{AUTO_DIR}/{slug}"));
        }
        let remaining = live.len() - to_archive.len();
        if remaining > self.config.max_auto_skills {
            candidates.retain(|(_, slug)| !to_archive.contains(slug));
            candidates.sort();
            for (_, slug) in candidates.into_iter().take(remaining - self.config.max_auto_skills) {
                self.archive_locked(&slug, "over skills.max_auto_skills (least recently used)")?;
                report.archived_over_cap.push(format!("{AUTO_DIR}/{slug}"));
            }
        }
        Ok(report)
    }

    fn expire_pending(&self, now: u64, report: &mut LifecycleReport) -> Result<(), AutoSkillError> {
        let ttl = self.config.pending_ttl_days.saturating_mul(DAY_MS);
        let dir = self.root().join(PENDING_DIR);
        for slug in slugs_in(&dir) {
            // A pending update counts from when it was staged.
            let created = Parsed::read(&dir.join(&slug).join("SKILL.md"))
                .ok()
                .and_then(|parsed| parsed.text("staged_at").or_else(|| parsed.text("created_at")))
                .and_then(|text| parse_rfc3339(&text));
            // Undated (edited by hand): the file's modification time stands in.
            let created = created.or_else(|| {
                let modified = fs::metadata(dir.join(&slug).join("SKILL.md")).and_then(|meta| meta.modified()).ok()?;
                let elapsed = modified.duration_since(std::time::UNIX_EPOCH).ok()?;
                u64::try_from(elapsed.as_millis()).ok()
            });
            let Some(created) = created else { continue };
            if now.saturating_sub(created) >= ttl {
                let path = dir.join(&slug);
                fs::remove_dir_all(&path).map_err(|source| SkillsError::io("removing", &path, source))?;
                self.record(
                    SkillAuditAction::AutoSkillExpire,
                    &slug,
                    true,
                    "pending past skills.pending_ttl_days".to_owned(),
                );
                report.expired.push(format!("{AUTO_DIR}/{slug}"));
            }
        }
        Ok(())
    }

    /// Writes `reuse_count` into the skill's frontmatter (other lines kept).
    fn write_reuse_count(&self, slug: &str, count: u64) {
        let file = self.root().join(slug).join("SKILL.md");
        let result = cairn_guard::safe_read_file_bounded(&file, crate::constants::MAX_SKILL_FILE_BYTES as u64)
            .map_err(|error| error.to_string())
            .and_then(|text| {
                carry_forward(&text, &[("reuse_count", Some(count.to_string()))], None)
                    .map_err(|error| error.to_string())
            })
            .and_then(|text| atomic_write(&file, text.as_bytes()).map_err(|error| error.to_string()));
        if let Err(error) = result {
            tracing::warn!(%slug, %error, "could not record an auto skill's reuse count");
        }
    }
}
