//! Probing a server: the MCP handshake (`initialize`, `notifications/initialized`,
//! `tools/list`) over a child process's stdio or over streamable HTTP.
//!
//! A stdio server runs in its own process group. Its standard output is
//! read up to a cap (1 MiB by default; a server that writes more is
//! stopped and reported), every line must be a JSON-RPC message (the MCP
//! stdio transport allows nothing else on stdout), and the whole probe has
//! one deadline (30 s by default). Afterwards the group is killed with
//! `SIGKILL` and every member is reaped. A server's descendants that left
//! its group or session (`setsid`, a double fork) are found too, on Linux:
//! before anything is killed, the server's process tree is collected from
//! `/proc` by parent pid and stopped (`SIGSTOP`), again and again until a
//! walk finds no new process, so nothing can fork or exit out of the tree
//! while it is collected; then every collected process is killed and
//! reaped. A daemon whose intermediate parent exited before the probe ended
//! has no ancestry left to walk: the probing process makes itself a child
//! subreaper, so such orphans are re-parented to it instead of to init, and
//! [`sweep_orphans`], run once every probe is over, kills and reaps every
//! descendant the process still has. Walking the tree alone would miss those
//! orphans, and the subreaper alone would kill them only when they become
//! orphans; the two together leave nothing, whatever session or group a
//! process moved to. These attributes are why the gateway runs probes in a
//! short-lived `cairn mcp probe` process instead of in itself.
//!
//! The handshake is a small JSON-RPC exchange written here rather than
//! rmcp's client: rmcp's child-process transport caps line length, not the
//! bytes a server may write in total, kills its child from a detached task
//! on drop without reaping the rest of the group, and its streamable-HTTP
//! client needs `reqwest`, while `ureq` is already in the binary.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use cairn_agent_spec::McpTransport;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Default deadline of one probe.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(30);
/// Default cap on what a server may write to its standard output (or send
/// as HTTP bodies) during one probe.
pub(crate) const STDOUT_CAP_BYTES: usize = 1024 * 1024;
/// Probes running at once.
pub(crate) const MAX_PARALLEL_PROBES: usize = 16;
/// The protocol version Cairn offers.
pub(crate) const PROTOCOL_VERSION: &str = "2025-06-18";
/// Pages of `tools/list` followed.
const MAX_TOOL_PAGES: usize = 50;
/// Bytes of a server's standard error kept for an error message.
const STDERR_TAIL_BYTES: usize = 2048;
/// How often a probe waiting for an answer checks whether the server exited.
const EXIT_POLL: Duration = Duration::from_millis(50);
/// How long the reaper waits for killed processes to disappear.
const REAP_PATIENCE: Duration = Duration::from_secs(5);

/// Deadline and cap of a probe.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProbeOptions {
    pub(crate) timeout: Duration,
    pub(crate) output_cap: usize,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        Self { timeout: PROBE_TIMEOUT, output_cap: STDOUT_CAP_BYTES }
    }
}

/// How a probe ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ProbeStatus {
    /// The handshake completed.
    Ok,
    /// The server failed (see `error` and `reason`).
    Error,
    /// No answer before the deadline.
    Timeout,
}

/// Why a probe failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ProbeError {
    /// The command could not be started.
    SpawnFailed,
    /// The server exited (or closed its output) before answering.
    Exited,
    /// It wrote something that is not a JSON-RPC message.
    NotJsonRpc,
    /// It wrote more than the cap.
    OutputCap,
    /// It answered a request with a JSON-RPC error.
    RpcError,
    /// The HTTP exchange failed (connection, status, content type).
    Http,
    /// The definition cannot be probed (e.g. a URL that is not HTTP).
    Unsupported,
}

/// The outcome of probing one server.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ProbeResult {
    pub(crate) name: String,
    pub(crate) transport: String,
    pub(crate) status: ProbeStatus,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub(crate) error: Option<ProbeError>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub(crate) reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub(crate) server_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub(crate) server_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub(crate) protocol_version: Option<String>,
    pub(crate) tools: Vec<String>,
    pub(crate) elapsed_ms: u64,
}

/// What went wrong during a handshake.
#[derive(Debug)]
struct Failure {
    status: ProbeStatus,
    error: Option<ProbeError>,
    reason: String,
}

impl Failure {
    fn error(error: ProbeError, reason: impl Into<String>) -> Self {
        Self { status: ProbeStatus::Error, error: Some(error), reason: reason.into() }
    }

    fn timeout(reason: impl Into<String>) -> Self {
        Self { status: ProbeStatus::Timeout, error: None, reason: reason.into() }
    }
}

/// What the handshake learnt.
#[derive(Debug, Default)]
struct Handshake {
    server_name: Option<String>,
    server_version: Option<String>,
    protocol_version: Option<String>,
    tools: Vec<String>,
}

fn finish(name: &str, transport: &str, started: Instant, outcome: Result<Handshake, Failure>) -> ProbeResult {
    let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let mut result = ProbeResult {
        name: name.to_owned(),
        transport: transport.to_owned(),
        status: ProbeStatus::Ok,
        error: None,
        reason: None,
        server_name: None,
        server_version: None,
        protocol_version: None,
        tools: Vec::new(),
        elapsed_ms,
    };
    match outcome {
        Ok(handshake) => {
            result.server_name = handshake.server_name;
            result.server_version = handshake.server_version;
            result.protocol_version = handshake.protocol_version;
            result.tools = handshake.tools;
        }
        Err(failure) => {
            result.status = failure.status;
            result.error = failure.error;
            result.reason = Some(super::shown(&failure.reason));
        }
    }
    result
}

/// Probes one server.
pub(crate) fn probe(name: &str, transport: &McpTransport, options: ProbeOptions) -> ProbeResult {
    let started = Instant::now();
    match transport {
        McpTransport::Local { command, args, env } => {
            let env: Vec<(&String, &String)> = env.0.iter().collect();
            finish(name, "stdio", started, probe_stdio(command, args, &env, options, started))
        }
        McpTransport::Remote { url, headers } => {
            let headers: Vec<(&String, &String)> = headers.0.iter().collect();
            finish(name, "http", started, probe_http(url, &headers, options, started))
        }
    }
}

/// Probes every server, several at once; results keep the input order.
pub(crate) fn probe_all(servers: &[(String, McpTransport)], options: ProbeOptions) -> Vec<ProbeResult> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<parking_lot::Mutex<Option<ProbeResult>>> =
        servers.iter().map(|_| parking_lot::Mutex::new(None)).collect();
    let workers = servers.len().clamp(1, MAX_PARALLEL_PROBES);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((name, transport)) = servers.get(index) else { break };
                    *results[index].lock() = Some(probe(name, transport, options));
                }
            });
        }
    });
    results.into_iter().map(|slot| slot.into_inner().expect("every index was probed")).collect()
}

// ----- stdio -----

/// What the stdout reader saw.
enum Output {
    Line(String),
    /// The cap was reached; nothing more is read.
    Cap,
    Eof,
    Failed(String),
}

fn initialize_request() -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "cairn", "version": env!("CARGO_PKG_VERSION")},
        },
    })
}

fn tools_request(id: u64, cursor: Option<&str>) -> Value {
    let params = match cursor {
        Some(cursor) => json!({"cursor": cursor}),
        None => json!({}),
    };
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params})
}

fn initialized_notification() -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
}

/// Makes this process a child subreaper once, so the children of a probed
/// server are re-parented here (and reaped) rather than to init.
fn become_subreaper() {
    #[cfg(target_os = "linux")]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let any = rustix::process::Pid::from_raw(1);
            if let Err(error) = rustix::process::set_child_subreaper(any) {
                tracing::warn!(%error, "cannot become a child subreaper; a probed server's children may outlive it");
            }
        });
    }
}

/// A spawned server: its group is killed and reaped when this is dropped.
struct Group {
    child: Child,
}

impl Drop for Group {
    fn drop(&mut self) {
        kill_and_reap(&mut self.child);
    }
}

fn kill_and_reap(child: &mut Child) {
    // The tree is walked only while the server is unreaped (its pid still
    // ours); once it is gone its descendants are this process's orphans,
    // for `sweep_orphans`.
    #[cfg(target_os = "linux")]
    let tree = match (child.try_wait(), i32::try_from(child.id())) {
        (Ok(None), Ok(root)) => tree::stop_tree(root),
        _ => Vec::new(),
    };
    #[cfg(unix)]
    {
        use rustix::io::Errno;
        use rustix::process::{Pid, Signal, WaitOptions, kill_process_group, test_kill_process_group, waitpgid};
        let Some(pgid) = i32::try_from(child.id()).ok().and_then(Pid::from_raw) else {
            let _ = child.kill();
            let _ = child.wait();
            return;
        };
        #[cfg(target_os = "linux")]
        tree::kill_all(&tree);
        let _ = kill_process_group(pgid, Signal::KILL);
        // The server itself, should it have left its group.
        let _ = child.kill();
        let _ = child.wait();
        #[cfg(target_os = "linux")]
        tree::reap(&tree);
        let started = Instant::now();
        loop {
            match waitpgid(pgid, WaitOptions::NOHANG) {
                Ok(Some(_)) => continue,
                Err(Errno::INTR) => continue,
                Ok(None) | Err(_) => {}
            }
            // ESRCH: no process (not even a zombie) is left in the group.
            if test_kill_process_group(pgid) == Err(Errno::SRCH) {
                return;
            }
            if started.elapsed() > REAP_PATIENCE {
                tracing::warn!(pgid = pgid.as_raw_nonzero().get(), "processes of a probed server outlived the probe");
                return;
            }
            let _ = kill_process_group(pgid, Signal::KILL);
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    #[cfg(not(unix))]
    {
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Kills and reaps every descendant this process still has: the servers'
/// daemons that were re-parented to it (a child subreaper) when their own
/// parent exited. Only for a process that runs nothing but probes (`cairn
/// mcp probe`), once every probe is over.
pub(crate) fn sweep_orphans() {
    #[cfg(target_os = "linux")]
    {
        let own = i32::try_from(std::process::id()).unwrap_or_default();
        let started = Instant::now();
        loop {
            let stopped = tree::stop_descendants(own);
            if stopped.is_empty() {
                return;
            }
            tree::kill_all(&stopped);
            tree::reap(&stopped);
            if started.elapsed() > REAP_PATIENCE {
                tracing::warn!(left = stopped.len(), "processes started by probed servers outlived the probe");
                return;
            }
        }
    }
}

/// Process trees read from `/proc` (Linux).
#[cfg(target_os = "linux")]
mod tree {
    use std::collections::BTreeSet;
    use std::time::{Duration, Instant};

    use rustix::process::{Pid, Signal, WaitOptions, kill_process, waitpid};

    /// Most walks of a tree that keeps growing (a fork bomb) before the
    /// collected processes are killed anyway.
    const MAX_WALKS: usize = 200;

    /// Every process: (pid, parent pid, is a zombie).
    fn table() -> Vec<(i32, i32, bool)> {
        let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
        entries
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
            .filter_map(|pid| {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
                let (_, after_name) = stat.rsplit_once(')')?;
                let mut fields = after_name.split_whitespace();
                let state = fields.next()?;
                let parent = fields.next()?.parse().ok()?;
                Some((pid, parent, state == "Z"))
            })
            .collect()
    }

    /// The live descendants of `root` (not `root` itself).
    fn descendants(table: &[(i32, i32, bool)], root: i32) -> Vec<i32> {
        let mut found = vec![root];
        let mut index = 0;
        while index < found.len() {
            let parent = found[index];
            found.extend(table.iter().filter(|(_, of, _)| *of == parent).map(|(pid, _, _)| *pid));
            index += 1;
        }
        found.into_iter().skip(1).filter(|pid| table.iter().any(|(live, _, zombie)| live == pid && !zombie)).collect()
    }

    fn signal(pid: i32, signal: Signal) {
        if let Some(pid) = Pid::from_raw(pid) {
            let _ = kill_process(pid, signal);
        }
    }

    /// Stops `root` (a child of this process, not reaped) and its whole
    /// tree, walking again until a walk finds no process that is not
    /// stopped yet; returns the descendants (not `root`).
    pub(super) fn stop_tree(root: i32) -> Vec<i32> {
        signal(root, Signal::STOP);
        stop_descendants(root)
    }

    /// Stops every descendant of `root` (walking until nothing new
    /// appears) and returns them.
    pub(super) fn stop_descendants(root: i32) -> Vec<i32> {
        let mut stopped = BTreeSet::new();
        for _ in 0..MAX_WALKS {
            let fresh: Vec<i32> =
                descendants(&table(), root).into_iter().filter(|pid| !stopped.contains(pid)).collect();
            if fresh.is_empty() {
                break;
            }
            for pid in fresh {
                signal(pid, Signal::STOP);
                stopped.insert(pid);
            }
        }
        stopped.into_iter().collect()
    }

    pub(super) fn kill_all(pids: &[i32]) {
        for pid in pids {
            signal(*pid, Signal::KILL);
        }
    }

    /// Waits (briefly) until none of `pids` exists any more, reaping those
    /// that are, or become, this process's children.
    pub(super) fn reap(pids: &[i32]) {
        let started = Instant::now();
        let mut left: Vec<i32> = pids.to_vec();
        while !left.is_empty() && started.elapsed() < super::REAP_PATIENCE {
            left.retain(|pid| {
                if let Some(pid) = Pid::from_raw(*pid) {
                    let _ = waitpid(Some(pid), WaitOptions::NOHANG);
                }
                std::path::Path::new(&format!("/proc/{pid}")).exists()
            });
            if !left.is_empty() {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
}

fn spawn_reader(stdout: std::process::ChildStdout, cap: usize) -> Receiver<Output> {
    let (sender, receiver) = mpsc::channel();
    std::thread::Builder::new()
        .name("cairn-mcp-probe-out".to_owned())
        .spawn(move || {
            let mut reader = BufReader::new(stdout.take(u64::try_from(cap).unwrap_or(u64::MAX)));
            let mut total = 0_usize;
            loop {
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) => {
                        let message = if total >= cap { Output::Cap } else { Output::Eof };
                        let _ = sender.send(message);
                        return;
                    }
                    Ok(read) => {
                        total += read;
                        if line.last() != Some(&b'\n') {
                            // A partial line at the cap or at the end.
                            let message = if total >= cap { Output::Cap } else { Output::Eof };
                            if total < cap && !line.iter().all(u8::is_ascii_whitespace) {
                                let _ = sender.send(Output::Line(String::from_utf8_lossy(&line).into_owned()));
                            }
                            let _ = sender.send(message);
                            return;
                        }
                        if sender.send(Output::Line(String::from_utf8_lossy(&line).into_owned())).is_err() {
                            return;
                        }
                    }
                    Err(error) => {
                        let _ = sender.send(Output::Failed(error.to_string()));
                        return;
                    }
                }
            }
        })
        .expect("spawning a thread");
    receiver
}

fn spawn_stderr_tail(stderr: std::process::ChildStderr) -> std::sync::Arc<parking_lot::Mutex<Vec<u8>>> {
    let tail = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let sink = std::sync::Arc::clone(&tail);
    let spawned = std::thread::Builder::new().name("cairn-mcp-probe-err".to_owned()).spawn(move || {
        let mut stderr = stderr;
        let mut buffer = [0_u8; 4096];
        while let Ok(read) = stderr.read(&mut buffer) {
            if read == 0 {
                break;
            }
            let mut kept = sink.lock();
            kept.extend_from_slice(&buffer[..read]);
            if kept.len() > STDERR_TAIL_BYTES {
                let excess = kept.len() - STDERR_TAIL_BYTES;
                kept.drain(..excess);
            }
        }
    });
    if let Err(error) = spawned {
        tracing::warn!(%error, "cannot read a probed server's standard error");
    }
    tail
}

struct StdioSession<'a> {
    stdin: ChildStdin,
    output: Receiver<Output>,
    deadline: Instant,
    cap: usize,
    group: &'a mut Group,
    stderr: std::sync::Arc<parking_lot::Mutex<Vec<u8>>>,
}

impl StdioSession<'_> {
    fn send(&mut self, message: &Value) -> Result<(), Failure> {
        let mut line = message.to_string();
        line.push('\n');
        match self.stdin.write_all(line.as_bytes()).and_then(|()| self.stdin.flush()) {
            Ok(()) => Ok(()),
            Err(_) => Err(self.closed_early()),
        }
    }

    /// The server stopped reading: what it wrote before says why.
    fn closed_early(&mut self) -> Failure {
        while let Ok(Output::Line(line)) = self.output.recv_timeout(EXIT_POLL) {
            let trimmed = line.trim();
            if trimmed.is_empty() {
                continue;
            }
            if let Err(failure) = parse_message(trimmed) {
                return failure;
            }
        }
        self.exited()
    }

    fn exited(&mut self) -> Failure {
        // Give a closing server a moment to be collected for its status.
        let status = (0..50).find_map(|_| {
            let status = self.group.child.try_wait().ok().flatten();
            if status.is_none() {
                std::thread::sleep(Duration::from_millis(10));
            }
            status
        });
        // Its last words may still be in the pipe.
        for _ in 0..20 {
            if !self.stderr.lock().is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let tail = String::from_utf8_lossy(&self.stderr.lock()).trim().to_owned();
        let mut reason = match status {
            Some(status) => format!("the server exited before answering ({status})"),
            None => "the server closed its output before answering".to_owned(),
        };
        if !tail.is_empty() {
            let tail: String = tail.chars().rev().take(400).collect::<Vec<_>>().into_iter().rev().collect();
            reason.push_str(&format!("; stderr: {tail}"));
        }
        Failure::error(ProbeError::Exited, reason)
    }

    /// Waits for the response to request `id`, answering requests from the
    /// server with "method not found" and skipping notifications.
    fn response(&mut self, id: u64, what: &str) -> Result<Value, Failure> {
        loop {
            let remaining = self.deadline.saturating_duration_since(Instant::now());
            let output = match self.output.recv_timeout(remaining.min(EXIT_POLL)) {
                Ok(output) => output,
                Err(RecvTimeoutError::Timeout) if remaining <= EXIT_POLL => {
                    return Err(Failure::timeout(format!("no answer to `{what}` before the deadline")));
                }
                Err(RecvTimeoutError::Timeout) => {
                    // The server may be gone while a child of it keeps its
                    // stdout open: no end of file would ever come.
                    if matches!(self.group.child.try_wait(), Ok(Some(_))) {
                        match self.output.recv_timeout(EXIT_POLL) {
                            Ok(output) => output,
                            Err(_) => return Err(self.exited()),
                        }
                    } else {
                        continue;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return Err(self.exited()),
            };
            let line = match output {
                Output::Line(line) => line,
                Output::Cap => {
                    return Err(Failure::error(
                        ProbeError::OutputCap,
                        format!("the server wrote more than {} bytes to stdout", self.cap),
                    ));
                }
                Output::Eof => return Err(self.exited()),
                Output::Failed(error) => {
                    return Err(Failure::error(ProbeError::Exited, format!("reading stdout: {error}")));
                }
            };
            let trimmed = line.trim();
            if trimmed.is_empty() {
                continue;
            }
            let message = parse_message(trimmed)?;
            if let Some(found) = take_response(&message, id, what)? {
                return Ok(found);
            }
            if message.get("method").is_some()
                && let Some(request_id) = message.get("id")
            {
                let refusal = json!({
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "error": {"code": -32601, "message": "the probing client offers no methods"},
                });
                self.send(&refusal)?;
            }
        }
    }
}

fn snippet(text: &str) -> String {
    let short: String = text.chars().take(80).collect();
    if short.len() < text.len() { format!("{short}…") } else { short }
}

fn parse_message(text: &str) -> Result<Value, Failure> {
    let message: Value = serde_json::from_str(text)
        .map_err(|_| Failure::error(ProbeError::NotJsonRpc, format!("stdout is not JSON-RPC: {:?}", snippet(text))))?;
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(Failure::error(
            ProbeError::NotJsonRpc,
            format!("stdout is not a JSON-RPC 2.0 message: {:?}", snippet(text)),
        ));
    }
    Ok(message)
}

/// The `result` of `message` when it answers `id`.
fn take_response(message: &Value, id: u64, what: &str) -> Result<Option<Value>, Failure> {
    if message.get("method").is_some() || message.get("id").and_then(Value::as_u64) != Some(id) {
        return Ok(None);
    }
    if let Some(error) = message.get("error") {
        let text = error.get("message").and_then(Value::as_str).unwrap_or("no message");
        let code = error.get("code").and_then(Value::as_i64).unwrap_or_default();
        return Err(Failure::error(ProbeError::RpcError, format!("`{what}` failed: {text} (code {code})")));
    }
    match message.get("result") {
        Some(result) if result.is_object() => Ok(Some(result.clone())),
        _ => Err(Failure::error(ProbeError::NotJsonRpc, format!("the answer to `{what}` has no result object"))),
    }
}

fn read_initialize(result: &Value, handshake: &mut Handshake) -> bool {
    let info = result.get("serverInfo");
    let text = |value: Option<&Value>| value.and_then(Value::as_str).map(|text| snippet(&super::shown(text)));
    handshake.server_name = text(info.and_then(|info| info.get("name")));
    handshake.server_version = text(info.and_then(|info| info.get("version")));
    handshake.protocol_version = text(result.get("protocolVersion"));
    result.get("capabilities").and_then(|capabilities| capabilities.get("tools")).is_some()
}

/// Tool names of a `tools/list` result and the next cursor.
fn read_tools(result: &Value, tools: &mut Vec<String>) -> Result<Option<String>, Failure> {
    let Some(list) = result.get("tools").and_then(Value::as_array) else {
        return Err(Failure::error(ProbeError::NotJsonRpc, "the answer to `tools/list` has no `tools` list"));
    };
    tools.extend(
        list.iter()
            .filter_map(|tool| tool.get("name").and_then(Value::as_str))
            .map(|name| snippet(&super::shown(name))),
    );
    Ok(result.get("nextCursor").and_then(Value::as_str).filter(|cursor| !cursor.is_empty()).map(str::to_owned))
}

fn probe_stdio(
    command: &str,
    args: &[String],
    env: &[(&String, &String)],
    options: ProbeOptions,
    started: Instant,
) -> Result<Handshake, Failure> {
    become_subreaper();
    let mut spawn = Command::new(command);
    spawn
        .args(args)
        .envs(env.iter().map(|(key, value)| (key.as_str(), value.as_str())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut spawn, 0);
    let mut child = spawn
        .spawn()
        .map_err(|error| Failure::error(ProbeError::SpawnFailed, format!("cannot start `{command}`: {error}")))?;
    let stdin = child.stdin.take().expect("stdin is piped");
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let mut group = Group { child };
    let output = spawn_reader(stdout, options.output_cap);
    let stderr = spawn_stderr_tail(stderr);
    let mut session = StdioSession {
        stdin,
        output,
        deadline: started + options.timeout,
        cap: options.output_cap,
        group: &mut group,
        stderr,
    };
    let mut handshake = Handshake::default();
    session.send(&initialize_request())?;
    let result = session.response(1, "initialize")?;
    let offers_tools = read_initialize(&result, &mut handshake);
    session.send(&initialized_notification())?;
    if offers_tools {
        let mut cursor = None;
        for page in 0..MAX_TOOL_PAGES {
            let id = 2 + page as u64;
            session.send(&tools_request(id, cursor.as_deref()))?;
            let result = session.response(id, "tools/list")?;
            cursor = read_tools(&result, &mut handshake.tools)?;
            if cursor.is_none() {
                break;
            }
        }
    }
    drop(session);
    drop(group);
    Ok(handshake)
}

// ----- streamable HTTP -----

struct HttpSession {
    url: String,
    headers: Vec<(String, String)>,
    session_id: Option<String>,
    protocol_version: Option<String>,
    deadline: Instant,
    cap: usize,
}

impl HttpSession {
    fn agent(&self) -> Result<ureq::Agent, Failure> {
        let remaining = self.deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(Failure::timeout("no answer before the deadline"));
        }
        Ok(ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_global(Some(remaining))
            .build()
            .into())
    }

    fn post(&mut self, message: &Value, expect: Option<(u64, &str)>) -> Result<Option<Value>, Failure> {
        let agent = self.agent()?;
        let mut request = agent
            .post(&self.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream");
        for (key, value) in &self.headers {
            request = request.header(key.as_str(), value.as_str());
        }
        if let Some(session) = &self.session_id {
            request = request.header("Mcp-Session-Id", session.as_str());
        }
        if let Some(version) = &self.protocol_version {
            request = request.header("MCP-Protocol-Version", version.as_str());
        }
        let response = request.send(message.to_string()).map_err(|error| match error {
            ureq::Error::Timeout(_) => Failure::timeout("no answer before the deadline"),
            other => Failure::error(ProbeError::Http, format!("request failed: {other}")),
        })?;
        let status = response.status().as_u16();
        let Some((id, what)) = expect else {
            return if (200..300).contains(&status) {
                Ok(None)
            } else {
                Err(Failure::error(ProbeError::Http, format!("the notification was refused with HTTP {status}")))
            };
        };
        if status != 200 {
            return Err(Failure::error(ProbeError::Http, format!("`{what}` was answered with HTTP {status}")));
        }
        if let Some(session) = response.headers().get("mcp-session-id").and_then(|value| value.to_str().ok()) {
            self.session_id = Some(session.to_owned());
        }
        let event_stream = response.body().mime_type() == Some("text/event-stream");
        let json = response.body().mime_type() == Some("application/json");
        if !event_stream && !json {
            return Err(Failure::error(
                ProbeError::Http,
                format!("`{what}` was answered with content type {:?}", response.body().mime_type().unwrap_or("none")),
            ));
        }
        let cap = self.cap;
        let mut reader = BufReader::new(response.into_body().into_reader().take(cap as u64 + 1));
        let timed_out = |error: std::io::Error| {
            if error.kind() == std::io::ErrorKind::TimedOut {
                Failure::timeout(format!("no answer to `{what}` before the deadline"))
            } else {
                Failure::error(ProbeError::Http, format!("reading the answer to `{what}`: {error}"))
            }
        };
        if json {
            let mut body = Vec::new();
            reader.read_to_end(&mut body).map_err(timed_out)?;
            if body.len() > cap {
                return Err(Failure::error(ProbeError::OutputCap, format!("the answer is over {cap} bytes")));
            }
            let text = String::from_utf8_lossy(&body);
            let message = parse_message(text.trim())?;
            return take_response(&message, id, what)?
                .map(Some)
                .ok_or_else(|| Failure::error(ProbeError::NotJsonRpc, format!("the answer does not answer `{what}`")));
        }
        // Server-sent events: `data:` lines, an empty line ends an event.
        let mut total = 0_usize;
        let mut data = String::new();
        loop {
            let mut line = String::new();
            let read = reader.read_line(&mut line).map_err(timed_out)?;
            total += read;
            if total > cap {
                return Err(Failure::error(ProbeError::OutputCap, format!("the event stream is over {cap} bytes")));
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if read == 0 || line.is_empty() {
                if !data.is_empty() {
                    let message = parse_message(data.trim())?;
                    if let Some(result) = take_response(&message, id, what)? {
                        return Ok(Some(result));
                    }
                    data.clear();
                }
                if read == 0 {
                    return Err(Failure::error(
                        ProbeError::Exited,
                        format!("the event stream ended without answering `{what}`"),
                    ));
                }
            } else if let Some(rest) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
            }
        }
    }

    fn close(&self) {
        let Some(session) = &self.session_id else { return };
        let Ok(agent) = self.agent() else { return };
        let _ = agent.delete(&self.url).header("Mcp-Session-Id", session.as_str()).call();
    }
}

fn probe_http(
    url: &str,
    headers: &[(&String, &String)],
    options: ProbeOptions,
    started: Instant,
) -> Result<Handshake, Failure> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(Failure::error(ProbeError::Unsupported, "only http:// and https:// servers can be probed"));
    }
    let mut session = HttpSession {
        url: url.to_owned(),
        headers: headers.iter().map(|(key, value)| ((*key).clone(), (*value).clone())).collect(),
        session_id: None,
        protocol_version: None,
        deadline: started + options.timeout,
        cap: options.output_cap,
    };
    let mut handshake = Handshake::default();
    let result = session.post(&initialize_request(), Some((1, "initialize")))?.expect("a response was expected");
    let offers_tools = read_initialize(&result, &mut handshake);
    session.protocol_version = handshake.protocol_version.clone();
    let outcome = (|| {
        session.post(&initialized_notification(), None)?;
        if offers_tools {
            let mut cursor = None;
            for page in 0..MAX_TOOL_PAGES {
                let id = 2 + page as u64;
                let result =
                    session.post(&tools_request(id, cursor.as_deref()), Some((id, "tools/list")))?.expect("expected");
                cursor = read_tools(&result, &mut handshake.tools)?;
                if cursor.is_none() {
                    break;
                }
            }
        }
        Ok(())
    })();
    session.close();
    outcome.map(|()| handshake)
}

/// Probe results of the gateway, kept for [`CACHE_TTL`].
pub(crate) const CACHE_TTL: Duration = Duration::from_secs(600);

/// The last probe of every server and when it ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ProbeReport {
    /// RFC 3339 time the probe started.
    pub(crate) probed_at: String,
    pub(crate) results: Vec<ProbeResult>,
    /// Servers left out of a probe of everything, and why.
    #[serde(default)]
    pub(crate) skipped: Vec<Skipped>,
}

/// A server a probe left out.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Skipped {
    pub(crate) name: String,
    pub(crate) reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_is_matched_by_id_and_errors_are_typed() {
        let answer = json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": []}});
        assert!(take_response(&answer, 1, "x").unwrap().is_some());
        assert!(take_response(&answer, 2, "x").unwrap().is_none());
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "roots/list"});
        assert!(take_response(&request, 1, "x").unwrap().is_none());
        let refused = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32600, "message": "no"}});
        assert_eq!(take_response(&refused, 1, "x").unwrap_err().error, Some(ProbeError::RpcError));
        let bare = json!({"jsonrpc": "2.0", "id": 1, "result": 3});
        assert_eq!(take_response(&bare, 1, "x").unwrap_err().error, Some(ProbeError::NotJsonRpc));
    }

    #[test]
    fn only_json_rpc_lines_are_accepted() {
        assert_eq!(parse_message("hello").unwrap_err().error, Some(ProbeError::NotJsonRpc));
        assert_eq!(parse_message("{\"id\":1}").unwrap_err().error, Some(ProbeError::NotJsonRpc));
        assert!(parse_message("{\"jsonrpc\":\"2.0\",\"method\":\"x\"}").is_ok());
    }

    #[test]
    fn tool_pages_carry_a_cursor() {
        let mut tools = Vec::new();
        let next =
            read_tools(&json!({"tools": [{"name": "a"}, {"name": "b"}], "nextCursor": "c2"}), &mut tools).unwrap();
        assert_eq!(next.as_deref(), Some("c2"));
        assert_eq!(tools, ["a", "b"]);
        assert!(read_tools(&json!({"tools": "x"}), &mut tools).is_err());
    }
}
