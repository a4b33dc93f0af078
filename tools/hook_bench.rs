//! Latency of `cairn hook` (Claude Code and kiro-cli) as thin clients of
//! the home's gateway, the gateway's own HTTP reads beside them, the
//! no-gateway fallback and a hung gateway against the hook deadlines, and
//! the resident memory of the gateway with four `cairn mcp serve` sessions.
//!
//! ```text
//! cargo build --release -p cairn-gateway-bin -p cairn-tools --bin cairn --bin hook_bench
//! target/release/hook_bench --cairn target/release/cairn --rows 10000 --rounds 200
//! ```
//!
//! 1. A fresh temp home: `--rows` synthetic conversation turns from a
//!    seeded generator (`cairn memory import-episodic`, which embeds them),
//!    a `config.json` with `hooks.auto_deny_tools: ["Bash"]` so the tool
//!    decision runs, then a few facts and lessons through the API.
//! 2. `cairn serve --port 0`, waited for until `embedding-status` says the
//!    model is loaded and no episodic row waits for a vector.
//! 3. Every round measures, in this order: `cairn --version` (a process
//!    start), `GET /api/memory/episodic/search` and
//!    `GET /api/memory/context-preview` (one keep-alive loopback request
//!    each), then each hook event as a whole `cairn hook` process (spawn,
//!    stdin, wait): Claude Code `SessionStart`, `UserPromptSubmit`,
//!    `PreToolUse` (tool `Bash`: denied), `PostToolUse`, `Stop`; kiro-cli
//!    `agentSpawn`, `userPromptSubmit`, `preToolUse` (`Bash`: exit 2),
//!    `postToolUse`, `stop`. Every text that is embedded (searches,
//!    previews, prompts) is new to the home. Three unmeasured rounds warm up.
//!    A hook answer counts as a failure unless it is the gateway's: a context
//!    answer with the keyword-only notice, any stderr line (the client warns
//!    on stderr whenever it answers on its own while a gateway is recorded),
//!    a wrong exit status or an unexpected stdout.
//! 4. The gateway gets SIGTERM; every hook event runs `--fallback-rounds`
//!    times with `CAIRN_HOST_START_GATEWAY=0` (the in-process keyword-only
//!    fallback), compared with its deadline.
//! 5. A listener in this program that accepts and never answers is written
//!    to `<home>/serve.address`: `UserPromptSubmit` and `PostToolUse` run
//!    `--hung-rounds` times and must give up by their deadline.
//! 6. The gateway again, four concurrent `cairn mcp serve` sessions (rmcp
//!    client over the child's stdio), each initialised and asked one
//!    `memory_search`; then VmRSS of the gateway and each session.
//!
//! The deadlines are the defaults (`host.context_deadline_ms` 2,000 ms for
//! context events, `host.record_deadline_ms` 500 ms for the others); the
//! hook's own clock starts after its process has started, so a whole
//! process is "within" its deadline when its time is at most the deadline
//! plus [`DEADLINE_SLACK_MS`].
//!
//! Options: `--cairn PATH` (default `target/release/cairn`), `--model DIR`
//! (default: the installed all-MiniLM-L6-v2; passed to every cairn process
//! as `CAIRN_EMBED_MODEL_PATH`), `--rows N` (10,000), `--rounds N` (200),
//! `--fallback-rounds N` (default: `--rounds`), `--hung-rounds N` (20),
//! `--json` (only the JSON line on stdout; without it the Markdown table,
//! then the JSON line). Progress goes to stderr.

use std::collections::HashSet;
use std::io::Write as _;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

/// Default `host.context_deadline_ms` (the bench's config.json leaves it).
const CONTEXT_DEADLINE_MS: u64 = 2_000;
/// Default `host.record_deadline_ms`.
const RECORD_DEADLINE_MS: u64 = 500;
/// Process start and exit, which the hook's own deadline clock does not see.
const DEADLINE_SLACK_MS: f64 = 100.0;
/// Unmeasured rounds before the gateway rounds.
const WARMUP_ROUNDS: usize = 3;
/// Concurrent MCP sessions in the memory phase.
const MCP_SESSIONS: usize = 4;
/// The most one MCP session may add to the gateway's resident memory.
const SESSION_RSS_BUDGET_KIB: u64 = 25 * 1024;
/// Episodic rows a home keeps (`EPISODIC_DEFAULT_CAP`).
const EPISODIC_CAP: usize = 10_000;
/// The string the context of a keyword-only answer carries.
const KEYWORD_ONLY: &str = "keyword-only";

const NAMES: &[&str] = &[
    "Maya", "Tomas", "Priya", "Jonas", "Aiko", "Lena", "Omar", "Grace", "Ravi", "Sofia", "Marek", "Chloe", "Diego",
    "Hana", "Felix", "Ines",
];
const PROJECTS: &[&str] = &[
    "garden planner",
    "invoice service",
    "billing dashboard",
    "travel app",
    "recipe site",
    "home lab",
    "photo archive",
    "budget tracker",
    "podcast feed",
    "school portal",
    "bike shop website",
    "weather station",
    "chess engine",
    "family wiki",
];
const OBJECTS: &[&str] = &[
    "database migration",
    "login page",
    "backup script",
    "release notes",
    "test suite",
    "cache layer",
    "deploy pipeline",
    "search index",
    "API client",
    "config file",
    "error handling",
    "logging setup",
    "docker image",
    "cron job",
    "payment webhook",
    "CSV export",
    "dark theme",
    "onboarding email",
    "rate limiter",
    "print stylesheet",
];
/// (base, past) forms.
const VERBS: &[(&str, &str)] = &[
    ("fix", "fixed"),
    ("rewrite", "rewrote"),
    ("review", "reviewed"),
    ("split", "split"),
    ("benchmark", "benchmarked"),
    ("document", "documented"),
    ("simplify", "simplified"),
    ("upgrade", "upgraded"),
    ("roll back", "rolled back"),
    ("profile", "profiled"),
    ("refactor", "refactored"),
    ("test", "tested"),
    ("ship", "shipped"),
    ("pause", "paused"),
    ("move", "moved"),
];
const PLACES: &[&str] = &[
    "staging",
    "production",
    "the feature branch",
    "the shared drive",
    "the CI runner",
    "the old laptop",
    "the Raspberry Pi",
    "the cloud bucket",
    "the monorepo",
    "the design doc",
];
const TIMES: &[&str] = &[
    "on Monday",
    "last night",
    "this morning",
    "before lunch",
    "after the standup",
    "over the weekend",
    "yesterday afternoon",
    "on Friday",
];
const OUTCOMES: &[&str] = &[
    "it finally passed",
    "it broke the nightly build",
    "latency dropped by half",
    "two customers complained",
    "the logs look clean now",
    "memory use went up",
    "nobody noticed",
    "the numbers still look off",
    "it saves about an hour a week",
    "we lost a day of data",
];
const REASONS: &[&str] = &[
    "the old version leaks file handles",
    "the vendor deprecated it",
    "it is too slow on large inputs",
    "the team cannot read it",
    "security flagged it",
    "it keeps timing out",
    "the spec changed",
    "the tests were flaky",
];
const ADVERBS: &[&str] = &["carefully", "quickly", "incrementally", "behind a flag", "in one go", "after review"];

const FACTS: &[(&str, &str)] = &[
    ("user.name", "Sam"),
    ("pref.editor", "Helix with a dark theme and relative line numbers"),
    ("pref.language", "Rust for services, Python for one-off scripts"),
    ("pref.commit_style", "short imperative subject lines, body wrapped at 72 columns"),
    ("project.garden_planner.stack", "SvelteKit front end over a SQLite database"),
    ("project.invoice_service.deploy", "deployed from the main branch by the CI runner every Friday"),
];
const LESSONS: &[(&str, &str)] = &[
    ("Run database migrations on staging before production", "running them straight on production"),
    ("Never force-push to the main branch", "rewriting shared history"),
    ("Keep pull requests under four hundred changed lines", "one large pull request per feature"),
    ("Write the release notes before tagging a release", "tagging first and writing notes later"),
];

struct Options {
    cairn: PathBuf,
    model: PathBuf,
    rows: usize,
    rounds: usize,
    fallback_rounds: Option<usize>,
    hung_rounds: usize,
    json: bool,
}

fn options() -> anyhow::Result<Options> {
    let installed = dirs::data_dir().map(|dir| dir.join("cairn/models/all-MiniLM-L6-v2"));
    let mut options = Options {
        cairn: PathBuf::from("target/release/cairn"),
        model: installed.unwrap_or_default(),
        rows: EPISODIC_CAP,
        rounds: 200,
        fallback_rounds: None,
        hung_rounds: 20,
        json: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--cairn" => options.cairn = PathBuf::from(value()?),
            "--model" => options.model = PathBuf::from(value()?),
            "--rows" => options.rows = value()?.parse()?,
            "--rounds" => options.rounds = value()?.parse()?,
            "--fallback-rounds" => options.fallback_rounds = Some(value()?.parse()?),
            "--hung-rounds" => options.hung_rounds = value()?.parse()?,
            "--json" => options.json = true,
            other => bail!("unknown option {other}"),
        }
    }
    if options.rows == 0 || options.rows > EPISODIC_CAP {
        bail!("--rows must be 1..={EPISODIC_CAP} (a home keeps {EPISODIC_CAP} episodic rows)");
    }
    if options.rounds == 0 || options.hung_rounds == 0 || options.fallback_rounds == Some(0) {
        bail!("--rounds, --fallback-rounds and --hung-rounds must be at least 1");
    }
    if !options.model.join("config.json").is_file() {
        bail!("no embedding model at {} (run `cairn model fetch` or pass --model DIR)", options.model.display());
    }
    if !options.cairn.is_file() {
        bail!("no cairn binary at {} (pass --cairn PATH)", options.cairn.display());
    }
    Ok(options)
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[(self.next() % items.len() as u64) as usize]
    }

    /// One synthetic conversation turn, as a user or an assistant says it.
    fn turn(&mut self) -> String {
        let (verb, verb_past) = self.pick(VERBS);
        let (other, _) = self.pick(VERBS);
        let (name, project, object, object2) =
            (self.pick(NAMES), self.pick(PROJECTS), self.pick(OBJECTS), self.pick(OBJECTS));
        let (place, time, outcome, reason, adverb) =
            (self.pick(PLACES), self.pick(TIMES), self.pick(OUTCOMES), self.pick(REASONS), self.pick(ADVERBS));
        match self.next() % 6 {
            0 => format!("user: I {verb_past} the {object} for the {project} {time}, and {outcome}."),
            1 => format!("user: Can we {verb} the {object} in {place} {time}? {name} asked because {reason}."),
            2 => format!("user: {name} thinks the {project} {object} should be {verb_past} {adverb}, since {reason}."),
            3 => format!(
                "assistant: I {verb_past} the {object} in {place}; {outcome}, so next I will {other} the {object2}."
            ),
            4 => format!(
                "assistant: The {object} of the {project} was {verb_past} {adverb} {time} because {reason}; {outcome}."
            ),
            _ => format!(
                "assistant: Noted for {name}: {verb} the {object2} before the {object} on the {project}, {adverb}."
            ),
        }
    }

    /// A question a user might ask (no row is a question).
    fn prompt(&mut self) -> String {
        let (verb, _) = self.pick(VERBS);
        let (name, project, object, object2) =
            (self.pick(NAMES), self.pick(PROJECTS), self.pick(OBJECTS), self.pick(OBJECTS));
        let (place, time) = (self.pick(PLACES), self.pick(TIMES));
        match self.next() % 6 {
            0 => format!("What did we decide about the {object} for the {project}?"),
            1 => format!("Remind me why {name} wanted to {verb} the {object} in {place}."),
            2 => format!("How do I {verb} the {object} without breaking the {object2} of the {project}?"),
            3 => format!("Summarize what happened with the {project} {object} {time}."),
            4 => format!("Which {object} problems are still open on the {project}, and who owns the {object2}?"),
            _ => format!("Draft a short note to {name} about the {object} and the {object2} in {place}."),
        }
    }
}

/// `count` distinct prompts, none of them a row.
fn prompts(rng: &mut Rng, count: usize) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut prompts = Vec::with_capacity(count);
    while prompts.len() < count {
        let mut prompt = rng.prompt();
        if seen.contains(&prompt) {
            prompt = format!("{} (ticket {})", prompt.trim_end_matches(['?', '.']), 1_000 + rng.next() % 9_000);
        }
        if seen.insert(prompt.clone()) {
            prompts.push(prompt);
        }
    }
    prompts
}

fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 3);
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|line| line.strip_prefix("VmRSS:")?.trim().strip_suffix("kB")?.trim().parse().ok())
}

/// A cairn command on the bench home, with the model and nothing else
/// from the caller's environment that would change what it does.
fn cairn(options: &Options, home: &Path) -> Command {
    let mut command = Command::new(&options.cairn);
    command
        .arg("--home")
        .arg(home)
        .env("CAIRN_EMBED_MODEL_PATH", &options.model)
        .env("CAIRN_SKIP_MODEL_DOWNLOAD", "1")
        .env("RUST_LOG", "warn")
        .env_remove("CAIRN_HOME")
        .env_remove("CAIRN_EMBED_MODEL_URL")
        .env_remove("CAIRN_HOST_START_GATEWAY")
        .env_remove("CAIRN_LLM_BASE_URL")
        .env_remove("CAIRN_LLM_MODEL")
        .env_remove("CAIRN_LLM_API_KEY")
        .env_remove("CAIRN_STORAGE_URL");
    command
}

struct Gateway {
    child: Child,
    base: String,
    token: String,
    agent: ureq::Agent,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Gateway {
    fn start(options: &Options, home: &Path, import_remaining: u64) -> anyhow::Result<Self> {
        let port_file = home.join("bench.port");
        let _ = std::fs::remove_file(&port_file);
        let log = std::fs::File::create(home.join("bench-serve.log"))?;
        let child = cairn(options, home)
            .args(["serve", "--port", "0", "--port-file"])
            .arg(&port_file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", options.cairn.display()))?;
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        let mut gateway = Self { child, base: String::new(), token: String::new(), agent };
        let started = Instant::now();
        let address = loop {
            if let Ok(text) = std::fs::read_to_string(&port_file)
                && text.ends_with('\n')
            {
                break text.trim().to_owned();
            }
            if let Some(status) = gateway.child.try_wait()? {
                bail!("cairn serve exited: {status} (log: {})", home.join("bench-serve.log").display());
            }
            if started.elapsed() > Duration::from_secs(120) {
                bail!("cairn serve did not start");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        gateway.base = format!("http://{address}");
        gateway.token = std::fs::read_to_string(home.join("server.token"))?.trim().to_owned();
        loop {
            let (_, status) = gateway.get("/api/memory/embedding-status")?;
            let backfill = &status["backfill"];
            let model_ready = status["model_loaded"] == true && status["setup_step"] == "done";
            let backfill_done = backfill["step"] != "running"
                && backfill["remaining"].as_u64() == Some(0)
                && (import_remaining == 0 || backfill["step"] == "done");
            if model_ready && backfill_done {
                break;
            }
            if status["setup_step"] == "error" || backfill["step"] == "failed" {
                bail!("the gateway's model or backfill failed: {status}");
            }
            if started.elapsed() > Duration::from_secs(1_800) {
                bail!("the gateway was not ready after 30 minutes: {status}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(gateway)
    }

    /// `GET path`: the status and the JSON answer.
    fn get(&self, path: &str) -> anyhow::Result<(u16, Value)> {
        let response = self
            .agent
            .get(&format!("{}{path}", self.base))
            .header("Authorization", &format!("Bearer {}", self.token))
            .call()?;
        let status = response.status().as_u16();
        let body = response.into_body().with_config().limit(64 * 1024 * 1024).read_to_string()?;
        Ok((status, serde_json::from_str(&body).unwrap_or(Value::Null)))
    }

    fn send(&self, method: &str, path: &str, body: &Value) -> anyhow::Result<(u16, Value)> {
        let url = format!("{}{path}", self.base);
        let auth = format!("Bearer {}", self.token);
        let response = match method {
            "PUT" => self.agent.put(&url).header("Authorization", &auth).send_json(body)?,
            _ => self.agent.post(&url).header("Authorization", &auth).send_json(body)?,
        };
        let status = response.status().as_u16();
        let body = response.into_body().read_to_string()?;
        Ok((status, serde_json::from_str(&body).unwrap_or(Value::Null)))
    }

    /// SIGTERM, then wait (SIGKILL after 30 s).
    fn stop(mut self) -> anyhow::Result<()> {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status()?;
        let started = Instant::now();
        while self.child.try_wait()?.is_none() {
            if started.elapsed() > Duration::from_secs(30) {
                eprintln!("the gateway ignored SIGTERM for 30 s; killing it");
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }
}

/// What a finished process gave.
struct Outcome {
    millis: f64,
    stdout: String,
    stderr: String,
    exit: Option<i32>,
}

fn run_process(command: &mut Command, stdin: &[u8]) -> anyhow::Result<Outcome> {
    command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = command.spawn()?;
    // The input is far below a pipe's buffer: written whole before reading.
    child.stdin.take().context("the child's stdin")?.write_all(stdin)?;
    let output = child.wait_with_output()?;
    let millis = started.elapsed().as_secs_f64() * 1e3;
    Ok(Outcome {
        millis,
        stdout: String::from_utf8_lossy(&output.stdout).trim().to_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        exit: output.status.code(),
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Context,
    Decision,
    Record,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    ClaudeSessionStart,
    ClaudePrompt,
    ClaudePreTool,
    ClaudePostTool,
    ClaudeStop,
    KiroSpawn,
    KiroPrompt,
    KiroPreTool,
    KiroPostTool,
    KiroStop,
}

const EVENTS: &[Event] = &[
    Event::ClaudeSessionStart,
    Event::ClaudePrompt,
    Event::ClaudePreTool,
    Event::ClaudePostTool,
    Event::ClaudeStop,
    Event::KiroSpawn,
    Event::KiroPrompt,
    Event::KiroPreTool,
    Event::KiroPostTool,
    Event::KiroStop,
];

/// The texts one round's events carry.
struct RoundInput {
    round: usize,
    prompt: String,
    reply: String,
    project: &'static str,
    tool_text: String,
}

impl Event {
    fn host(self) -> &'static str {
        match self {
            Event::ClaudeSessionStart
            | Event::ClaudePrompt
            | Event::ClaudePreTool
            | Event::ClaudePostTool
            | Event::ClaudeStop => "claude-code",
            _ => "kiro-cli",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Event::ClaudeSessionStart => "SessionStart",
            Event::ClaudePrompt => "UserPromptSubmit",
            Event::ClaudePreTool => "PreToolUse",
            Event::ClaudePostTool => "PostToolUse",
            Event::ClaudeStop => "Stop",
            Event::KiroSpawn => "agentSpawn",
            Event::KiroPrompt => "userPromptSubmit",
            Event::KiroPreTool => "preToolUse",
            Event::KiroPostTool => "postToolUse",
            Event::KiroStop => "stop",
        }
    }

    fn label(self) -> String {
        format!("hook {} {}", self.host(), self.name())
    }

    fn kind(self) -> Kind {
        match self {
            Event::ClaudeSessionStart | Event::ClaudePrompt | Event::KiroSpawn | Event::KiroPrompt => Kind::Context,
            Event::ClaudePreTool | Event::KiroPreTool => Kind::Decision,
            _ => Kind::Record,
        }
    }

    fn deadline_ms(self) -> u64 {
        match self.kind() {
            Kind::Context => CONTEXT_DEADLINE_MS,
            Kind::Decision | Kind::Record => RECORD_DEADLINE_MS,
        }
    }

    /// The host's hook JSON for this event.
    fn input(self, round: &RoundInput) -> Value {
        let cwd = format!("/home/bench/projects/{}", round.project.replace(' ', "-"));
        let claude_session = format!("bench-claude-{}", round.round);
        let kiro_session = format!("bench-kiro-{}", round.round);
        let name = self.name();
        let tool = ["Read", "Edit", "Grep"][round.round % 3];
        match self {
            Event::ClaudeSessionStart => json!({
                "session_id": claude_session, "transcript_path": "", "cwd": cwd,
                "hook_event_name": name, "source": "startup",
            }),
            Event::ClaudePrompt => json!({
                "session_id": claude_session, "cwd": cwd, "hook_event_name": name, "prompt": round.prompt,
            }),
            Event::ClaudePreTool => json!({
                "session_id": claude_session, "cwd": cwd, "hook_event_name": name,
                "tool_name": "Bash", "tool_input": {"command": "cargo test --workspace"},
            }),
            Event::ClaudePostTool => json!({
                "session_id": claude_session, "cwd": cwd, "hook_event_name": name, "tool_name": tool,
                "tool_input": {"file_path": format!("{cwd}/src/main.rs")},
                "tool_response": {"content": round.tool_text},
            }),
            Event::ClaudeStop => json!({
                "session_id": claude_session, "cwd": cwd, "hook_event_name": name,
                "stop_hook_active": false, "last_assistant_message": round.reply,
            }),
            Event::KiroSpawn => json!({"hook_event_name": name, "cwd": cwd, "session_id": kiro_session}),
            Event::KiroPrompt => json!({
                "hook_event_name": name, "cwd": cwd, "session_id": kiro_session, "prompt": round.prompt,
            }),
            Event::KiroPreTool => json!({
                "hook_event_name": name, "cwd": cwd, "session_id": kiro_session,
                "tool_name": "Bash", "tool_input": {"command": "cargo test --workspace"},
            }),
            Event::KiroPostTool => json!({
                "hook_event_name": name, "cwd": cwd, "session_id": kiro_session, "tool_name": "fs_read",
                "tool_input": {"path": format!("{cwd}/README.md")}, "tool_response": {"result": round.tool_text},
            }),
            Event::KiroStop => json!({
                "hook_event_name": name, "cwd": cwd, "session_id": kiro_session, "assistant_response": round.reply,
            }),
        }
    }

    /// Whether a decision answer denied the `Bash` call in this host's protocol.
    fn denied(self, outcome: &Outcome) -> bool {
        match self {
            Event::ClaudePreTool => {
                outcome.exit == Some(0) && outcome.stdout.contains("\"permissionDecision\":\"deny\"")
            }
            _ => outcome.exit == Some(2) && outcome.stderr.contains("denied by Cairn"),
        }
    }

    /// The context text of a context answer.
    fn context(self, outcome: &Outcome) -> String {
        match self.host() {
            "claude-code" => serde_json::from_str::<Value>(&outcome.stdout)
                .ok()
                .and_then(|answer| answer.pointer("/hookSpecificOutput/additionalContext")?.as_str().map(str::to_owned))
                .unwrap_or_default(),
            _ => outcome.stdout.clone(),
        }
    }

    /// `Ok(has context)` when the answer is the gateway's, else why not.
    fn check_gateway(self, outcome: &Outcome) -> Result<bool, String> {
        match self.kind() {
            Kind::Decision if self.denied(outcome) => {
                let extra = if self == Event::KiroPreTool { "" } else { outcome.stderr.as_str() };
                if extra.is_empty() { Ok(false) } else { Err(format!("stderr: {extra}")) }
            }
            Kind::Decision => Err(format!("not denied: exit {:?}, stdout {:?}", outcome.exit, outcome.stdout)),
            _ if outcome.exit != Some(0) => Err(format!("exit {:?}, stderr {:?}", outcome.exit, outcome.stderr)),
            _ if !outcome.stderr.is_empty() => Err(format!("stderr: {}", outcome.stderr)),
            Kind::Context => {
                let context = self.context(outcome);
                if context.contains(KEYWORD_ONLY) {
                    Err("the context is keyword-only".to_owned())
                } else if !outcome.stdout.is_empty() && context.is_empty() {
                    Err(format!("unexpected stdout {:?}", outcome.stdout))
                } else {
                    Ok(!context.trim().is_empty())
                }
            }
            Kind::Record if outcome.stdout.is_empty() => Ok(false),
            Kind::Record => Err(format!("unexpected stdout {:?}", outcome.stdout)),
        }
    }

    /// Without a gateway: `Ok(answered)` (`false`: skipped at the deadline),
    /// else why the answer is wrong.
    fn check_fallback(self, outcome: &Outcome) -> Result<bool, String> {
        let skipped = outcome.exit == Some(0)
            && outcome.stdout.is_empty()
            && outcome.stderr.contains("no gateway answered and memory could not be read");
        if skipped {
            return Ok(false);
        }
        match self.kind() {
            Kind::Decision if self.denied(outcome) => Ok(true),
            Kind::Decision => Err(format!("not denied: exit {:?}, stdout {:?}", outcome.exit, outcome.stdout)),
            _ if outcome.exit != Some(0) => Err(format!("exit {:?}, stderr {:?}", outcome.exit, outcome.stderr)),
            Kind::Context if self.context(outcome).contains(KEYWORD_ONLY) => Ok(true),
            Kind::Context => Err(format!("no keyword-only context: stdout {:?}", outcome.stdout)),
            Kind::Record if outcome.stdout.is_empty() && outcome.stderr.is_empty() => Ok(true),
            Kind::Record => Err(format!("stdout {:?}, stderr {:?}", outcome.stdout, outcome.stderr)),
        }
    }

    /// With a hung gateway: `Ok(())` when the hook gave up on it.
    fn check_hung(self, outcome: &Outcome) -> Result<(), String> {
        if outcome.exit == Some(0) && outcome.stdout.is_empty() && outcome.stderr.contains("did not answer within") {
            Ok(())
        } else {
            Err(format!("exit {:?}, stdout {:?}, stderr {:?}", outcome.exit, outcome.stdout, outcome.stderr))
        }
    }
}

/// One measured item's samples and counts.
struct Item {
    name: String,
    phase: &'static str,
    samples: Vec<f64>,
    failures: u64,
    /// Context answers with text (context events), or answers given
    /// before the deadline (fallback).
    answered: Option<u64>,
    deadline_ms: Option<u64>,
    first_failures: Vec<String>,
}

impl Item {
    fn new(name: impl Into<String>, phase: &'static str, deadline_ms: Option<u64>) -> Self {
        Self {
            name: name.into(),
            phase,
            samples: Vec::new(),
            failures: 0,
            answered: None,
            deadline_ms,
            first_failures: Vec::new(),
        }
    }

    fn fail(&mut self, why: String) {
        self.failures += 1;
        if self.first_failures.len() < 3 {
            eprintln!("  {} ({}): {why}", self.name, self.phase);
            self.first_failures.push(why);
        }
    }

    fn count_answered(&mut self, yes: bool) {
        *self.answered.get_or_insert(0) += u64::from(yes);
    }

    fn sorted(&self) -> Vec<f64> {
        let mut sorted = self.samples.clone();
        sorted.sort_by(f64::total_cmp);
        sorted
    }

    fn stats(&self) -> (f64, f64, f64) {
        let sorted = self.sorted();
        if sorted.is_empty() {
            return (0.0, 0.0, 0.0);
        }
        let at = |q: f64| sorted[((sorted.len() as f64 - 1.0) * q).round() as usize];
        (at(0.50), at(0.95), sorted[sorted.len() - 1])
    }

    fn within_deadline(&self) -> Option<bool> {
        let deadline = self.deadline_ms? as f64;
        Some(self.stats().2 <= deadline + DEADLINE_SLACK_MS)
    }

    fn json(&self) -> Value {
        let (p50, p95, max) = self.stats();
        let round = |ms: f64| (ms * 100.0).round() / 100.0;
        json!({
            "item": self.name, "phase": self.phase, "n": self.samples.len(),
            "p50_ms": round(p50), "p95_ms": round(p95), "max_ms": round(max),
            "failures": self.failures, "answered": self.answered,
            "deadline_ms": self.deadline_ms, "within_deadline": self.within_deadline(),
        })
    }
}

/// Writes the rows, imports them, and returns the import summary.
fn seed(options: &Options, home: &Path, rng: &mut Rng) -> anyhow::Result<Value> {
    let config = json!({"hooks": {"auto_deny_tools": ["Bash"]}});
    std::fs::write(home.join("config.json"), serde_json::to_vec_pretty(&config)?)?;
    let rows = home.join("bench-rows.jsonl");
    let mut text = String::new();
    let mut seen = HashSet::new();
    let mut index = 0usize;
    while seen.len() < options.rows {
        let turn = rng.turn();
        if !seen.insert(turn.clone()) {
            continue;
        }
        let row = json!({
            "text": turn,
            "created_at": 1_700_000_000_000i64 + index as i64 * 90_000,
            "source_ref": format!("bench-conversation-{}", index / 12),
        });
        text.push_str(&row.to_string());
        text.push('\n');
        index += 1;
    }
    std::fs::write(&rows, text)?;
    eprintln!("importing and embedding {} rows ...", options.rows);
    let started = Instant::now();
    let output = cairn(options, home)
        .args(["memory", "import-episodic", "--json"])
        .arg(&rows)
        .stderr(Stdio::inherit())
        .output()?;
    if !output.status.success() {
        bail!("import-episodic failed: {}", output.status);
    }
    let summary: Value = serde_json::from_slice(&output.stdout).context("reading the import summary")?;
    eprintln!("imported in {:.1} s: {summary}", started.elapsed().as_secs_f64());
    Ok(summary)
}

fn add_facts(gateway: &Gateway) -> anyhow::Result<()> {
    for (key, value) in FACTS {
        let (status, answer) = gateway.send("PUT", "/api/memory/semantic", &json!({"key": key, "value": value}))?;
        if status != 200 {
            bail!("writing fact {key}: {status} {answer}");
        }
    }
    for (rule, not) in LESSONS {
        let body = json!({"rule": rule, "not": not, "category": "preference"});
        let (status, answer) = gateway.send("POST", "/api/memory/lessons", &body)?;
        if status != 200 {
            bail!("teaching lesson {rule:?}: {status} {answer}");
        }
    }
    Ok(())
}

fn round_input(rng: &mut Rng, round: usize, prompt: String) -> RoundInput {
    let reply = rng.turn().replacen("assistant: ", "", 1).replacen("user: ", "", 1);
    let tool_text = format!("fn main() {{\n    // {}\n}}", rng.turn());
    RoundInput { round, prompt, reply, project: rng.pick(PROJECTS), tool_text }
}

fn hook(
    options: &Options,
    home: &Path,
    event: Event,
    round: &RoundInput,
    start_gateway: bool,
) -> anyhow::Result<Outcome> {
    let mut command = cairn(options, home);
    command.args(["hook", event.host(), event.name()]);
    if !start_gateway {
        command.env("CAIRN_HOST_START_GATEWAY", "0");
    }
    let input = serde_json::to_vec(&event.input(round))?;
    run_process(&mut command, &input)
}

fn gateway_rounds(
    options: &Options,
    home: &Path,
    gateway: &Gateway,
    rng: &mut Rng,
    prompts: &mut impl Iterator<Item = String>,
) -> anyhow::Result<Vec<Item>> {
    let mut version = Item::new("cairn --version", "gateway", None);
    let mut search = Item::new("GET /api/memory/episodic/search", "gateway", None);
    let mut preview = Item::new("GET /api/memory/context-preview", "gateway", None);
    let mut hooks: Vec<Item> = EVENTS.iter().map(|event| Item::new(event.label(), "gateway", None)).collect();
    for round in 0..WARMUP_ROUNDS + options.rounds {
        let measured = round >= WARMUP_ROUNDS;
        if round == WARMUP_ROUNDS {
            eprintln!("gateway rounds: {}", options.rounds);
        } else if measured && (round - WARMUP_ROUNDS).is_multiple_of(20) {
            eprintln!("  round {} of {}", round - WARMUP_ROUNDS, options.rounds);
        }
        let mut next_prompt = || prompts.next().context("ran out of prompts");

        let outcome = run_process(cairn(options, home).arg("--version"), b"")?;
        if measured {
            version.samples.push(outcome.millis);
            if outcome.exit != Some(0) || !outcome.stdout.starts_with("cairn") {
                version.fail(format!("exit {:?}, stdout {:?}", outcome.exit, outcome.stdout));
            }
        }

        let query = percent_encode(&next_prompt()?);
        let started = Instant::now();
        let (status, answer) = gateway.get(&format!("/api/memory/episodic/search?q={query}&limit=8"))?;
        let millis = started.elapsed().as_secs_f64() * 1e3;
        if measured {
            search.samples.push(millis);
            let hits = answer["results"].as_array().map_or(0, Vec::len);
            search.count_answered(hits > 0);
            if status != 200 {
                search.fail(format!("{status} {answer}"));
            }
        }

        let query = percent_encode(&next_prompt()?);
        let started = Instant::now();
        let (status, answer) = gateway.get(&format!("/api/memory/context-preview?q={query}"))?;
        let millis = started.elapsed().as_secs_f64() * 1e3;
        if measured {
            preview.samples.push(millis);
            if status != 200 {
                preview.fail(format!("{status} {answer}"));
            }
        }

        let claude = round_input(rng, round, next_prompt()?);
        let kiro = round_input(rng, round, next_prompt()?);
        for (event, item) in EVENTS.iter().zip(hooks.iter_mut()) {
            let input = if event.host() == "claude-code" { &claude } else { &kiro };
            let outcome = hook(options, home, *event, input, true)?;
            if !measured {
                continue;
            }
            item.samples.push(outcome.millis);
            match event.check_gateway(&outcome) {
                Ok(has_context) if event.kind() == Kind::Context => item.count_answered(has_context),
                Ok(_) => {}
                Err(why) => item.fail(why),
            }
        }
    }
    let mut items = vec![version, search, preview];
    items.extend(hooks);
    Ok(items)
}

fn fallback_rounds(
    options: &Options,
    home: &Path,
    rng: &mut Rng,
    prompts: &mut impl Iterator<Item = String>,
) -> anyhow::Result<Vec<Item>> {
    let rounds = options.fallback_rounds.unwrap_or(options.rounds);
    eprintln!("no-gateway rounds: {rounds}");
    let mut items: Vec<Item> =
        EVENTS.iter().map(|event| Item::new(event.label(), "no gateway", Some(event.deadline_ms()))).collect();
    for round in 0..rounds {
        if round > 0 && round.is_multiple_of(20) {
            eprintln!("  round {round} of {rounds}");
        }
        let claude = round_input(rng, 100_000 + round, prompts.next().context("ran out of prompts")?);
        let kiro = round_input(rng, 100_000 + round, prompts.next().context("ran out of prompts")?);
        for (event, item) in EVENTS.iter().zip(items.iter_mut()) {
            let input = if event.host() == "claude-code" { &claude } else { &kiro };
            let outcome = hook(options, home, *event, input, false)?;
            item.samples.push(outcome.millis);
            match event.check_fallback(&outcome) {
                Ok(answered) => item.count_answered(answered),
                Err(why) => item.fail(why),
            }
        }
    }
    Ok(items)
}

/// Accepts connections and never answers; they stay open until the program ends.
fn hung_listener() -> anyhow::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?.to_string();
    let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            held.lock().expect("the holder never panics").push(stream);
        }
    });
    Ok(address)
}

fn hung_rounds(
    options: &Options,
    home: &Path,
    rng: &mut Rng,
    prompts: &mut impl Iterator<Item = String>,
) -> anyhow::Result<Vec<Item>> {
    let address = hung_listener()?;
    std::fs::write(home.join("serve.address"), format!("{address}\n"))?;
    let token = home.join("server.token");
    if std::fs::read_to_string(&token).map_or(true, |text| text.trim().is_empty()) {
        std::fs::write(&token, "bench-token-of-a-hung-gateway\n")?;
    }
    eprintln!("hung-gateway rounds: {} (listener at {address})", options.hung_rounds);
    let events = [Event::ClaudePrompt, Event::ClaudePostTool];
    let mut items: Vec<Item> =
        events.iter().map(|event| Item::new(event.label(), "hung gateway", Some(event.deadline_ms()))).collect();
    for round in 0..options.hung_rounds {
        let input = round_input(rng, 200_000 + round, prompts.next().context("ran out of prompts")?);
        for (event, item) in events.iter().zip(items.iter_mut()) {
            let outcome = hook(options, home, *event, &input, false)?;
            item.samples.push(outcome.millis);
            if let Err(why) = event.check_hung(&outcome) {
                item.fail(why);
            }
        }
    }
    std::fs::remove_file(home.join("serve.address"))?;
    Ok(items)
}

struct Memory {
    gateway_before_kib: u64,
    gateway_kib: u64,
    sessions_kib: Vec<u64>,
    modes: Vec<String>,
}

fn memory_phase(options: &Options, home: &Path, prompts: &mut impl Iterator<Item = String>) -> anyhow::Result<Memory> {
    eprintln!("memory: gateway and {MCP_SESSIONS} MCP sessions ...");
    let gateway = Gateway::start(options, home, 0)?;
    let gateway_pid = gateway.child.id();
    let gateway_before_kib = rss_kib(gateway_pid).context("reading the gateway's VmRSS")?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    // The children's pipes register with the runtime's reactor.
    let _entered = runtime.enter();
    let mut transports = Vec::new();
    let mut pids = Vec::new();
    for _ in 0..MCP_SESSIONS {
        let mut command = tokio::process::Command::new(&options.cairn);
        command
            .arg("--home")
            .arg(home)
            .args(["mcp", "serve"])
            .env("CAIRN_EMBED_MODEL_PATH", &options.model)
            .env("CAIRN_SKIP_MODEL_DOWNLOAD", "1")
            .env_remove("CAIRN_HOME")
            .env_remove("CAIRN_EMBED_MODEL_URL")
            .env_remove("CAIRN_HOST_START_GATEWAY")
            .stderr(Stdio::null());
        let transport = rmcp::transport::TokioChildProcess::new(command)?;
        pids.push(transport.id().context("the MCP session's pid")?);
        transports.push(transport);
    }
    let queries: Vec<String> =
        (0..MCP_SESSIONS).map(|_| prompts.next().context("ran out of prompts")).collect::<Result<_, _>>()?;
    let sessions = runtime.block_on(async {
        let mut tasks = Vec::new();
        for (transport, query) in transports.into_iter().zip(queries) {
            tasks.push(tokio::spawn(async move {
                let client = ().serve(transport).await?;
                let Value::Object(arguments) = json!({"query": query, "limit": 8}) else { unreachable!() };
                let result =
                    client.call_tool(CallToolRequestParams::new("memory_search").with_arguments(arguments)).await?;
                let answer = result.structured_content.unwrap_or(Value::Null);
                anyhow::Ok((client, answer))
            }));
        }
        let mut sessions = Vec::new();
        for task in tasks {
            sessions.push(task.await??);
        }
        anyhow::Ok(sessions)
    })?;
    let modes: Vec<String> =
        sessions.iter().map(|(_, answer)| answer["mode"].as_str().unwrap_or("none").to_owned()).collect();
    let gateway_kib = rss_kib(gateway_pid).context("reading the gateway's VmRSS")?;
    let sessions_kib: Vec<u64> =
        pids.iter().map(|pid| rss_kib(*pid).context("reading a session's VmRSS")).collect::<Result<_, _>>()?;
    runtime.block_on(async {
        for (client, _) in sessions {
            let _ = client.cancel().await;
        }
    });
    gateway.stop()?;
    Ok(Memory { gateway_before_kib, gateway_kib, sessions_kib, modes })
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn main() -> anyhow::Result<()> {
    let options = options()?;
    let load_start = loadavg();
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let home = tempfile::tempdir()?;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let summary = seed(&options, home.path(), &mut rng)?;
    let import_remaining = summary["backfill"]["remaining"].as_u64().unwrap_or(0);

    let fallback = options.fallback_rounds.unwrap_or(options.rounds);
    let needed = (WARMUP_ROUNDS + options.rounds) * 4 + fallback * 2 + options.hung_rounds + MCP_SESSIONS;
    let mut prompts = prompts(&mut rng, needed.max(200)).into_iter();

    eprintln!("starting the gateway and waiting for the model ...");
    let started = Instant::now();
    let gateway = Gateway::start(&options, home.path(), import_remaining)?;
    eprintln!("gateway ready in {:.1} s", started.elapsed().as_secs_f64());
    add_facts(&gateway)?;

    let mut items = gateway_rounds(&options, home.path(), &gateway, &mut rng, &mut prompts)?;
    gateway.stop()?;
    items.extend(fallback_rounds(&options, home.path(), &mut rng, &mut prompts)?);
    items.extend(hung_rounds(&options, home.path(), &mut rng, &mut prompts)?);
    let memory = memory_phase(&options, home.path(), &mut prompts)?;
    let load_end = loadavg();

    let sessions_total: u64 = memory.sessions_kib.iter().sum();
    let budget_kib = SESSION_RSS_BUDGET_KIB * MCP_SESSIONS as u64;
    let within_budget = sessions_total <= budget_kib;
    let failures: u64 = items.iter().map(|item| item.failures).sum();
    let hybrid_sessions = memory.modes.iter().filter(|mode| *mode == "hybrid").count();

    if !options.json {
        println!(
            "hook_bench: {} rows ({} inserted), {} rounds (+{WARMUP_ROUNDS} warm-up), {fallback} no-gateway rounds, {} hung rounds; {cpus} cpus; loadavg {load_start} at start, {load_end} at end",
            options.rows, summary["inserted"], options.rounds, options.hung_rounds
        );
        println!("cairn: {}; model: {}", options.cairn.display(), options.model.display());
        println!();
        println!("| phase | item | n | p50 ms | p95 ms | max ms | deadline ms | within | answered | failures |");
        println!("|---|---|---|---|---|---|---|---|---|---|");
        for item in &items {
            let (p50, p95, max) = item.stats();
            let deadline = item.deadline_ms.map_or("-".to_owned(), |ms| ms.to_string());
            let within = item.within_deadline().map_or("-", |yes| if yes { "yes" } else { "**no**" });
            let answered = item.answered.map_or("-".to_owned(), |count| format!("{count}/{}", item.samples.len()));
            println!(
                "| {} | `{}` | {} | {p50:.2} | {p95:.2} | {max:.2} | {deadline} | {within} | {answered} | {} |",
                item.phase,
                item.name,
                item.samples.len(),
                item.failures
            );
        }
        println!();
        println!("| memory (VmRSS) | value |");
        println!("|---|---|");
        println!("| gateway before the sessions | {} |", mib(memory.gateway_before_kib));
        println!("| gateway with {MCP_SESSIONS} sessions | {} |", mib(memory.gateway_kib));
        for (index, (kib, mode)) in memory.sessions_kib.iter().zip(&memory.modes).enumerate() {
            println!("| `cairn mcp serve` #{} (memory_search mode: {mode}) | {} |", index + 1, mib(*kib));
        }
        println!(
            "| total | {} (≤ gateway + {MCP_SESSIONS} × 25 MiB = {}: {}) |",
            mib(memory.gateway_kib + sessions_total),
            mib(memory.gateway_kib + budget_kib),
            if within_budget { "yes" } else { "**no**" }
        );
        println!();
        println!(
            "answered: context answers with text (gateway), searches with hits, answers before the deadline (no gateway); within: max ≤ deadline + {DEADLINE_SLACK_MS} ms of process start and exit; hook failures: {failures}"
        );
    }
    let line = json!({
        "rows": options.rows, "inserted": summary["inserted"], "rounds": options.rounds,
        "fallback_rounds": fallback, "hung_rounds": options.hung_rounds, "cpus": cpus,
        "loadavg_start": load_start, "loadavg_end": load_end,
        "items": items.iter().map(Item::json).collect::<Vec<_>>(),
        "failures": failures,
        "rss_kib": {
            "gateway_before": memory.gateway_before_kib, "gateway": memory.gateway_kib,
            "sessions": memory.sessions_kib, "sessions_total": sessions_total,
            "total": memory.gateway_kib + sessions_total, "budget_per_session": SESSION_RSS_BUDGET_KIB,
            "within_budget": within_budget,
        },
        "mcp_modes": memory.modes, "mcp_hybrid_sessions": hybrid_sessions,
    });
    println!("{line}");
    Ok(())
}
