//! Helpers the integration tests share: a loopback LLM with scripted
//! replies, a hook process fed its input, and a session's stored transcript.

use std::io::Write as _;
use std::path::Path;
use std::process::{Output, Stdio};
use std::sync::mpsc;

use serde_json::{Value, json};

use crate::cairn;

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

/// `cairn --home HOME hook ARGS...` with `input` on stdin and `env` set
/// (the test's own Cairn variables removed first).
pub(crate) fn run_hook(home: &Path, args: &[&str], input: &str, env: &[(&str, &str)]) -> Output {
    let mut command = cairn();
    command
        .arg("--home")
        .arg(home)
        .arg("hook")
        .args(args)
        .env_remove("CAIRN_HOME")
        .env_remove("CAIRN_EMBED_MODEL_PATH")
        .env_remove("CAIRN_PRIVATE_SESSION")
        .env("CAIRN_SKIP_MODEL_DOWNLOAD", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().unwrap();
    // A hook stops reading input past its limit: the rest meets a closed pipe.
    if let Err(error) = child.stdin.take().unwrap().write_all(input.as_bytes()) {
        assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe, "{error}");
    }
    child.wait_with_output().unwrap()
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
