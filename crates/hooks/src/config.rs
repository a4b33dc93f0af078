//! Config hooks: the declarative rules of the `hooks` config section.
//!
//! Tool rules approve or deny a tool call by name pattern (`exact`,
//! `prefix*`, `*suffix`, `*contains*`); deny always wins. Message rules run
//! in a fixed order: an auto-reply answers without the agent, otherwise the
//! first matching transform prefixes the message, then every matching
//! context rule adds its text.

use std::fmt;

use regex::{Regex, RegexBuilder, RegexSet, RegexSetBuilder};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::constants::{MAX_MESSAGE_PATTERN_LEN, MESSAGE_PATTERN_SIZE_LIMIT};
use crate::error::{HooksError, Result};
use crate::matcher::ToolName;

/// The `hooks` section as written. Map-valued fields keep the order they
/// were written in when deserialised straight from JSON text; each also
/// accepts a list of `{pattern, reply}` / `{pattern, prefix}` /
/// `{keywords, context}` objects.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct HooksConfig {
    /// Tool patterns approved without asking.
    pub auto_approve_tools: Vec<String>,
    /// Tool patterns always refused; wins over approval.
    pub auto_deny_tools: Vec<String>,
    /// Message pattern (case-insensitive regex) → reply sent instead of running the agent.
    pub auto_replies: Pairs,
    /// Message pattern (case-insensitive regex) → prefix prepended to the message.
    pub transforms: Pairs,
    /// Trigger keywords → context text added to the message.
    pub context_rules: ContextRules,
}

/// Ordered `pattern → text` pairs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Pairs(pub Vec<(String, String)>);

/// Ordered context rules.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ContextRules(pub Vec<ContextRule>);

/// Trigger keywords and the context they add.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct ContextRule {
    /// Whole words, matched case-insensitively; any one triggers the rule.
    #[serde(alias = "triggers")]
    pub keywords: Vec<String>,
    /// Text added to the message when a keyword appears.
    pub context: String,
}

/// Which way a tool rule went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum ToolDecision {
    /// An `auto_deny_tools` pattern matched.
    Deny {
        /// The pattern that matched.
        pattern: String,
    },
    /// An `auto_approve_tools` pattern matched and no deny pattern did.
    Approve {
        /// The pattern that matched.
        pattern: String,
    },
    /// No rule applies; the host asks as usual.
    NoRule,
}

/// What the message rules made of a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum MessageOutcome {
    /// Answer with `reply` and do not run the agent.
    Reply {
        /// The auto-reply pattern that matched.
        pattern: String,
        /// The reply text.
        reply: String,
    },
    /// Run the agent on `message` with `context` added.
    Forward {
        /// The message, with a transform's prefix when one matched.
        message: String,
        /// The transform pattern that matched, if any.
        transform: Option<String>,
        /// Context texts of every matching context rule, in config order.
        context: Vec<String>,
    },
}

/// A problem with the config that does not stop it from loading.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigWarning {
    /// Where the value sits.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

/// A tool name pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolPattern {
    /// The tool's name (or an alias of it) equals this.
    Exact(String),
    /// `prefix*`.
    Prefix(String),
    /// `*suffix`.
    Suffix(String),
    /// `*contains*`.
    Contains(String),
    /// `*` alone: every tool (deny lists only).
    All,
}

impl ToolPattern {
    /// Parses one pattern; `key` names it in errors.
    pub fn parse(pattern: &str, key: &str) -> Result<Self> {
        let invalid = |reason: &str| HooksError::InvalidPattern {
            key: key.to_owned(),
            pattern: pattern.to_owned(),
            reason: reason.to_owned(),
        };
        if pattern.is_empty() {
            return Err(invalid("empty pattern"));
        }
        if pattern.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(invalid("tool patterns contain no whitespace or control characters"));
        }
        if pattern == "*" {
            return Ok(ToolPattern::All);
        }
        let leading = pattern.starts_with('*');
        let trailing = pattern.len() > 1 && pattern.ends_with('*');
        let inner = &pattern[usize::from(leading)..pattern.len() - usize::from(trailing)];
        if inner.is_empty() {
            return Err(invalid("a pattern needs text besides `*`"));
        }
        if inner.contains('*') {
            return Err(invalid("`*` may only open or close a pattern (exact, prefix*, *suffix, *contains*)"));
        }
        let inner = inner.to_owned();
        Ok(match (leading, trailing) {
            (false, false) => ToolPattern::Exact(inner),
            (false, true) => ToolPattern::Prefix(inner),
            (true, false) => ToolPattern::Suffix(inner),
            (true, true) => ToolPattern::Contains(inner),
        })
    }

    /// True for the forms that reach tools nobody listed (`*suffix`,
    /// `*contains*`, `*`).
    pub fn is_broad(&self) -> bool {
        matches!(self, ToolPattern::Suffix(_) | ToolPattern::Contains(_) | ToolPattern::All)
    }

    fn matches(&self, name: &str) -> bool {
        match self {
            ToolPattern::Exact(text) => name == text,
            ToolPattern::Prefix(text) => name.starts_with(text.as_str()),
            ToolPattern::Suffix(text) => name.ends_with(text.as_str()),
            ToolPattern::Contains(text) => name.contains(text.as_str()),
            ToolPattern::All => true,
        }
    }
}

/// Compiled config hooks, ready to evaluate.
#[derive(Debug, Clone, Default)]
pub struct ConfigHooks {
    approve: Vec<(String, ToolPattern)>,
    deny: Vec<(String, ToolPattern)>,
    replies: Option<RegexSet>,
    reply_rules: Vec<(String, String)>,
    transforms: Option<RegexSet>,
    transform_rules: Vec<(String, String)>,
    context: Vec<String>,
    context_any: Option<RegexSet>,
}

impl ConfigHooks {
    /// Validates and compiles `config`. Every pattern is checked; the first
    /// bad one is the error, named by its key. Warnings cover broad approve
    /// patterns, credentials redacted from reply/prefix/context texts and
    /// texts that read like injected instructions.
    pub fn compile(config: &HooksConfig) -> Result<(Self, Vec<ConfigWarning>)> {
        let _span = tracing::debug_span!("compile_config_hooks").entered();
        let mut warnings = Vec::new();
        let mut hooks = ConfigHooks::default();
        for (index, pattern) in config.auto_approve_tools.iter().enumerate() {
            let key = format!("auto_approve_tools[{index}]");
            let parsed = ToolPattern::parse(pattern, &key)?;
            if parsed == ToolPattern::All {
                return Err(HooksError::InvalidPattern {
                    key,
                    pattern: pattern.clone(),
                    reason: "`*` would approve every tool; list the tools instead".to_owned(),
                });
            }
            if parsed.is_broad() {
                warnings.push(ConfigWarning {
                    key: key.clone(),
                    message: format!("broad approve pattern {pattern:?} also approves tools nobody listed"),
                });
            }
            hooks.approve.push((pattern.clone(), parsed));
        }
        for (index, pattern) in config.auto_deny_tools.iter().enumerate() {
            let parsed = ToolPattern::parse(pattern, &format!("auto_deny_tools[{index}]"))?;
            hooks.deny.push((pattern.clone(), parsed));
        }
        for (kind, pairs) in [("auto_replies", &config.auto_replies), ("transforms", &config.transforms)] {
            let mut sources = Vec::new();
            let mut rules = Vec::new();
            for (pattern, text) in &pairs.0 {
                let key = format!("{kind}[{pattern:?}]");
                message_regex(pattern, &key)?;
                sources.push(pattern.as_str());
                rules.push((pattern.clone(), screened_text(text, &key, &mut warnings)));
            }
            let set = if sources.is_empty() { None } else { Some(regex_set(&sources, kind)?) };
            if kind == "auto_replies" {
                (hooks.replies, hooks.reply_rules) = (set, rules);
            } else {
                (hooks.transforms, hooks.transform_rules) = (set, rules);
            }
        }
        let mut any_sources = Vec::new();
        for (index, rule) in config.context_rules.0.iter().enumerate() {
            let key = format!("context_rules[{index}]");
            if rule.keywords.is_empty() {
                return Err(HooksError::InvalidConfig {
                    key,
                    reason: "a context rule needs at least one keyword".to_owned(),
                });
            }
            let mut alternatives = Vec::new();
            for keyword in &rule.keywords {
                let keyword = keyword.trim();
                if keyword.is_empty() {
                    return Err(HooksError::InvalidPattern {
                        key,
                        pattern: String::new(),
                        reason: "empty keyword".to_owned(),
                    });
                }
                alternatives.push(regex::escape(keyword));
            }
            // Whole words: a keyword is not met inside a longer word.
            let source = format!(r"(?:^|\W)(?:{})(?:\W|$)", alternatives.join("|"));
            message_regex(&source, &key)?;
            any_sources.push(source);
            hooks.context.push(screened_text(&rule.context, &key, &mut warnings));
        }
        if !any_sources.is_empty() {
            let sources: Vec<&str> = any_sources.iter().map(String::as_str).collect();
            hooks.context_any = Some(regex_set(&sources, "context_rules")?);
        }
        tracing::debug!(
            approve = hooks.approve.len(),
            deny = hooks.deny.len(),
            replies = hooks.reply_rules.len(),
            transforms = hooks.transform_rules.len(),
            context_rules = hooks.context.len(),
            warnings = warnings.len(),
            "config hooks compiled"
        );
        Ok((hooks, warnings))
    }

    /// Decides a tool call by name. The name is matched under its canonical
    /// id and aliases too, so denying `execute_bash` also denies `shell`.
    pub fn tool_decision(&self, tool: &str) -> ToolDecision {
        let names = ToolName::parse(tool);
        let first = |rules: &[(String, ToolPattern)]| {
            rules
                .iter()
                .find(|(_, pattern)| names.names().iter().any(|name| pattern.matches(name)))
                .map(|(source, _)| source.clone())
        };
        let decision = if let Some(pattern) = first(&self.deny) {
            ToolDecision::Deny { pattern }
        } else if let Some(pattern) = first(&self.approve) {
            ToolDecision::Approve { pattern }
        } else {
            ToolDecision::NoRule
        };
        tracing::debug!(tool, ?decision, "config hook tool decision");
        decision
    }

    /// Runs the message rules: auto-reply, then transform, then context rules.
    pub fn process_message(&self, message: &str) -> MessageOutcome {
        if let Some(index) = first_match(self.replies.as_ref(), message) {
            let (pattern, reply) = &self.reply_rules[index];
            tracing::debug!(pattern = %pattern, "auto-reply matched");
            return MessageOutcome::Reply { pattern: pattern.clone(), reply: reply.clone() };
        }
        // Context rules look at what the user wrote, not at a transform's prefix.
        let context: Vec<String> = match &self.context_any {
            Some(set) => set.matches(message).iter().map(|index| self.context[index].clone()).collect(),
            None => Vec::new(),
        };
        let (message, transform) = match first_match(self.transforms.as_ref(), message) {
            Some(index) => {
                let (pattern, prefix) = &self.transform_rules[index];
                tracing::debug!(pattern = %pattern, "transform matched");
                (format!("{prefix}{message}"), Some(pattern.clone()))
            }
            None => (message.to_owned(), None),
        };
        tracing::debug!(context_rules = context.len(), "message rules applied");
        MessageOutcome::Forward { message, transform, context }
    }

    /// Number of rules of every kind (tool patterns, replies, transforms,
    /// context rules).
    pub fn rule_count(&self) -> usize {
        self.approve.len() + self.deny.len() + self.reply_rules.len() + self.transform_rules.len() + self.context.len()
    }
}

fn first_match(set: Option<&RegexSet>, text: &str) -> Option<usize> {
    let set = set?;
    if !set.is_match(text) {
        return None;
    }
    set.matches(text).iter().next()
}

fn message_regex(pattern: &str, key: &str) -> Result<Regex> {
    let invalid =
        |reason: String| HooksError::InvalidPattern { key: key.to_owned(), pattern: pattern.to_owned(), reason };
    if pattern.is_empty() {
        return Err(invalid("empty pattern would match every message".to_owned()));
    }
    if pattern.chars().count() > MAX_MESSAGE_PATTERN_LEN {
        return Err(invalid(format!("longer than {MAX_MESSAGE_PATTERN_LEN} characters")));
    }
    let compiled = RegexBuilder::new(pattern)
        .case_insensitive(true)
        .size_limit(MESSAGE_PATTERN_SIZE_LIMIT)
        .build()
        .map_err(|error| invalid(error.to_string()))?;
    if compiled.is_match("") {
        return Err(invalid("pattern matches the empty message, so it would match every message".to_owned()));
    }
    Ok(compiled)
}

fn regex_set(sources: &[&str], key: &str) -> Result<RegexSet> {
    RegexSetBuilder::new(sources)
        .case_insensitive(true)
        .size_limit(MESSAGE_PATTERN_SIZE_LIMIT * sources.len().max(1))
        .build()
        .map_err(|error| HooksError::InvalidPattern {
            key: key.to_owned(),
            pattern: String::new(),
            reason: format!("patterns too large together: {error}"),
        })
}

/// Config texts reach a prompt or a reply: credentials are redacted, and
/// text that reads like injected instructions is flagged.
fn screened_text(text: &str, key: &str, warnings: &mut Vec<ConfigWarning>) -> String {
    let redacted = cairn_guard::redact_all(text);
    if redacted != text {
        warnings.push(ConfigWarning { key: key.to_owned(), message: "credentials redacted from the text".to_owned() });
    }
    if let Some(finding) = cairn_guard::screen(&redacted) {
        warnings.push(ConfigWarning {
            key: key.to_owned(),
            message: format!("text reads like injected instructions ({})", finding.rule),
        });
    }
    redacted.into_owned()
}

impl<'de> Deserialize<'de> for Pairs {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PairsVisitor;
        impl<'de> Visitor<'de> for PairsVisitor {
            type Value = Pairs;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of pattern → text, or a list of {pattern, reply|prefix|text}")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Pairs, A::Error> {
                let mut pairs = Vec::new();
                while let Some((pattern, text)) = map.next_entry::<String, String>()? {
                    pairs.push((pattern, text));
                }
                Ok(Pairs(pairs))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Pairs, A::Error> {
                #[derive(Deserialize)]
                struct Entry {
                    pattern: String,
                    #[serde(alias = "reply", alias = "prefix")]
                    text: String,
                }
                let mut pairs = Vec::new();
                while let Some(entry) = seq.next_element::<Entry>()? {
                    pairs.push((entry.pattern, entry.text));
                }
                Ok(Pairs(pairs))
            }
        }
        deserializer.deserialize_any(PairsVisitor)
    }
}

impl<'de> Deserialize<'de> for ContextRules {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RulesVisitor;
        impl<'de> Visitor<'de> for RulesVisitor {
            type Value = ContextRules;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of \"keyword, keyword\" → context, or a list of {keywords, context}")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ContextRules, A::Error> {
                let mut rules = Vec::new();
                while let Some((keywords, context)) = map.next_entry::<String, String>()? {
                    let keywords = keywords.split(',').map(|keyword| keyword.trim().to_owned()).collect();
                    rules.push(ContextRule { keywords, context });
                }
                Ok(ContextRules(rules))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ContextRules, A::Error> {
                let mut rules = Vec::new();
                while let Some(rule) = seq.next_element::<ContextRule>()? {
                    rules.push(rule);
                }
                Ok(ContextRules(rules))
            }
        }
        deserializer.deserialize_any(RulesVisitor).map_err(de::Error::custom)
    }
}

impl HooksConfig {
    /// Parses the `hooks` section from JSON text, keeping rule order.
    pub fn from_json_str(text: &str) -> Result<Self> {
        serde_json::from_str(text).map_err(|source| HooksError::Json { what: "hooks config", source })
    }
}
