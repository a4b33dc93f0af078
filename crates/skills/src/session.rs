//! The session view: always-on bodies plus an index of on-demand skills.

use std::path::PathBuf;

use serde::Serialize;
use tracing::debug;

use crate::catalog::SkillCatalog;
use crate::constants::{INDEX_DESCRIPTION_CHARS, NEW_SKILL_BOOST_HITS, NEW_SKILL_BOOST_SECS};
use crate::delivery::WithheldSkill;
use crate::skill::{Screened, Skill};
use crate::text::truncate_chars;

/// An always-on skill's body for a new session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AlwaysSkill {
    /// SkillCatalog name.
    pub name: String,
    /// `SKILL.md` path.
    pub path: PathBuf,
    /// The body, screened (credentials and exfiltration URLs redacted).
    pub body: String,
}

/// One on-demand skill in the index the model opens on demand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IndexEntry {
    /// SkillCatalog name.
    pub name: String,
    /// Description, screened.
    pub description: String,
    /// Skill directory (its `SKILL.md` and scripts are here).
    pub dir: PathBuf,
}

/// What a new session gets from the catalog.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SessionView {
    /// `always: true` bodies, in full.
    pub always: Vec<AlwaysSkill>,
    /// On-demand skills: all of them (lazy load off) or the usage-ranked
    /// top-K that fits the budget (lazy load on).
    pub index: Vec<IndexEntry>,
    /// On-demand skills left out of the index by the budget; still
    /// reachable through search, `$name` and triggers.
    pub omitted: usize,
    /// Skills kept out because their text tripped the injection screen.
    pub withheld: Vec<WithheldSkill>,
}

const INDEX_HEADER: &str =
    "## Available Skills\nOpen a skill's SKILL.md when it applies; run its scripts from its directory.\n";
const ALWAYS_HEADER: &str = "## Always-on Skills\n";

fn index_line(entry: &IndexEntry) -> String {
    format!("- {}: {} (dir: {})\n", entry.name, entry.description, entry.dir.display())
}

fn always_block(skill: &AlwaysSkill) -> String {
    format!("### {}\n{}\n\n", skill.name, skill.body)
}

impl SessionView {
    /// The view as prompt text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if !self.always.is_empty() {
            out.push_str(ALWAYS_HEADER);
            for skill in &self.always {
                out.push_str(&always_block(skill));
            }
        }
        if !self.index.is_empty() {
            out.push_str(INDEX_HEADER);
            for entry in &self.index {
                out.push_str(&index_line(entry));
            }
            if self.omitted > 0 {
                out.push_str(&format!("({} more skills: find them with skill_search.)\n", self.omitted));
            }
        }
        out
    }
}

impl SkillCatalog {
    /// The skills part of a new session's context.
    ///
    /// With `lazy_load` off, every on-demand skill is listed, by name,
    /// descriptions untruncated, and `budget_chars` is not applied. With it
    /// on, always-on bodies are pinned and the index is filled with the
    /// top-ranked on-demand skills (by usage hits, new skills boosted, then
    /// recency) while the rendered view stays within `budget_chars`.
    pub fn session_view(&self, budget_chars: usize) -> SessionView {
        let span = tracing::debug_span!("skills.session_view", budget_chars, lazy = self.config.lazy_load);
        let _enter = span.enter();
        let snapshot = self.snapshot();
        let mut view = SessionView::default();
        let mut on_demand: Vec<&Skill> = Vec::new();
        for skill in &snapshot.skills {
            if skill.meta.always {
                match skill.screened_body() {
                    Screened::Clean(body) => view.always.push(AlwaysSkill {
                        name: skill.name.clone(),
                        path: skill.path.clone(),
                        body: body.clone(),
                    }),
                    Screened::Withheld(rule) => view.withheld.push(WithheldSkill { name: skill.name.clone(), rule }),
                }
            } else {
                on_demand.push(skill);
            }
        }
        view.always.sort_by(|a, b| a.name.cmp(&b.name));
        let describe = |skill: &Skill, cap: Option<usize>| match skill.screened_description() {
            Screened::Clean(text) => Some(match cap {
                Some(cap) => truncate_chars(text, cap),
                None => text.clone(),
            }),
            Screened::Withheld(_) => None,
        };
        if !self.config.lazy_load {
            on_demand.sort_by(|a, b| a.name.cmp(&b.name));
            for skill in on_demand {
                match describe(skill, None) {
                    Some(description) => {
                        view.index.push(IndexEntry { name: skill.name.clone(), description, dir: skill.dir.clone() })
                    }
                    None => view.withheld.push(withheld(skill)),
                }
            }
            return view;
        }
        let usage = self.ledger.snapshot();
        let now = self.clock.now_secs();
        let rank = |skill: &Skill| {
            let entry = usage.get(&skill.name).copied().unwrap_or_default();
            let is_new = now.saturating_sub(skill.modified_secs) < NEW_SKILL_BOOST_SECS;
            let hits = entry.hits + if is_new { NEW_SKILL_BOOST_HITS } else { 0 };
            (hits, entry.last_used.max(if is_new { skill.modified_secs } else { 0 }))
        };
        let mut ranked: Vec<(u64, u64, &Skill)> = on_demand
            .into_iter()
            .map(|skill| {
                let (hits, recency) = rank(skill);
                (hits, recency, skill)
            })
            .collect();
        ranked.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then_with(|| a.2.name.cmp(&b.2.name)));
        let mut used: usize = view.always.iter().map(|skill| always_block(skill).chars().count()).sum::<usize>()
            + if view.always.is_empty() { 0 } else { ALWAYS_HEADER.len() }
            + INDEX_HEADER.len();
        let reserve = 64; // room for the "N more skills" line
        let mut full = false;
        for (_, _, skill) in ranked {
            let Some(description) = describe(skill, Some(INDEX_DESCRIPTION_CHARS)) else {
                view.withheld.push(withheld(skill));
                continue;
            };
            if full {
                view.omitted += 1;
                continue;
            }
            let entry = IndexEntry { name: skill.name.clone(), description, dir: skill.dir.clone() };
            let cost = index_line(&entry).chars().count();
            if used + cost + reserve > budget_chars {
                // Top-K is a prefix of the ranking: once one does not fit,
                // the rest wait for search, triggers and `$name`.
                full = true;
                view.omitted += 1;
                continue;
            }
            used += cost;
            view.index.push(entry);
        }
        debug!(
            listed = view.index.len(),
            omitted = view.omitted,
            always = view.always.len(),
            "session skill index built"
        );
        view
    }
}

fn withheld(skill: &Skill) -> WithheldSkill {
    let rule = match skill.screened_description() {
        Screened::Withheld(rule) => rule,
        Screened::Clean(_) => "description",
    };
    WithheldSkill { name: skill.name.clone(), rule }
}
