//! Running hook commands with hard limits.
//!
//! A hook gets the event as JSON on stdin, runs in its own process group
//! and is killed with that whole group when its timeout passes (and its
//! leftovers are killed once it exits, including descendants that left
//! the group: see [`crate::reap`]). Both pipes are drained while it
//! runs; only the first `cap + lookahead` bytes are kept, so a hook that
//! prints gigabytes costs a few kilobytes. What is kept is redacted with
//! `cairn-guard` and then cut at the cap with a truncation marker.
//!
//! Semantics: exit 0 passes, and stdout becomes context on `agentSpawn` and
//! `userPromptSubmit`; exit 2 on `preToolUse` blocks with stderr as the
//! reason; any other exit, a timeout or a failure to start warns and lets
//! the action go on, unless the hook is `fail_closed`, which blocks the
//! tool call instead.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Map, Value};
use wait_timeout::ChildExt;

use crate::reap::{self, RUN_MARK_ENV, RunMark};

use crate::constants::{
    DEFAULT_TIMEOUT, MAX_OUTPUT_SIZE, MAX_TIMEOUT_MS, PIPE_DRAIN_GRACE, READ_CHUNK, REDACTION_LOOKAHEAD,
    TRUNCATION_MARKER, USER_PROMPT_ENV_MAX_CHARS,
};
use crate::error::Result;
use crate::event::HookEvent;
use crate::matcher::{ToolMatcher, ToolName};
use crate::merge::{HookEntry, HookSet};

/// Limits that apply to hooks whose entries set none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunnerOptions {
    /// Timeout of a hook without `timeout_ms`.
    pub default_timeout: Duration,
    /// Output cap per stream of a hook without `max_output_size`
    /// (never above [`MAX_OUTPUT_SIZE`]).
    pub max_output_size: usize,
}

impl Default for RunnerOptions {
    fn default() -> Self {
        RunnerOptions { default_timeout: DEFAULT_TIMEOUT, max_output_size: MAX_OUTPUT_SIZE }
    }
}

/// The event a hook is told about.
#[derive(Debug, Clone, PartialEq)]
pub struct HookInput {
    /// Which event fired.
    pub event: HookEvent,
    /// The tool being called (tool events).
    pub tool_name: Option<String>,
    /// The tool's input (tool events).
    pub tool_input: Option<Value>,
    /// The tool's result (`postToolUse`).
    pub tool_response: Option<Value>,
    /// The user's prompt (`userPromptSubmit`).
    pub prompt: Option<String>,
    /// The agent's last answer (`stop`).
    pub assistant_response: Option<String>,
    /// Working directory of the session; the hook runs there.
    pub cwd: PathBuf,
    /// The session's id.
    pub session_id: Option<String>,
}

impl HookInput {
    /// An event with nothing but its name and working directory.
    pub fn new(event: HookEvent, cwd: impl Into<PathBuf>) -> Self {
        HookInput {
            event,
            tool_name: None,
            tool_input: None,
            tool_response: None,
            prompt: None,
            assistant_response: None,
            cwd: cwd.into(),
            session_id: None,
        }
    }

    /// A tool event for `tool_name` with `tool_input`.
    pub fn tool(event: HookEvent, cwd: impl Into<PathBuf>, tool_name: impl Into<String>, tool_input: Value) -> Self {
        HookInput { tool_name: Some(tool_name.into()), tool_input: Some(tool_input), ..HookInput::new(event, cwd) }
    }

    /// The JSON written to a hook's stdin (kiro-cli's field names).
    pub fn payload(&self) -> Value {
        let mut payload = Map::new();
        payload.insert("hook_event_name".to_owned(), Value::from(self.event.as_str()));
        payload.insert("cwd".to_owned(), Value::from(self.cwd.to_string_lossy().into_owned()));
        let mut put = |key: &str, value: Option<Value>| {
            if let Some(value) = value {
                payload.insert(key.to_owned(), value);
            }
        };
        put("session_id", self.session_id.clone().map(Value::from));
        put("tool_name", self.tool_name.clone().map(Value::from));
        put("tool_input", self.tool_input.clone());
        put("tool_response", self.tool_response.clone());
        put("prompt", self.prompt.clone().map(Value::from));
        put("assistant_response", self.assistant_response.clone().map(Value::from));
        Value::Object(payload)
    }
}

/// One stream of a hook, redacted and capped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CapturedOutput {
    /// The kept text, credentials redacted, cut at the cap.
    pub text: String,
    /// True when the stream was longer than the cap.
    pub truncated: bool,
    /// True when redaction changed something.
    pub redacted: bool,
    /// How many bytes the hook wrote to the stream.
    pub bytes_written: u64,
}

/// How one hook run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HookOutcome {
    /// Exit 0.
    Passed,
    /// Exit 2 on `preToolUse`: the call is refused.
    Blocked,
    /// Any other exit status (or exit 2 on an event that cannot block).
    Failed {
        /// The exit code, when the hook exited rather than being signalled.
        exit_code: Option<i32>,
    },
    /// The timeout passed; the hook's process group was killed.
    TimedOut {
        /// The timeout that applied, in milliseconds.
        timeout_ms: u64,
    },
    /// The command could not be started.
    SpawnFailed {
        /// Why.
        message: String,
    },
}

/// The result of running one hook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HookRun {
    /// The hook's command.
    pub command: String,
    /// Its matcher, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    /// How it ended.
    pub outcome: HookOutcome,
    /// Whether this run refuses the tool call (exit 2, or a failure of a
    /// `fail_closed` hook, on `preToolUse`).
    pub blocks: bool,
    /// Its stdout.
    pub stdout: CapturedOutput,
    /// Its stderr.
    pub stderr: CapturedOutput,
}

/// Allow or block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The action goes ahead.
    Allow,
    /// The tool call is refused.
    Block,
}

/// What the hooks of one event decided, with every run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventDecision {
    /// The event.
    pub event: HookEvent,
    /// The tool, for tool events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Allow or block.
    pub decision: Verdict,
    /// Why the call was blocked, for the model (screened).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Context texts from passing hooks (screened), in hook order.
    pub context: Vec<String>,
    /// Failures, timeouts and withheld output, for the user or the log.
    pub warnings: Vec<String>,
    /// Every hook that ran, in hook order.
    pub runs: Vec<HookRun>,
}

#[derive(Debug, Clone)]
struct CompiledHook {
    entry: HookEntry,
    matcher: ToolMatcher,
}

/// Fires the hooks of an effective hook set.
#[derive(Debug, Clone)]
pub struct HookRunner {
    hooks: Vec<(HookEvent, CompiledHook)>,
    options: RunnerOptions,
}

impl HookRunner {
    /// Compiles the matchers of `hooks`.
    pub fn new(hooks: &HookSet, options: RunnerOptions) -> Result<Self> {
        let mut compiled = Vec::new();
        for (event, entries) in hooks.iter() {
            for entry in entries {
                let matcher = ToolMatcher::parse_optional(entry.matcher.as_deref())?;
                compiled.push((event, CompiledHook { entry: entry.clone(), matcher }));
            }
        }
        Ok(HookRunner { hooks: compiled, options })
    }

    /// The hooks that fire for `event` on `tool`, in order. Matchers apply
    /// to tool events only; a tool event without a tool name fires only
    /// hooks that cover every tool.
    pub fn matching(&self, event: HookEvent, tool: Option<&str>) -> Vec<&HookEntry> {
        let tool = tool.map(ToolName::parse);
        self.hooks
            .iter()
            .filter(|(hook_event, _)| *hook_event == event)
            .filter(|(_, hook)| {
                if !event.uses_matcher() {
                    return true;
                }
                match &tool {
                    Some(tool) => hook.matcher.matches(tool),
                    None => hook.matcher.source().is_none_or(|source| source == "*"),
                }
            })
            .map(|(_, hook)| &hook.entry)
            .collect()
    }

    /// Runs every matching hook of `input.event` (in parallel) and combines
    /// their results: any blocking run blocks; context is kept in hook order.
    pub fn fire(&self, input: &HookInput) -> EventDecision {
        let _span =
            tracing::debug_span!("fire_hooks", event = %input.event, tool = input.tool_name.as_deref()).entered();
        let hooks = self.matching(input.event, input.tool_name.as_deref());
        let runs: Vec<HookRun> = std::thread::scope(|scope| {
            let handles: Vec<_> =
                hooks.iter().map(|entry| scope.spawn(|| run_hook(entry, input, &self.options))).collect();
            handles
                .into_iter()
                .zip(&hooks)
                .map(|(handle, entry)| {
                    handle.join().unwrap_or_else(|_| HookRun {
                        command: entry.command.clone(),
                        matcher: entry.matcher.clone(),
                        outcome: HookOutcome::SpawnFailed { message: "hook runner thread panicked".to_owned() },
                        blocks: entry.fail_closed && input.event.can_block(),
                        stdout: CapturedOutput::default(),
                        stderr: CapturedOutput::default(),
                    })
                })
                .collect()
        });
        combine(input, runs)
    }
}

fn combine(input: &HookInput, runs: Vec<HookRun>) -> EventDecision {
    let mut decision = EventDecision {
        event: input.event,
        tool: input.tool_name.clone(),
        decision: Verdict::Allow,
        reason: None,
        context: Vec::new(),
        warnings: Vec::new(),
        runs: Vec::new(),
    };
    for run in &runs {
        match &run.outcome {
            HookOutcome::Passed => {
                let text = run.stdout.text.trim();
                if input.event.stdout_is_context() && !text.is_empty() {
                    match cairn_guard::screen(text) {
                        Some(finding) => decision.warnings.push(format!(
                            "output of hook {} withheld from context: it reads like injected instructions ({})",
                            run.command, finding.rule
                        )),
                        None => decision.context.push(text.to_owned()),
                    }
                }
            }
            HookOutcome::Blocked => {}
            HookOutcome::Failed { exit_code } => decision.warnings.push(format!(
                "hook {} failed ({}){}",
                run.command,
                exit_code.map_or_else(|| "killed by a signal".to_owned(), |code| format!("exit {code}")),
                stderr_excerpt(&run.stderr)
            )),
            HookOutcome::TimedOut { timeout_ms } => {
                decision.warnings.push(format!("hook {} timed out after {timeout_ms} ms and was killed", run.command));
            }
            HookOutcome::SpawnFailed { message } => {
                decision.warnings.push(format!("hook {} could not start: {message}", run.command));
            }
        }
        if run.blocks && decision.decision == Verdict::Allow {
            decision.decision = Verdict::Block;
            decision.reason = Some(block_reason(run));
        }
    }
    tracing::debug!(decision = ?decision.decision, runs = runs.len(), warnings = decision.warnings.len(), "hooks fired");
    decision.runs = runs;
    decision
}

fn stderr_excerpt(stderr: &CapturedOutput) -> String {
    let text = stderr.text.trim();
    if text.is_empty() {
        return String::new();
    }
    let excerpt: String = text.chars().take(300).collect();
    format!(": {excerpt}")
}

/// The reason shown to the model: the hook's stderr, unless it is empty
/// or reads like injected instructions.
fn block_reason(run: &HookRun) -> String {
    let stderr = run.stderr.text.trim();
    match &run.outcome {
        HookOutcome::Blocked if stderr.is_empty() => format!("blocked by hook {} (no reason given)", run.command),
        HookOutcome::Blocked => match cairn_guard::screen(stderr) {
            Some(finding) => format!(
                "blocked by hook {} (its reason was withheld: it reads like injected instructions, {})",
                run.command, finding.rule
            ),
            None => stderr.to_owned(),
        },
        HookOutcome::TimedOut { timeout_ms } => {
            format!("blocked: fail-closed hook {} timed out after {timeout_ms} ms", run.command)
        }
        HookOutcome::Failed { exit_code } => format!(
            "blocked: fail-closed hook {} failed ({})",
            run.command,
            exit_code.map_or_else(|| "killed by a signal".to_owned(), |code| format!("exit {code}"))
        ),
        HookOutcome::SpawnFailed { message } => {
            format!("blocked: fail-closed hook {} could not start: {message}", run.command)
        }
        HookOutcome::Passed => format!("blocked by hook {}", run.command),
    }
}

/// Runs one hook to completion (or its timeout) and classifies the result.
pub fn run_hook(entry: &HookEntry, input: &HookInput, options: &RunnerOptions) -> HookRun {
    let _span = tracing::debug_span!("run_hook", command = %entry.command, event = %input.event).entered();
    let timeout = entry.timeout_ms.map_or(options.default_timeout, |ms| Duration::from_millis(ms.min(MAX_TIMEOUT_MS)));
    let cap =
        entry.max_output_size.unwrap_or(options.max_output_size).min(options.max_output_size).min(MAX_OUTPUT_SIZE);
    let started = Instant::now();
    let raw = execute(&entry.command, input, timeout, cap + REDACTION_LOOKAHEAD);
    let stdout = finish_stream(raw.stdout, cap);
    let stderr = finish_stream(raw.stderr, cap);
    tracing::trace!(stdout = %stdout.text, stderr = %stderr.text, "hook output");
    let outcome = match raw.status {
        Err(message) => HookOutcome::SpawnFailed { message },
        Ok(None) => HookOutcome::TimedOut { timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX) },
        Ok(Some(status)) if status.success() => HookOutcome::Passed,
        Ok(Some(status)) if status.code() == Some(2) && input.event.can_block() => HookOutcome::Blocked,
        Ok(Some(status)) => HookOutcome::Failed { exit_code: status.code() },
    };
    let blocks = match outcome {
        HookOutcome::Blocked => true,
        HookOutcome::Passed => false,
        _ => entry.fail_closed && input.event.can_block(),
    };
    tracing::debug!(
        outcome = ?outcome,
        blocks,
        stdout_bytes = stdout.bytes_written,
        stderr_bytes = stderr.bytes_written,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "hook finished"
    );
    HookRun { command: entry.command.clone(), matcher: entry.matcher.clone(), outcome, blocks, stdout, stderr }
}

/// What the child left behind, before redaction.
struct RawRun {
    /// `Err` when it could not start, `Ok(None)` on timeout.
    status: std::result::Result<Option<ExitStatus>, String>,
    stdout: Capture,
    stderr: Capture,
}

/// The first bytes of a stream and how many there were in all.
#[derive(Debug, Default)]
struct Capture {
    kept: Vec<u8>,
    total: u64,
}

fn execute(command: &str, input: &HookInput, timeout: Duration, keep: usize) -> RawRun {
    let failed =
        |message: String| RawRun { status: Err(message), stdout: Capture::default(), stderr: Capture::default() };
    let mut process = if command.contains(char::is_whitespace) {
        let mut shell = Command::new("sh");
        shell.arg("-c").arg(command);
        shell
    } else {
        Command::new(command)
    };
    process.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    if input.cwd.is_dir() {
        process.current_dir(&input.cwd);
    }
    if let Some(prompt) = &input.prompt {
        let clean: String =
            prompt.chars().filter(|c| !c.is_control() || *c == '\n').take(USER_PROMPT_ENV_MAX_CHARS).collect();
        process.env("USER_PROMPT", clean);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // Its own process group, so a timeout kills everything it started.
        process.process_group(0);
    }
    // Everything it starts inherits the mark, even outside the group.
    let mark = RunMark::new();
    process.env(RUN_MARK_ENV, mark.value());
    reap::become_subreaper();
    let mut child = match process.spawn() {
        Ok(child) => child,
        Err(error) => return failed(error.to_string()),
    };
    let payload = serde_json::to_vec(&input.payload()).unwrap_or_default();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let stdout = Arc::new(Mutex::new(Capture::default()));
    let stderr = Arc::new(Mutex::new(Capture::default()));
    if let Some(mut stdin) = child.stdin.take() {
        // A hook need not read its input; a full pipe or EPIPE is its business.
        std::thread::spawn(move || {
            let _ = stdin.write_all(&payload);
        });
    }
    let mut readers = 0;
    if let Some(pipe) = child.stdout.take() {
        spawn_drain(pipe, Arc::clone(&stdout), keep, done_tx.clone());
        readers += 1;
    }
    if let Some(pipe) = child.stderr.take() {
        spawn_drain(pipe, Arc::clone(&stderr), keep, done_tx.clone());
        readers += 1;
    }
    drop(done_tx);
    let status = match child.wait_timeout(timeout) {
        Ok(Some(status)) => {
            // The leader is done; whatever it left running goes too.
            kill_group(&child);
            reap::kill_marked(&mark);
            Ok(Some(status))
        }
        Ok(None) => {
            tracing::debug!(timeout_ms = timeout.as_millis() as u64, "hook timed out; killing its process group");
            kill_group(&child);
            let _ = child.kill();
            // Reap the leader so no zombie is left behind.
            let _ = child.wait();
            reap::kill_marked(&mark);
            Ok(None)
        }
        Err(error) => {
            kill_group(&child);
            let _ = child.kill();
            let _ = child.wait();
            reap::kill_marked(&mark);
            Err(error.to_string())
        }
    };
    // The pipes close when the last holder dies; a descendant that left the
    // group could hold them open, so wait only a short grace for them.
    let deadline = Instant::now() + PIPE_DRAIN_GRACE;
    for _ in 0..readers {
        let left = deadline.saturating_duration_since(Instant::now());
        if done_rx.recv_timeout(left).is_err() {
            tracing::debug!("a hook pipe stayed open after its process group ended; keeping what was read");
            break;
        }
    }
    let take =
        |capture: &Arc<Mutex<Capture>>| std::mem::take(&mut *capture.lock().unwrap_or_else(PoisonError::into_inner));
    RawRun { status, stdout: take(&stdout), stderr: take(&stderr) }
}

fn spawn_drain(
    mut pipe: impl Read + Send + 'static,
    capture: Arc<Mutex<Capture>>,
    keep: usize,
    done: mpsc::Sender<()>,
) {
    std::thread::spawn(move || {
        let mut buffer = vec![0u8; READ_CHUNK];
        loop {
            match pipe.read(&mut buffer) {
                Ok(0) => break,
                Ok(read) => {
                    let mut capture = capture.lock().unwrap_or_else(PoisonError::into_inner);
                    let room = keep.saturating_sub(capture.kept.len());
                    let take = room.min(read);
                    capture.kept.extend_from_slice(&buffer[..take]);
                    capture.total += read as u64;
                }
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = done.send(());
    });
}

#[cfg(unix)]
fn kill_group(child: &Child) {
    let group = rustix::process::Pid::from_child(child);
    // ESRCH (nothing left in the group) is the normal case after an exit.
    let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
}

#[cfg(not(unix))]
fn kill_group(child: &Child) {
    let _ = child;
}

/// Redacts the kept bytes, then cuts them at `cap` UTF-8 bytes.
fn finish_stream(capture: Capture, cap: usize) -> CapturedOutput {
    let mut kept = capture.kept;
    let cut_while_reading = capture.total > kept.len() as u64;
    if cut_while_reading {
        // The last token may be the front half of a secret the redactor
        // would not recognise; drop it.
        if let Some(end) = kept.iter().rposition(u8::is_ascii_whitespace) {
            kept.truncate(end + 1);
        }
    }
    let text = String::from_utf8_lossy(&kept);
    // A hook may echo the prompt it was given: its `<private>` spans are
    // withheld like a credential.
    let unmarked = cairn_guard::strip_private(&text);
    let redacted = cairn_guard::redact_all(&unmarked);
    let was_redacted = redacted != text;
    let mut output = redacted.into_owned();
    let truncated = cut_while_reading || output.len() > cap;
    if output.len() > cap {
        output.truncate(output.floor_char_boundary(cap));
    }
    if truncated {
        output.push_str(TRUNCATION_MARKER);
    }
    CapturedOutput { text: output, truncated, redacted: was_redacted, bytes_written: capture.total }
}
