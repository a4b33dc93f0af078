//! `cairn hook <host> <event>`: lifecycle hooks for agent hosts, a thin
//! client of the home's gateway (see [`crate::host`] for the protocol,
//! the fallback and the deadlines).
//!
//! - **Claude Code** (`settings.json` `hooks`): `SessionStart` and
//!   `UserPromptSubmit` answer context as `hookSpecificOutput.additionalContext`
//!   (capped at Claude Code's 10,000 characters and `context.max_inject_chars`);
//!   `PreToolUse` answers `permissionDecision` `deny` / `allow` when
//!   `hooks.auto_deny_tools` / `auto_approve_tools` match the tool;
//!   `UserPromptSubmit`, `PostToolUse`, `Stop` and `SessionEnd` append to
//!   the session's transcript (`claude-code:<session_id>`), which the
//!   gateway consolidates.
//! - **kiro-cli** (agent `hooks`): `agentSpawn` and `userPromptSubmit` print
//!   the context on stdout (capped at kiro-cli's 10 KiB), scoped to the agent
//!   named by `--agent`; `preToolUse` exits 2 with the reason on stderr when
//!   `hooks.auto_deny_tools` matches (kiro-cli then refuses the call and tells
//!   the model why); `userPromptSubmit`, `postToolUse` and `stop` append the
//!   prompt, the tool call and the reply to the transcript
//!   `kiro-cli:<session_id>`, or `kiro-cli:<cwd>` when the event names no session.
//!
//! A broken hook never blocks the user's prompt: bad or unknown input
//! exits 0 with no context and one line on stderr. The blocking answers are
//! a tool decision and Claude Code's `UserPromptSubmit` `decision: "block"`,
//! given when a configured hook auto-reply answers the message.

use std::io::Read as _;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::home::Home;
use crate::host::client::{self, CallError, Gateway};
use crate::host::engine;
use crate::host::local::LocalBackend;
use crate::host::{EventKind, HookAnswer, HostName};

/// Most hook input read from stdin.
const MAX_INPUT_BYTES: usize = 4 * 1024 * 1024;
/// Kept back from the deadline for this process's own start and exit, so
/// the whole process, as the host times it, ends within the deadline.
const PROCESS_RESERVE: Duration = Duration::from_millis(20);
/// How long past its deadline a hook with no gateway waits for its
/// transcript append (the host waits too; losing the message is worse).
const RECORD_GRACE: Duration = Duration::from_secs(10);

/// `cairn hook <host> <event>`
#[derive(Debug, clap::Args)]
pub(crate) struct HookArgs {
    /// The host whose protocol to speak.
    #[arg(value_enum)]
    pub(crate) host: HostName,
    /// The host's event name (Claude Code: `SessionStart`, `UserPromptSubmit`, `PreToolUse`,
    /// `PostToolUse`, `Stop`, `SessionEnd`; kiro-cli: `agentSpawn`, `userPromptSubmit`,
    /// `preToolUse`, `postToolUse`, `stop`).
    pub(crate) event: String,
    /// The agent the host runs (kiro-cli's hook input does not name it):
    /// the context carries only its mapped skills, its prompt and
    /// steering, and a custom agent's messages trigger no skills.
    #[arg(long, value_name = "NAME")]
    pub(crate) agent: Option<String>,
}

pub(crate) fn run(home: &Home, args: &HookArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let input = match read_input() {
        Ok(input) => input,
        Err(reason) => return Ok(HookAnswer::skip(reason).emit()),
    };
    let Some(kind) = EventKind::of(args.host, &args.event) else {
        return Ok(HookAnswer::skip(format!("{} has no Cairn hook for event {:?}", args.host.key(), args.event)).emit());
    };
    let deadline = kind.deadline(home.settings());
    let budget = deadline.saturating_sub(PROCESS_RESERVE);
    let left = || budget.saturating_sub(started.elapsed());
    // `CAIRN_PRIVATE_SESSION` is this process's environment, which the
    // gateway does not see: the request says so (only when it is off, so
    // a request is the same as before for a recorded session).
    let record = home.settings().record_sessions;
    let mut request = json!({"agent": args.agent, "input": input});
    if !record {
        request["record"] = json!(false);
    }
    let body = serde_json::to_vec(&request).expect("JSON values serialise");
    let path = format!("/api/hooks/{}/{}", args.host.key(), args.event);
    if let Some(gateway) = Gateway::find(home.dir()) {
        match within(left(), move |left| gateway.post(&path, &body, left)) {
            Ok(bytes) => match serde_json::from_slice::<HookAnswer>(&bytes) {
                Ok(answer) => return Ok(answer.emit()),
                Err(error) => tracing::warn!(%error, "the gateway's hook answer did not parse; answering here"),
            },
            Err(CallError::Timeout(_)) => {
                let deadline = deadline.as_millis();
                let why = format!("the gateway did not answer within the {deadline} ms deadline; no answer this time");
                return Ok(HookAnswer::skip(why).emit());
            }
            Err(CallError::Absent) => {}
            Err(error) => tracing::warn!(%error, "the gateway did not answer the hook; answering here"),
        }
    }
    if let Err(error) = client::autostart(home) {
        tracing::warn!(error = %format!("{error:#}"), "could not start the home's gateway");
    }
    Ok(fallback(home, args, input, left()).emit())
}

/// Runs `call` on a thread of its own and waits for it at most `left`: the
/// deadline holds whatever the HTTP client's own timers do (the call gets
/// `left` as its timeout too, and is abandoned with the process when it
/// is late).
fn within(
    left: Duration,
    call: impl FnOnce(Duration) -> Result<Vec<u8>, CallError> + Send + 'static,
) -> Result<Vec<u8>, CallError> {
    let (sender, receiver) = std::sync::mpsc::sync_channel(1);
    let spawned = std::thread::Builder::new().name("cairn-hook-call".to_owned()).spawn(move || {
        let _ = sender.send(call(left));
    });
    if let Err(error) = spawned {
        return Err(CallError::Transport(format!("cannot start the call's thread: {error}")));
    }
    receiver.recv_timeout(left).unwrap_or(Err(CallError::Timeout(left)))
}

/// The hook input: one JSON object of at most [`MAX_INPUT_BYTES`].
fn read_input() -> Result<Value, String> {
    let mut raw = Vec::new();
    let limit = u64::try_from(MAX_INPUT_BYTES).unwrap_or(u64::MAX) + 1;
    std::io::stdin()
        .take(limit)
        .read_to_end(&mut raw)
        .map_err(|error| format!("cannot read the hook input: {error}"))?;
    if raw.len() > MAX_INPUT_BYTES {
        return Err(format!("the hook input is over {MAX_INPUT_BYTES} bytes; it was not read"));
    }
    match serde_json::from_slice(&raw) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err("the hook input is not a JSON object".to_owned()),
        Err(error) => Err(format!("the hook input is not JSON: {error}")),
    }
}

/// Answers in this process, without the model, within `left`; nothing
/// (exit 0) when that takes longer. An event that appends to a transcript
/// waits for its append past the deadline (up to [`RECORD_GRACE`]): a
/// slow store makes a hook late rather than lose what it records.
fn fallback(home: &Home, args: &HookArgs, input: Value, left: Duration) -> HookAnswer {
    let (sender, receiver) = std::sync::mpsc::sync_channel(1);
    let (recorded_tx, recorded) = std::sync::mpsc::channel();
    let home = home.clone();
    let (host, event, agent) = (args.host, args.event.clone(), args.agent.clone());
    let record = home.settings().record_sessions;
    let records = record && EventKind::records(host, &event);
    let spawned = std::thread::Builder::new().name("cairn-hook".to_owned()).spawn(move || {
        let backend = LocalBackend::new(&home).notifying(recorded_tx);
        let answer = engine::answer(&backend, host, &event, agent.as_deref(), &input, record);
        let _ = sender.send(answer);
    });
    if let Err(error) = spawned {
        return HookAnswer::skip(format!("cannot start the hook's worker: {error}"));
    }
    receiver.recv_timeout(left).unwrap_or_else(|_| {
        // Returns at the append, or at once when the worker ended without one.
        if records && recorded.recv_timeout(RECORD_GRACE).is_err() {
            tracing::warn!("the hook's transcript message was not appended within {RECORD_GRACE:?}");
        }
        HookAnswer::skip(format!(
            "no gateway answered and memory could not be read within {} ms; no context this time",
            left.as_millis()
        ))
    })
}
