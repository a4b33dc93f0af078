//! `cairn hook <host> <event>`: lifecycle hooks for agent hosts.
//!
//! Reads the host's hook JSON on stdin and answers in the host's protocol.
//!
//! - **Claude Code** (`settings.json` `hooks`): `SessionStart` answers the
//!   session context as `hookSpecificOutput.additionalContext`;
//!   `UserPromptSubmit` answers the per-message context (triggered skills,
//!   episodic memory, context rules) the same way, and records the prompt;
//!   `PostToolUse`, `Stop` and `SessionEnd` append to the session's
//!   transcript in `memory.db` (`claude-code:<session_id>`), which feeds
//!   consolidation. Output is capped at Claude Code's 10,000 characters.
//! - **kiro-cli** (agent `hooks`): `agentSpawn` and `userPromptSubmit`
//!   print the context on stdout, capped at kiro-cli's 10 KiB, scoped to
//!   the agent named by `--agent` (kiro-cli's hook input does not name it);
//!   `userPromptSubmit` and `postToolUse` append the prompt and the tool
//!   call (name and input) to the transcript `kiro-cli:<session_id>`, or
//!   `kiro-cli:<cwd>` when the event names no session.
//!
//! A broken hook must never block the user's prompt: bad or unknown input
//! exits 0 with no context and one line on stderr. The one blocking answer
//! is Claude Code's `UserPromptSubmit` `decision: "block"`, given when a
//! configured hook auto-reply answers the message.
//!
//! Within the cap, the window-scaled section caps apply first; then the
//! lowest-priority sections (the last ones) are dropped, never the lessons
//! or the critical rules.

use std::io::Read as _;
use std::process::ExitCode;
use std::sync::Arc;

use cairn_context::{AgentContext, BuiltContext, MessageRequest, SectionName, SessionRequest};
use cairn_memory_core::{MemoryDb, ToolCall, TranscriptMessage};
use serde_json::{Value, json};

use crate::home::{ContextParts, Home, SkillSources};

/// Claude Code's cap on hook output strings, in characters.
pub(crate) const CLAUDE_CODE_OUTPUT_CHARS: usize = 10_000;
/// kiro-cli's cap on hook output, in bytes.
pub(crate) const KIRO_OUTPUT_BYTES: usize = 10 * 1024;
/// Most hook input read from stdin.
const MAX_INPUT_BYTES: u64 = 4 * 1024 * 1024;
/// Largest host transcript read for its last assistant entry.
const MAX_TRANSCRIPT_BYTES: u64 = 64 * 1024 * 1024;
/// Most characters of a tool's input or output kept in a transcript message.
const TOOL_TEXT_CHARS: usize = 4_000;
/// Marker at the end of cut context.
const CUT_MARKER: &str = "[… cut to the host's hook output limit]";

/// Which host is calling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum HostName {
    /// Claude Code (`settings.json` hooks).
    ClaudeCode,
    /// kiro-cli (agent spec hooks).
    KiroCli,
}

impl HostName {
    pub(crate) fn key(self) -> &'static str {
        match self {
            HostName::ClaudeCode => "claude-code",
            HostName::KiroCli => "kiro-cli",
        }
    }
}

/// `cairn hook <host> <event>`
#[derive(Debug, clap::Args)]
pub(crate) struct HookArgs {
    /// The host whose protocol to speak.
    #[arg(value_enum)]
    pub(crate) host: HostName,
    /// The host's event name (`SessionStart`, `UserPromptSubmit`, `PostToolUse`, `Stop`,
    /// `SessionEnd`; kiro-cli: `agentSpawn`, `userPromptSubmit`, `postToolUse`).
    pub(crate) event: String,
    /// The agent the host runs (kiro-cli's hook input does not name it):
    /// the context carries only its mapped skills, its prompt and
    /// steering, and a custom agent's messages trigger no skills.
    #[arg(long, value_name = "NAME")]
    pub(crate) agent: Option<String>,
}

pub(crate) fn run(home: &Home, args: &HookArgs) -> anyhow::Result<ExitCode> {
    let mut input = String::new();
    if let Err(error) = std::io::stdin().take(MAX_INPUT_BYTES).read_to_string(&mut input) {
        return Ok(skip(&format!("cannot read the hook input: {error}")));
    }
    let input: Value = match serde_json::from_str(&input) {
        Ok(value @ Value::Object(_)) => value,
        Ok(_) => return Ok(skip("the hook input is not a JSON object")),
        Err(error) => return Ok(skip(&format!("the hook input is not JSON: {error}"))),
    };
    let agent = match args.agent.as_deref().map(|name| home.agent_context(name, None, None)) {
        None => None,
        Some(Ok(agent)) => Some(agent),
        Some(Err(error)) => return Ok(skip(&format!("agent {:?}: {error:#}", args.agent.as_deref().unwrap_or("")))),
    };
    let agent = agent.as_ref();
    let outcome = match (args.host, args.event.as_str()) {
        (HostName::ClaudeCode, "SessionStart") => claude_session_start(home, agent, &input),
        (HostName::ClaudeCode, "UserPromptSubmit") => claude_prompt(home, agent, &input),
        (HostName::ClaudeCode, "PostToolUse") => claude_tool(home, &input),
        (HostName::ClaudeCode, "Stop") => claude_stop(home, &input),
        (HostName::ClaudeCode, "SessionEnd") => claude_end(home, &input),
        (HostName::KiroCli, "agentSpawn") => kiro_spawn(home, agent, &input),
        (HostName::KiroCli, "userPromptSubmit") => kiro_prompt(home, agent, &input),
        (HostName::KiroCli, "postToolUse") => kiro_tool(home, &input),
        (host, event) => return Ok(skip(&format!("{} has no Cairn hook for event {event:?}", host.key()))),
    };
    match outcome {
        Ok(Some(output)) => {
            println!("{output}");
            Ok(ExitCode::SUCCESS)
        }
        Ok(None) => Ok(ExitCode::SUCCESS),
        Err(error) => Ok(skip(&format!("{error:#}"))),
    }
}

/// One stderr line, no context, exit 0.
fn skip(reason: &str) -> ExitCode {
    eprintln!("cairn hook: {}", reason.replace('\n', " "));
    ExitCode::SUCCESS
}

fn field<'a>(input: &'a Value, name: &str) -> anyhow::Result<&'a str> {
    input.get(name).and_then(Value::as_str).ok_or_else(|| anyhow::anyhow!("the hook input has no `{name}` string"))
}

fn open_memory(home: &Home) -> anyhow::Result<Arc<MemoryDb>> {
    Ok(Arc::new(home.open_memory()?))
}

fn builder(
    home: &Home,
    memory: Option<Arc<MemoryDb>>,
    record_usage: bool,
) -> anyhow::Result<cairn_context::ContextBuilder> {
    let files =
        if home.dir().join(cairn_memory_core::MEMORY_DIR).is_dir() { Some(Arc::new(home.open_files()?)) } else { None };
    let skills = Arc::new(home.skills(&SkillSources { record_usage, ..SkillSources::default() }));
    let (hooks, warnings) = home.config_hooks()?;
    for warning in warnings {
        tracing::warn!("{warning}");
    }
    Ok(home.context_builder(ContextParts { memory, files, skills: Some(skills), hooks: Some(Arc::new(hooks)) }))
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

fn claude_fits(text: &str) -> bool {
    text.chars().count() <= CLAUDE_CODE_OUTPUT_CHARS
}

fn kiro_fits(text: &str) -> bool {
    text.len() <= KIRO_OUTPUT_BYTES
}

fn claude_context(event: &str, text: String) -> Option<String> {
    if text.trim().is_empty() {
        return None;
    }
    Some(json!({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}).to_string())
}

fn session_key(host: HostName, session_id: &str) -> String {
    format!("{}:{session_id}", host.key())
}

fn append(memory: &MemoryDb, host: HostName, input: &Value, message: TranscriptMessage) -> anyhow::Result<()> {
    let session = field(input, "session_id")?;
    if message.content.trim().is_empty() && message.tool_calls.is_empty() {
        return Ok(());
    }
    memory.append_transcript(&session_key(host, session), &[message])?;
    Ok(())
}

fn session_context(
    home: &Home,
    agent: Option<&AgentContext>,
    query: &str,
    fits: impl Fn(&str) -> bool,
) -> anyhow::Result<String> {
    let memory = open_memory(home).ok();
    let built =
        builder(home, memory, false)?.build_session_context(&SessionRequest { query, agent, ..Default::default() });
    Ok(clamp(&built, fits))
}

/// The per-message context, or the auto-reply a config hook answered with.
enum MessageAnswer {
    Context(String),
    AutoReply(String),
}

fn message_context(
    home: &Home,
    agent: Option<&AgentContext>,
    prompt: &str,
    fits: impl Fn(&str) -> bool,
) -> anyhow::Result<MessageAnswer> {
    let memory = open_memory(home).ok();
    let built =
        builder(home, memory, true)?.build_message(&MessageRequest { message: prompt, agent, ..Default::default() });
    if let Some(reply) = built.auto_reply {
        return Ok(MessageAnswer::AutoReply(reply.reply));
    }
    Ok(MessageAnswer::Context(clamp(&built, fits)))
}

fn claude_session_start(home: &Home, agent: Option<&AgentContext>, input: &Value) -> anyhow::Result<Option<String>> {
    let query = input.get("cwd").and_then(Value::as_str).unwrap_or("");
    Ok(claude_context("SessionStart", session_context(home, agent, query, claude_fits)?))
}

fn claude_prompt(home: &Home, agent: Option<&AgentContext>, input: &Value) -> anyhow::Result<Option<String>> {
    let prompt = field(input, "prompt")?;
    let answer = message_context(home, agent, prompt, claude_fits)?;
    if let Ok(memory) = open_memory(home)
        && let Err(error) = append(&memory, HostName::ClaudeCode, input, TranscriptMessage::new("user", prompt))
    {
        tracing::warn!(error = %format!("{error:#}"), "the prompt was not recorded in the transcript");
    }
    Ok(match answer {
        MessageAnswer::Context(text) => claude_context("UserPromptSubmit", text),
        MessageAnswer::AutoReply(reply) => {
            let reply: String = reply.chars().take(CLAUDE_CODE_OUTPUT_CHARS).collect();
            Some(json!({"decision": "block", "reason": reply}).to_string())
        }
    })
}

fn cut_chars(text: &str, max: usize) -> String {
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

fn claude_tool(home: &Home, input: &Value) -> anyhow::Result<Option<String>> {
    let (text, call) = tool_call(input)?;
    let message = TranscriptMessage::new("assistant", text).with_tool_calls(vec![call]);
    append(&*open_memory(home)?, HostName::ClaudeCode, input, message)?;
    Ok(None)
}

/// The text of the newest assistant entry of a Claude Code transcript
/// (JSONL, one entry per line).
fn last_assistant_text(home: &Home, path: &str) -> Option<String> {
    let path = std::path::Path::new(path);
    let text = home.sensitive().read_to_string_bounded(path, MAX_TRANSCRIPT_BYTES).ok()?;
    text.lines().rev().find_map(|line| {
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
    })
}

fn claude_stop(home: &Home, input: &Value) -> anyhow::Result<Option<String>> {
    let text = match input.get("last_assistant_message").and_then(Value::as_str) {
        Some(text) => Some(text.to_owned()),
        None => input.get("transcript_path").and_then(Value::as_str).and_then(|path| last_assistant_text(home, path)),
    };
    let Some(text) = text else { return Ok(None) };
    append(&*open_memory(home)?, HostName::ClaudeCode, input, TranscriptMessage::new("assistant", text))?;
    Ok(None)
}

fn claude_end(home: &Home, input: &Value) -> anyhow::Result<Option<String>> {
    let reason = input.get("reason").and_then(Value::as_str).unwrap_or("other");
    let message = TranscriptMessage::new("system", format!("[session ended: {reason}]"));
    append(&*open_memory(home)?, HostName::ClaudeCode, input, message)?;
    Ok(None)
}

fn kiro_spawn(home: &Home, agent: Option<&AgentContext>, input: &Value) -> anyhow::Result<Option<String>> {
    let query = input.get("cwd").and_then(Value::as_str).unwrap_or("");
    let text = session_context(home, agent, query, kiro_fits)?;
    Ok((!text.trim().is_empty()).then_some(text))
}

/// kiro-cli's transcript key: the event's session, else its working directory.
fn kiro_session(input: &Value) -> anyhow::Result<String> {
    let session = input.get("session_id").and_then(Value::as_str).filter(|id| !id.trim().is_empty());
    let session = match session {
        Some(session) => session,
        None => field(input, "cwd")?,
    };
    Ok(format!("{}:{}", HostName::KiroCli.key(), cut_chars(session, 200)))
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

fn kiro_tool(home: &Home, input: &Value) -> anyhow::Result<Option<String>> {
    let (text, call) = tool_call(input)?;
    let message = TranscriptMessage::new("assistant", text).with_tool_calls(vec![call]);
    open_memory(home)?.append_transcript(&kiro_session(input)?, &[message])?;
    Ok(None)
}

fn kiro_prompt(home: &Home, agent: Option<&AgentContext>, input: &Value) -> anyhow::Result<Option<String>> {
    let prompt = field(input, "prompt")?;
    if !prompt.trim().is_empty()
        && let Ok(memory) = open_memory(home)
        && let Err(error) = kiro_session(input)
            .and_then(|key| Ok(memory.append_transcript(&key, &[TranscriptMessage::new("user", prompt)])?))
    {
        tracing::warn!(error = %format!("{error:#}"), "the prompt was not recorded in the transcript");
    }
    Ok(match message_context(home, agent, prompt, kiro_fits)? {
        MessageAnswer::Context(text) => (!text.trim().is_empty()).then_some(text),
        // kiro-cli has no blocking answer on userPromptSubmit: the reply is context.
        MessageAnswer::AutoReply(reply) => Some(cut_chars(&reply, KIRO_OUTPUT_BYTES / 4)),
    })
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
