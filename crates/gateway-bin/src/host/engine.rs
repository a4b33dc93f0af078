//! What a host hook answers, the same wherever it runs: in the home's
//! gateway (hybrid recall, the session pipeline) or in the hook process's
//! own bounded fallback (keyword recall, transcript written directly).
//!
//! [`answer`] turns one hook event into a [`HookAnswer`] (stdout, stderr,
//! exit status) in the calling host's protocol; the [`HookBackend`] says
//! where the context comes from and where a transcript message goes.

use cairn_context::{AgentContext, BuiltContext, ContextBuilder, MessageRequest, SectionName, SessionRequest};
use cairn_guard::SensitivePaths;
use cairn_hooks::ToolDecision;
use cairn_memory_core::{ProjectRule, Scope, ScopeFilter, ToolCall, TranscriptMessage};
use serde_json::{Value, json};

use super::{EventKind, HookAnswer, HostName, Recall};

/// Claude Code's cap on hook output strings, in characters.
pub(crate) const CLAUDE_CODE_OUTPUT_CHARS: usize = 10_000;
/// kiro-cli's cap on hook output, in bytes.
pub(crate) const KIRO_OUTPUT_BYTES: usize = 10 * 1024;
/// Largest host transcript tail read for its last assistant entry.
pub(crate) const MAX_TRANSCRIPT_TAIL_BYTES: u64 = 8 * 1024 * 1024;
/// Most characters of a tool's input or output kept in a transcript message.
const TOOL_TEXT_CHARS: usize = 4_000;
/// Most characters of an assistant reply kept in a transcript message.
const REPLY_CHARS: usize = 32_000;
/// Marker at the end of cut context.
const CUT_MARKER: &str = "[… cut to the host's hook output limit]";
/// The start of the line a keyword-only context ends with.
pub(crate) const KEYWORD_ONLY_NOTICE: &str = "[Cairn: memory recall was keyword-only for this message";

/// Where a hook's context comes from and where its transcript goes.
pub(crate) trait HookBackend {
    /// The context builder over the home's stores, skills and config hooks.
    fn context(&self) -> anyhow::Result<&ContextBuilder>;
    /// `hooks.auto_deny_tools` / `auto_approve_tools` for one tool name.
    fn tool_decision(&self, tool: &str) -> anyhow::Result<ToolDecision>;
    /// Appends `message` to the session `key`'s transcript (durably, before
    /// this returns); a new session runs in `scope`.
    fn record(&self, key: &str, scope: &Scope, message: TranscriptMessage) -> anyhow::Result<()>;
    /// The agent `name` as its context scope.
    fn agent(&self, name: &str) -> anyhow::Result<AgentContext>;
    /// Paths never read on a model's behalf (a host transcript path is untrusted).
    fn sensitive(&self) -> &SensitivePaths;
    /// How episodic memory is recalled here.
    fn recall(&self) -> Recall;
    /// `context.max_inject_chars`: the most context any host receives.
    fn max_inject_chars(&self) -> usize;
    /// `memory.separate_worktrees`, as the rule naming a host's project.
    fn project_rule(&self) -> ProjectRule;
}

/// The project the host runs in, from the event's `cwd` (none without one).
fn project(backend: &dyn HookBackend, input: &Value) -> Option<Scope> {
    let cwd = input.get("cwd").and_then(Value::as_str)?;
    cairn_memory_core::project_of(std::path::Path::new(cwd), backend.project_rule())
}

/// A backend that records nothing: a private session
/// (`CAIRN_PRIVATE_SESSION`, or `memory.record_sessions` off) still gets
/// its context and tool decisions.
struct Unrecorded<'a>(&'a dyn HookBackend);

impl HookBackend for Unrecorded<'_> {
    fn context(&self) -> anyhow::Result<&ContextBuilder> {
        self.0.context()
    }

    fn tool_decision(&self, tool: &str) -> anyhow::Result<ToolDecision> {
        self.0.tool_decision(tool)
    }

    fn record(&self, _key: &str, _scope: &Scope, _message: TranscriptMessage) -> anyhow::Result<()> {
        Ok(())
    }

    fn agent(&self, name: &str) -> anyhow::Result<AgentContext> {
        self.0.agent(name)
    }

    fn sensitive(&self) -> &SensitivePaths {
        self.0.sensitive()
    }

    fn recall(&self) -> Recall {
        self.0.recall()
    }

    fn max_inject_chars(&self) -> usize {
        self.0.max_inject_chars()
    }

    fn project_rule(&self) -> ProjectRule {
        self.0.project_rule()
    }
}

/// Answers one hook event. Never fails: a broken input answers with no
/// context and one stderr line, exit 0 (a hook must never block a prompt
/// by accident). With `record` false nothing of the session is recorded:
/// a recording-only event answers nothing at once, and a prompt gets its
/// context without being appended.
pub(crate) fn answer(
    backend: &dyn HookBackend,
    host: HostName,
    event: &str,
    agent: Option<&str>,
    input: &Value,
    record: bool,
) -> HookAnswer {
    let Some(kind) = EventKind::of(host, event) else {
        return HookAnswer::skip(format!("{} has no Cairn hook for event {event:?}", host.key()));
    };
    if !record && kind == EventKind::Record {
        return HookAnswer::default();
    }
    let unrecorded = Unrecorded(backend);
    let backend: &dyn HookBackend = if record { backend } else { &unrecorded };
    let agent = match agent.map(|name| backend.agent(name)) {
        None => None,
        Some(Ok(agent)) => Some(agent),
        Some(Err(error)) => return HookAnswer::skip(format!("agent {:?}: {error:#}", agent.unwrap_or(""))),
    };
    let agent = agent.as_ref();
    let outcome = match (host, event) {
        (HostName::ClaudeCode, "SessionStart") => claude_session_start(backend, agent, input),
        (HostName::ClaudeCode, "UserPromptSubmit") => claude_prompt(backend, agent, input),
        (HostName::ClaudeCode, "PreToolUse") => claude_pre_tool(backend, input),
        (HostName::ClaudeCode, "PostToolUse") => record_tool(backend, host, input),
        (HostName::ClaudeCode, "Stop") => claude_stop(backend, input),
        (HostName::ClaudeCode, "SessionEnd") => claude_end(backend, input),
        (HostName::KiroCli, "agentSpawn") => kiro_spawn(backend, agent, input),
        (HostName::KiroCli, "userPromptSubmit") => kiro_prompt(backend, agent, input),
        (HostName::KiroCli, "preToolUse") => kiro_pre_tool(backend, input),
        (HostName::KiroCli, "postToolUse") => record_tool(backend, host, input),
        (HostName::KiroCli, "stop") => kiro_stop(backend, input),
        _ => unreachable!("EventKind::of lists exactly these events ({kind:?})"),
    };
    outcome.unwrap_or_else(|error| HookAnswer::skip(format!("{error:#}")))
}

fn field<'a>(input: &'a Value, name: &str) -> anyhow::Result<&'a str> {
    input.get(name).and_then(Value::as_str).ok_or_else(|| anyhow::anyhow!("the hook input has no `{name}` string"))
}

/// Sections no cap ever drops.
fn protected(name: SectionName) -> bool {
    matches!(name, SectionName::Lessons | SectionName::Preamble)
}

/// The context's sections (without the echoed user message), dropped from
/// the lowest priority (the end) until the text fits `fits`; protected
/// sections stay, and if they alone are too long the text is cut at a
/// line boundary from the end, so the lessons header always survives.
pub(crate) fn clamp(built: &BuiltContext, fits: impl Fn(&str) -> bool) -> String {
    let mut parts: Vec<(SectionName, String)> = Vec::new();
    let mut rest = built.text.as_str();
    for report in built.sections.iter().filter(|report| report.name != SectionName::Separators) {
        let end = rest.char_indices().nth(report.chars).map_or(rest.len(), |(at, _)| at);
        parts.push((report.name, rest[..end].to_owned()));
        rest = rest[end..].strip_prefix("\n\n").unwrap_or(&rest[end..]);
    }
    parts.retain(|(name, _)| *name != SectionName::Message);
    let join =
        |parts: &[(SectionName, String)]| parts.iter().map(|(_, text)| text.as_str()).collect::<Vec<_>>().join("\n\n");
    let mut text = join(&parts);
    while !fits(&text) {
        let Some(index) = parts.iter().rposition(|(name, _)| !protected(*name)) else { break };
        tracing::debug!(section = parts[index].0.as_str(), "section dropped at the host's hook output cap");
        parts.remove(index);
        text = join(&parts);
    }
    while !fits(&text) {
        let Some(cut) = text.trim_end().rfind('\n') else {
            text.clear();
            break;
        };
        text.truncate(cut);
        let mut marked = text.clone();
        marked.push('\n');
        marked.push_str(CUT_MARKER);
        if fits(&marked) {
            text = marked;
            break;
        }
        if fits(&text) {
            break;
        }
    }
    text
}

/// Whether `text` fits what `host` accepts and the home's ceiling.
fn fits(backend: &dyn HookBackend, host: HostName, reserve: usize) -> impl Fn(&str) -> bool {
    let ceiling = backend.max_inject_chars().saturating_sub(reserve);
    move |text: &str| {
        let chars = text.chars().count();
        chars <= ceiling
            && match host {
                HostName::ClaudeCode => chars + reserve <= CLAUDE_CODE_OUTPUT_CHARS,
                HostName::KiroCli => text.len() + reserve <= KIRO_OUTPUT_BYTES,
            }
    }
}

/// The context for `host`, clamped, with the keyword-only notice when
/// recall was keyword-only.
fn finish(backend: &dyn HookBackend, host: HostName, built: &BuiltContext) -> String {
    let notice = match backend.recall() {
        Recall::Hybrid => None,
        Recall::Keyword(why) => Some(format!("{KEYWORD_ONLY_NOTICE}: {why}]")),
    };
    let reserve = notice.as_ref().map_or(0, |notice| notice.len() + 2);
    let mut text = clamp(built, fits(backend, host, reserve));
    if let Some(notice) = notice {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(&notice);
    }
    text
}

fn claude_context(event: &str, text: String) -> Option<String> {
    if text.trim().is_empty() {
        return None;
    }
    Some(json!({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}).to_string())
}

fn session_key(host: HostName, session_id: &str) -> String {
    format!("{}:{}", host.key(), cut_chars(session_id, 200))
}

fn session_context(
    backend: &dyn HookBackend,
    host: HostName,
    agent: Option<&AgentContext>,
    input: &Value,
) -> anyhow::Result<String> {
    let query = input.get("cwd").and_then(Value::as_str).unwrap_or("");
    let scopes = ScopeFilter::visible_from(project(backend, input).as_ref());
    let request =
        SessionRequest { query, agent, surface: Some(host.surface()), scopes: Some(&scopes), ..Default::default() };
    let built = backend.context()?.build_session_context(&request);
    Ok(finish(backend, host, &built))
}

/// The per-message context, or the auto-reply a config hook answered with.
enum MessageAnswer {
    Context(String),
    AutoReply(String),
}

fn message_context(
    backend: &dyn HookBackend,
    host: HostName,
    agent: Option<&AgentContext>,
    prompt: &str,
    input: &Value,
) -> anyhow::Result<MessageAnswer> {
    let scopes = ScopeFilter::visible_from(project(backend, input).as_ref());
    let request = MessageRequest {
        message: prompt,
        agent,
        surface: Some(host.surface()),
        scopes: Some(&scopes),
        ..Default::default()
    };
    let built = backend.context()?.build_message(&request);
    if let Some(reply) = built.auto_reply {
        return Ok(MessageAnswer::AutoReply(reply.reply));
    }
    Ok(MessageAnswer::Context(finish(backend, host, &built)))
}

/// Records `message` in the session the event names; a failure is a
/// warning on stderr, never a blocked prompt.
fn record_or_warn(
    backend: &dyn HookBackend,
    input: &Value,
    key: anyhow::Result<String>,
    message: TranscriptMessage,
) -> Option<String> {
    if message.content.trim().is_empty() && message.tool_calls.is_empty() {
        return None;
    }
    let scope = project(backend, input).unwrap_or_default();
    match key.and_then(|key| backend.record(&key, &scope, message)) {
        Ok(()) => None,
        Err(error) => {
            tracing::warn!(error = %format!("{error:#}"), "the message was not recorded in the transcript");
            Some(format!("cairn hook: the message was not recorded: {error:#}"))
        }
    }
}

fn claude_key(input: &Value) -> anyhow::Result<String> {
    Ok(session_key(HostName::ClaudeCode, field(input, "session_id")?))
}

fn claude_session_start(
    backend: &dyn HookBackend,
    agent: Option<&AgentContext>,
    input: &Value,
) -> anyhow::Result<HookAnswer> {
    let text = session_context(backend, HostName::ClaudeCode, agent, input)?;
    Ok(HookAnswer::out(claude_context("SessionStart", text)))
}

fn claude_prompt(backend: &dyn HookBackend, agent: Option<&AgentContext>, input: &Value) -> anyhow::Result<HookAnswer> {
    let prompt = field(input, "prompt")?;
    // Recorded first, so a context that fails (or a finisher that answers
    // nothing) still keeps the prompt.
    let warning = record_or_warn(backend, input, claude_key(input), TranscriptMessage::new("user", prompt));
    let answer = message_context(backend, HostName::ClaudeCode, agent, prompt, input)?;
    let stdout = match answer {
        MessageAnswer::Context(text) => claude_context("UserPromptSubmit", text),
        MessageAnswer::AutoReply(reply) => {
            let reply: String = reply.chars().take(CLAUDE_CODE_OUTPUT_CHARS).collect();
            Some(json!({"decision": "block", "reason": reply}).to_string())
        }
    };
    Ok(HookAnswer { stdout, stderr: warning, exit: 0 })
}

pub(crate) fn cut_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The tool call a tool event carries: its name and its input (a long
/// input is cut to a string).
fn tool_call(input: &Value) -> anyhow::Result<(String, ToolCall)> {
    let tool = field(input, "tool_name")?;
    let tool_input = input.get("tool_input").cloned().unwrap_or(Value::Null);
    let tool_input = match serde_json::to_string(&tool_input) {
        Ok(text) if text.chars().count() > TOOL_TEXT_CHARS => Value::String(cut_chars(&text, TOOL_TEXT_CHARS)),
        _ => tool_input,
    };
    let response = cut_chars(&text_of(input.get("tool_response").unwrap_or(&Value::Null)), TOOL_TEXT_CHARS);
    Ok((format!("[{tool} result] {response}"), ToolCall::new(tool, tool_input)))
}

fn record_tool(backend: &dyn HookBackend, host: HostName, input: &Value) -> anyhow::Result<HookAnswer> {
    let (text, call) = tool_call(input)?;
    let key = match host {
        HostName::ClaudeCode => claude_key(input)?,
        HostName::KiroCli => kiro_session(input)?,
    };
    let message = TranscriptMessage::new("assistant", text).with_tool_calls(vec![call]);
    backend.record(&key, &project(backend, input).unwrap_or_default(), message)?;
    Ok(HookAnswer::default())
}

/// Why a tool call was decided: the rule that matched.
fn decision_reason(decision: &ToolDecision) -> Option<(bool, String)> {
    match decision {
        ToolDecision::Deny { pattern } => {
            Some((false, format!("denied by Cairn: hooks.auto_deny_tools matches {pattern:?}")))
        }
        ToolDecision::Approve { pattern } => {
            Some((true, format!("approved by Cairn: hooks.auto_approve_tools matches {pattern:?}")))
        }
        ToolDecision::NoRule => None,
    }
}

/// Claude Code `PreToolUse`: `permissionDecision` `deny` or `allow` when a
/// rule matches; no output (the host asks as usual) otherwise.
fn claude_pre_tool(backend: &dyn HookBackend, input: &Value) -> anyhow::Result<HookAnswer> {
    let tool = field(input, "tool_name")?;
    let Some((allow, reason)) = decision_reason(&backend.tool_decision(tool)?) else {
        return Ok(HookAnswer::default());
    };
    let output = json!({"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": if allow { "allow" } else { "deny" },
        "permissionDecisionReason": reason,
    }});
    Ok(HookAnswer::out(Some(output.to_string())))
}

/// kiro-cli `preToolUse`: exit 2 with the reason on stderr blocks the
/// call (kiro-cli returns stderr to the model); anything else exits 0.
/// kiro-cli has no way for a hook to approve a call, so an approve rule
/// changes nothing there.
fn kiro_pre_tool(backend: &dyn HookBackend, input: &Value) -> anyhow::Result<HookAnswer> {
    let tool = field(input, "tool_name")?;
    match decision_reason(&backend.tool_decision(tool)?) {
        Some((false, reason)) => Ok(HookAnswer { stdout: None, stderr: Some(reason), exit: 2 }),
        _ => Ok(HookAnswer::default()),
    }
}

/// The text of the newest assistant entry of a Claude Code transcript
/// (JSONL, one entry per line), read from its last few megabytes; with
/// the bytes before them that were not read.
fn last_assistant_text(backend: &dyn HookBackend, path: &str) -> anyhow::Result<(Option<String>, u64)> {
    let path = std::path::Path::new(path);
    let (tail, skipped) = backend
        .sensitive()
        .read_tail_bounded(path, MAX_TRANSCRIPT_TAIL_BYTES)
        .map_err(|error| anyhow::anyhow!("the transcript was not read, so the reply was not recorded: {error}"))?;
    let text = tail.lines().rev().find_map(|line| {
        let entry: Value = serde_json::from_str(line).ok()?;
        if entry.get("type").and_then(Value::as_str) != Some("assistant") {
            return None;
        }
        let content = entry.pointer("/message/content")?;
        let text = match content {
            Value::String(text) => text.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|block| block.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => return None,
        };
        (!text.trim().is_empty()).then_some(text)
    });
    Ok((text, skipped))
}

fn claude_stop(backend: &dyn HookBackend, input: &Value) -> anyhow::Result<HookAnswer> {
    let (text, skipped) = match input.get("last_assistant_message").and_then(Value::as_str) {
        Some(text) => (Some(text.to_owned()), 0),
        None => match input.get("transcript_path").and_then(Value::as_str) {
            Some(path) => last_assistant_text(backend, path)?,
            None => (None, 0),
        },
    };
    let Some(text) = text else {
        let why = if skipped > 0 {
            format!(
                "no assistant reply in the transcript's last {MAX_TRANSCRIPT_TAIL_BYTES} bytes ({skipped} earlier bytes not read); nothing recorded"
            )
        } else {
            "the Stop event carries no assistant reply; nothing recorded".to_owned()
        };
        return Ok(HookAnswer::skip(why));
    };
    let message = TranscriptMessage::new("assistant", cut_chars(&text, REPLY_CHARS));
    let warning = record_or_warn(backend, input, claude_key(input), message);
    Ok(HookAnswer { stdout: None, stderr: warning, exit: 0 })
}

fn claude_end(backend: &dyn HookBackend, input: &Value) -> anyhow::Result<HookAnswer> {
    let reason = input.get("reason").and_then(Value::as_str).unwrap_or("other");
    let message = TranscriptMessage::new("system", format!("[session ended: {}]", cut_chars(reason, 100)));
    backend.record(&claude_key(input)?, &project(backend, input).unwrap_or_default(), message)?;
    Ok(HookAnswer::default())
}

fn kiro_spawn(backend: &dyn HookBackend, agent: Option<&AgentContext>, input: &Value) -> anyhow::Result<HookAnswer> {
    let text = session_context(backend, HostName::KiroCli, agent, input)?;
    Ok(HookAnswer::out((!text.trim().is_empty()).then_some(text)))
}

/// kiro-cli's transcript key: the event's session, else its working directory.
fn kiro_session(input: &Value) -> anyhow::Result<String> {
    let session = input.get("session_id").and_then(Value::as_str).filter(|id| !id.trim().is_empty());
    let session = match session {
        Some(session) => session,
        None => field(input, "cwd")?,
    };
    Ok(session_key(HostName::KiroCli, session))
}

fn kiro_prompt(backend: &dyn HookBackend, agent: Option<&AgentContext>, input: &Value) -> anyhow::Result<HookAnswer> {
    let prompt = field(input, "prompt")?;
    let warning = record_or_warn(backend, input, kiro_session(input), TranscriptMessage::new("user", prompt));
    let stdout = match message_context(backend, HostName::KiroCli, agent, prompt, input)? {
        MessageAnswer::Context(text) => (!text.trim().is_empty()).then_some(text),
        // kiro-cli has no blocking answer on userPromptSubmit: the reply is context.
        MessageAnswer::AutoReply(reply) => Some(cut_chars(&reply, KIRO_OUTPUT_BYTES / 4)),
    };
    Ok(HookAnswer { stdout, stderr: warning, exit: 0 })
}

/// kiro-cli `stop`: the assistant's reply of the turn, when the event
/// carries it (`assistant_response`).
fn kiro_stop(backend: &dyn HookBackend, input: &Value) -> anyhow::Result<HookAnswer> {
    let reply = ["assistant_response", "last_assistant_message"]
        .iter()
        .find_map(|name| input.get(*name).and_then(Value::as_str))
        .filter(|text| !text.trim().is_empty());
    let Some(reply) = reply else {
        return Ok(HookAnswer::skip("the stop event carries no assistant reply (nothing recorded)".to_owned()));
    };
    let message = TranscriptMessage::new("assistant", cut_chars(reply, REPLY_CHARS));
    let warning = record_or_warn(backend, input, kiro_session(input), message);
    Ok(HookAnswer { stdout: None, stderr: warning, exit: 0 })
}

#[cfg(test)]
mod tests {
    use cairn_context::SectionReport;

    use super::*;

    fn built(parts: &[(SectionName, String)]) -> BuiltContext {
        let text = parts.iter().map(|(_, text)| text.as_str()).collect::<Vec<_>>().join("\n\n");
        let mut sections: Vec<SectionReport> = parts
            .iter()
            .map(|(name, text)| SectionReport { name: *name, chars: text.chars().count(), cap: None, truncated: false })
            .collect();
        sections.push(SectionReport {
            name: SectionName::Separators,
            chars: 2 * (parts.len() - 1),
            cap: None,
            truncated: false,
        });
        BuiltContext {
            text,
            caps: cairn_context::resolve_caps(None),
            ceiling: None,
            sections,
            notices: Vec::new(),
            auto_reply: None,
        }
    }

    #[test]
    fn clamp_drops_the_lowest_priority_sections_first_and_keeps_the_lessons() {
        let lessons = "[Learned corrections]\n- never force-push".to_owned();
        let context = built(&[
            (SectionName::Preamble, "rules".to_owned()),
            (SectionName::Lessons, lessons.clone()),
            (SectionName::Semantic, "s".repeat(60)),
            (SectionName::Skills, "k".repeat(60)),
            (SectionName::Message, "the prompt".to_owned()),
        ]);
        let fits = |limit: usize| move |text: &str| text.chars().count() <= limit;
        let all = clamp(&context, fits(10_000));
        assert!(!all.contains("the prompt"), "the user's message is never echoed");
        assert!(all.contains(&"k".repeat(60)));
        let without_skills = clamp(&context, fits(130));
        assert!(!without_skills.contains('k') && without_skills.contains(&"s".repeat(60)), "{without_skills}");
        let only_protected = clamp(&context, fits(60));
        assert_eq!(only_protected, format!("rules\n\n{lessons}"));
        assert_eq!(clamp(&context, fits(47)), format!("rules\n\n{lessons}"));
        let cut = clamp(&context, fits(35));
        assert_eq!(cut, "rules\n\n[Learned corrections]", "the lessons header survives");
        let marked = clamp(&context, fits(46 + CUT_MARKER.chars().count()));
        assert_eq!(marked, format!("rules\n\n{lessons}"));
    }
}
