//! The per-message pass: trigger phrases, `$name` tokens, and what each
//! match delivers (the body, or a one-line pointer).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;
use tracing::debug;

use crate::audit::{SkillAuditAction, SkillAuditEvent};
use crate::catalog::SkillCatalog;
use crate::constants::{HINT_DESCRIPTION_CHARS, HINT_HEADER};
use crate::skill::Screened;
use crate::text::truncate_chars;

/// A skill the trigger pass matched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TriggerMatch {
    /// SkillCatalog name.
    pub name: String,
    /// Sum of the word counts of the matching trigger phrases.
    pub score: u32,
}

/// Whether a match is recorded (a live message) or not (a preview).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Recording {
    Record,
    Preview,
}

/// Why a body was delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryReason {
    /// A trigger phrase matched.
    Trigger,
    /// The message named the skill as `$name`.
    Explicit,
}

/// A skill body for this message's prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeliveredSkill {
    /// SkillCatalog name.
    pub name: String,
    /// Why it is here.
    pub reason: DeliveryReason,
    /// `SKILL.md` path.
    pub path: PathBuf,
    /// Skill directory (scripts and assets are relative to it).
    pub dir: PathBuf,
    /// The body, screened: credentials and exfiltration URLs redacted.
    pub body: String,
}

/// A one-line pointer for a matched `inject_on_trigger: false` skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillHint {
    /// SkillCatalog name.
    pub name: String,
    /// Description, cut to [`HINT_DESCRIPTION_CHARS`] characters.
    pub description: String,
    /// `SKILL.md` path.
    pub path: PathBuf,
    /// Skill directory.
    pub dir: PathBuf,
}

/// A matched skill kept out of the prompt because its text tripped the
/// injection screen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WithheldSkill {
    /// SkillCatalog name.
    pub name: String,
    /// The guard rule that fired.
    pub rule: &'static str,
}

/// What one message brings in from the catalog.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MessageSkills {
    /// Bodies to inject (trigger matches first, then `$name` requests).
    pub bodies: Vec<DeliveredSkill>,
    /// Pointers for matched skills that opted out of body injection.
    pub hints: Vec<SkillHint>,
    /// Matches withheld by the injection screen.
    pub withheld: Vec<WithheldSkill>,
}

impl MessageSkills {
    /// True when nothing matched.
    pub fn is_empty(&self) -> bool {
        self.bodies.is_empty() && self.hints.is_empty() && self.withheld.is_empty()
    }

    /// The bodies as prompt text (empty when there are none).
    pub fn render_bodies(&self) -> String {
        let mut out = String::new();
        for skill in &self.bodies {
            out.push_str(&format!("[Skill: {} — {}]\n{}\n\n", skill.name, skill.path.display(), skill.body));
        }
        out
    }

    /// The `[Relevant skills for this message]` block, if any pointer.
    pub fn render_hints(&self) -> Option<String> {
        if self.hints.is_empty() {
            return None;
        }
        let mut out = String::from(HINT_HEADER);
        out.push('\n');
        for hint in &self.hints {
            out.push_str(&format!(
                "- {}: {} (read {}; directory {})\n",
                hint.name,
                hint.description,
                hint.path.display(),
                hint.dir.display()
            ));
        }
        Some(out)
    }
}

static DOLLAR_TOKEN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[\s(\[{'`\x22])\$([\p{L}\p{N}][\p{L}\p{N}_/-]*)").expect("static regex compiles")
});

impl SkillCatalog {
    /// The trigger pass alone: which skills match `message`, best first,
    /// at most `max_triggered`. `$name` tokens are not trigger words.
    /// Records nothing.
    pub fn triggered(&self, message: &str) -> Vec<TriggerMatch> {
        let max = self.config.max_triggered;
        if max == 0 {
            return Vec::new();
        }
        let snapshot = self.snapshot();
        // `$name` tokens are explicit requests, not trigger words.
        let message = if message.contains('$') {
            DOLLAR_TOKEN.replace_all(message, " ")
        } else {
            std::borrow::Cow::Borrowed(message)
        };
        let ranked = snapshot.triggers.score(&message, &self.stems, max);
        ranked
            .into_iter()
            .map(|(index, score)| TriggerMatch { name: snapshot.skills[index].name.clone(), score })
            .collect()
    }

    /// Names of skills requested with `$name` tokens, in message order,
    /// without duplicates. Always-on skills are skipped (already present).
    pub fn dollar_requests(&self, message: &str) -> Vec<String> {
        if !message.contains('$') {
            return Vec::new();
        }
        let snapshot = self.snapshot();
        let mut out: Vec<String> = Vec::new();
        for capture in DOLLAR_TOKEN.captures_iter(message) {
            let raw = capture[1].trim_end_matches(['-', '/', '_']);
            let lowered = raw.to_lowercase();
            let skill = snapshot.get(raw).or_else(|| snapshot.get(&lowered));
            if let Some(skill) = skill
                && !skill.meta.always
                && !out.contains(&skill.name)
            {
                out.push(skill.name.clone());
            }
        }
        out
    }

    /// The per-message pass: trigger matches (bodies, or pointers for
    /// `inject_on_trigger: false`), plus `$name` bodies. Records the hits in
    /// the usage ledger and one audit event for the matched set (none when
    /// nothing matched).
    ///
    /// Deliveries are *not* recorded here: the caller knows which bodies
    /// actually reached a prompt (a budget may turn a body into a pointer,
    /// a preview sends nothing) and reports them with
    /// [`record_delivered`](Self::record_delivered).
    pub fn match_message(&self, message: &str) -> MessageSkills {
        self.match_message_as(message, Recording::Record)
    }

    /// [`match_message`](Self::match_message) for a preview (`cairn skills
    /// match`, a context preview): the same result, and nothing recorded,
    /// neither in the usage ledger nor in the audit trail, so ranking data
    /// never moves because someone looked.
    pub fn preview_message(&self, message: &str) -> MessageSkills {
        self.match_message_as(message, Recording::Preview)
    }

    /// Counts one delivery for each named skill whose body reached a prompt
    /// (names the catalog does not hold are ignored).
    pub fn record_delivered<'a>(&self, names: impl IntoIterator<Item = &'a str>) {
        let snapshot = self.snapshot();
        let known: Vec<&str> = names.into_iter().filter(|name| snapshot.get(name).is_some()).collect();
        if known.is_empty() {
            return;
        }
        debug!(delivered = ?known, "skill bodies reached a prompt");
        self.ledger.record_deliveries(known);
        if let Err(error) = self.ledger.maybe_flush() {
            tracing::warn!(%error, "usage ledger flush failed");
        }
    }

    fn match_message_as(&self, message: &str, recording: Recording) -> MessageSkills {
        let span = tracing::debug_span!("skills.match_message", chars = message.len(), ?recording);
        let _enter = span.enter();
        let matches = self.triggered(message);
        let explicit = self.dollar_requests(message);
        if matches.is_empty() && explicit.is_empty() {
            return MessageSkills::default();
        }
        let snapshot = self.snapshot();
        let mut out = MessageSkills::default();
        let mut details = Vec::new();
        let requests = matches
            .iter()
            .map(|found| (found.name.as_str(), DeliveryReason::Trigger))
            .chain(explicit.iter().map(|name| (name.as_str(), DeliveryReason::Explicit)));
        let mut placed: HashSet<&str> = HashSet::new();
        for (name, reason) in requests {
            let Some(skill) = snapshot.get(name) else { continue };
            if !placed.insert(name) {
                continue;
            }
            let wants_body = reason == DeliveryReason::Explicit || skill.meta.inject_on_trigger;
            if wants_body {
                match skill.screened_body() {
                    Screened::Clean(body) => {
                        out.bodies.push(DeliveredSkill {
                            name: skill.name.clone(),
                            reason,
                            path: skill.path.clone(),
                            dir: skill.dir.clone(),
                            body: body.clone(),
                        });
                        details.push(format!("{}=body", skill.name));
                    }
                    Screened::Withheld(rule) => {
                        out.withheld.push(WithheldSkill { name: skill.name.clone(), rule });
                        details.push(format!("{}=withheld:{rule}", skill.name));
                    }
                }
            } else {
                let description = match skill.screened_description() {
                    Screened::Clean(text) => truncate_chars(text, HINT_DESCRIPTION_CHARS),
                    Screened::Withheld(_) => String::new(),
                };
                out.hints.push(SkillHint {
                    name: skill.name.clone(),
                    description,
                    path: skill.path.clone(),
                    dir: skill.dir.clone(),
                });
                details.push(format!("{}=pointer", skill.name));
            }
        }
        if recording == Recording::Preview {
            debug!(bodies = out.bodies.len(), hints = out.hints.len(), "skills preview: nothing recorded");
            return out;
        }
        self.ledger.record_hits(placed.iter().copied());
        if let Err(error) = self.ledger.maybe_flush() {
            tracing::warn!(%error, "usage ledger flush failed");
        }
        let mut names: Vec<String> = placed.iter().map(|name| (*name).to_owned()).collect();
        names.sort();
        debug!(matched = ?names, bodies = out.bodies.len(), hints = out.hints.len(), "skills matched a message");
        self.audit.record(SkillAuditEvent {
            action: SkillAuditAction::TriggerMatch,
            skills: names,
            ok: true,
            detail: details.join(" "),
        });
        out
    }
}
