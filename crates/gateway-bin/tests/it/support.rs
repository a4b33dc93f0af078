//! Helpers the integration tests share: `cairn` run on a home, a loopback
//! LLM with scripted replies, a hook process fed its input, an MCP client
//! of `cairn mcp serve`, and a session's stored transcript.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;

use rmcp::ServiceExt as _;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use crate::cairn;

/// The test's own Cairn variables, besides `CAIRN_HOME`, that a hook or private-span child must not inherit.
pub(crate) const INHERITED_VARS: &[&str] = &["CAIRN_EMBED_MODEL_PATH", "CAIRN_PRIVATE_SESSION"];

/// `cairn --home HOME ARGS...` without `CAIRN_HOME` and the `unset` variables, model downloads skipped.
pub(crate) fn cairn_at(home: &Path, args: &[&str], unset: &[&str]) -> Command {
    let mut command = cairn();
    command.arg("--home").arg(home).args(args).env_remove("CAIRN_HOME");
    for name in unset {
        command.env_remove(name);
    }
    command.env("CAIRN_SKIP_MODEL_DOWNLOAD", "1");
    command
}

/// Serves `replies` in order as OpenAI-compatible chat completions on
/// loopback; returns the base URL, a receiver of the prompts it was sent,
/// and the server thread (it ends after the last reply).
pub(crate) fn scripted_llm(replies: Vec<String>) -> (String, mpsc::Receiver<String>, std::thread::JoinHandle<()>) {
    let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let base_url = format!("http://{}/v1", server.server_addr().to_ip().unwrap());
    let (prompts_tx, prompts) = mpsc::channel();
    let handle = std::thread::spawn(move || {
        for reply in replies {
            let mut request = server.recv().unwrap();
            assert_eq!(request.url(), "/v1/chat/completions");
            let mut body = String::new();
            request.as_reader().read_to_string(&mut body).unwrap();
            let body: Value = serde_json::from_str(&body).unwrap();
            // A receiver dropped by a test that does not read the prompts is fine.
            let _ = prompts_tx.send(body["messages"][0]["content"].as_str().unwrap_or_default().to_owned());
            let answer = json!({"choices": [{"message": {"role": "assistant", "content": reply}}]});
            let header = tiny_http::Header::from_bytes("Content-Type", "application/json").unwrap();
            request.respond(tiny_http::Response::from_string(answer.to_string()).with_header(header)).unwrap();
        }
    });
    (base_url, prompts, handle)
}

/// The exit code and the JSON printed by a `cairn` run of `args`.
pub(crate) fn code_and_json(output: Output, args: &[&str]) -> (i32, Value) {
    let stdout = String::from_utf8(output.stdout).unwrap();
    let value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|error| panic!("{args:?}: {error}: {stdout:?} / {}", String::from_utf8_lossy(&output.stderr)));
    (output.status.code().unwrap(), value)
}

/// `cairn --home HOME hook ARGS...` with piped stdio and `env` set (the test's own Cairn variables removed).
pub(crate) fn hook_command(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = cairn_at(home, &["hook"], INHERITED_VARS);
    command.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).envs(env.iter().copied());
    command
}

/// `cairn --home HOME hook ARGS...` with `input` on stdin and `env` set
/// (the test's own Cairn variables removed first).
pub(crate) fn run_hook(home: &Path, args: &[&str], input: &str, env: &[(&str, &str)]) -> Output {
    let mut child = hook_command(home, args, env).spawn().unwrap();
    // A hook stops reading input past its limit: the rest meets a closed pipe.
    if let Err(error) = child.stdin.take().unwrap().write_all(input.as_bytes()) {
        assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe, "{error}");
    }
    child.wait_with_output().unwrap()
}

/// `cairn --home HOME mcp serve` for rmcp's transport: `HOME` at the Cairn home, stderr dropped, `env` set.
pub(crate) fn mcp_serve(home: &Path, unset: &[&str], env: &[(&str, &str)]) -> tokio::process::Command {
    let mut command = tokio::process::Command::from(cairn_at(home, &["mcp", "serve"], unset));
    command.env("HOME", home).stderr(Stdio::null()).envs(env.iter().copied());
    command
}

/// An rmcp client of the MCP server `command` starts.
pub(crate) async fn mcp_client(command: tokio::process::Command) -> RunningService<RoleClient, ()> {
    ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap()
}

/// `(role, content)` of a session's stored transcript, oldest first.
pub(crate) fn transcript(home: &Path, session: &str) -> Vec<(String, String)> {
    let connection =
        rusqlite::Connection::open_with_flags(home.join("memory.db"), rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let mut statement = connection
        .prepare("SELECT role, content FROM session_transcripts WHERE session_key = ?1 ORDER BY seq")
        .unwrap();
    statement.query_map([session], |row| Ok((row.get(0)?, row.get(1)?))).unwrap().map(Result::unwrap).collect()
}
