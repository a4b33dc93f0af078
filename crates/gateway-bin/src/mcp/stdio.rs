//! The stdio transport of `cairn mcp serve`, with JSON-RPC's answers for
//! what the protocol layer would otherwise drop in silence.
//!
//! Every line from stdin is checked before the MCP session sees it: a line
//! that is not JSON (invalid UTF-8, a lone surrogate, nesting deeper than
//! 128, a truncated object) or longer than [`MAX_LINE_BYTES`] gets a
//! `-32700` parse error with `id: null`, as JSON-RPC 2.0 says; a
//! `tools/call` request without an object `params`, or whose `arguments`
//! is not an object, gets `-32602` invalid params with its own id. Every
//! other line goes to the session unchanged. One writer puts the session's
//! messages and these errors on stdout, a whole line at a time.

use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, DuplexStream};
use tokio::sync::mpsc;

/// Longest line read (the session's own limit).
pub(crate) const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
/// Bytes buffered between the filter and the session.
const PIPE_BYTES: usize = 1 << 20;

/// JSON-RPC's parse error.
const PARSE_ERROR: i64 = -32_700;
/// JSON-RPC's invalid params.
const INVALID_PARAMS: i64 = -32_602;

/// What to do with one line from stdin.
#[derive(Debug, PartialEq)]
enum Line {
    /// Hand it to the session.
    Forward,
    /// Nothing to do (a blank line).
    Skip,
    /// Answer with this error instead.
    Answer(Value),
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// Checks one complete line (without its newline).
fn check(line: &[u8]) -> Line {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Line::Skip;
    }
    let Ok(text) = std::str::from_utf8(line) else {
        return Line::Answer(error(Value::Null, PARSE_ERROR, "Parse error: the message is not UTF-8"));
    };
    let message: Value = match serde_json::from_str(text) {
        Ok(message) => message,
        Err(parse) => return Line::Answer(error(Value::Null, PARSE_ERROR, &format!("Parse error: {parse}"))),
    };
    if message.get("method").and_then(Value::as_str) == Some("tools/call")
        && let Some(id) = message.get("id")
    {
        let params = message.get("params");
        let invalid = match params {
            Some(Value::Object(params)) => params.get("arguments").is_some_and(|arguments| !arguments.is_object()),
            _ => true,
        };
        if invalid {
            let why = "Invalid params: tools/call takes an object `params` whose `arguments` is an object";
            return Line::Answer(error(id.clone(), INVALID_PARAMS, why));
        }
    }
    Line::Forward
}

/// Reads one line of at most `max` bytes into `line` (without its
/// newline). Returns `None` at the end of input, `Some(false)` for a line
/// that was longer (its bytes are skipped up to its newline).
async fn read_line(reader: &mut (impl AsyncBufRead + Unpin), line: &mut Vec<u8>, max: usize) -> Option<bool> {
    line.clear();
    let mut fits = true;
    let mut read_any = false;
    loop {
        let buffer = match reader.fill_buf().await {
            Ok(buffer) => buffer,
            Err(error) => {
                tracing::warn!(%error, "reading stdin failed");
                return None;
            }
        };
        if buffer.is_empty() {
            return read_any.then_some(fits);
        }
        read_any = true;
        let (chunk, done) = match buffer.iter().position(|byte| *byte == b'\n') {
            Some(at) => (&buffer[..at], Some(at + 1)),
            None => (buffer, None),
        };
        if fits && line.len() + chunk.len() <= max {
            line.extend_from_slice(chunk);
        } else {
            fits = false;
            line.clear();
        }
        let consumed = done.unwrap_or(buffer.len());
        reader.consume(consumed);
        if done.is_some() {
            return Some(fits);
        }
    }
}

/// The session's end of a pipe whose other end filters stdin and writes
/// stdout, with the tasks doing it spawned on the current runtime.
pub(crate) fn transport() -> DuplexStream {
    let (session, filter) = tokio::io::duplex(PIPE_BYTES);
    let (from_session, mut to_session) = tokio::io::split(filter);
    let (out, mut outgoing) = mpsc::channel::<Vec<u8>>(64);

    let answers = out.clone();
    tokio::spawn(async move {
        let mut stdin = BufReader::new(tokio::io::stdin());
        let mut line = Vec::new();
        while let Some(fits) = read_line(&mut stdin, &mut line, MAX_LINE_BYTES).await {
            let verdict = if fits {
                check(&line)
            } else {
                Line::Answer(error(Value::Null, PARSE_ERROR, "Parse error: the message is longer than 16 MiB"))
            };
            match verdict {
                Line::Skip => {}
                Line::Answer(answer) => {
                    if answers.send(answer.to_string().into_bytes()).await.is_err() {
                        break;
                    }
                }
                Line::Forward => {
                    line.push(b'\n');
                    if to_session.write_all(&line).await.is_err() {
                        break;
                    }
                }
            }
        }
        // The end of stdin ends the session.
        let _ = to_session.shutdown().await;
    });

    tokio::spawn(async move {
        let mut lines = BufReader::new(from_session);
        let mut line = Vec::new();
        while let Some(fits) = read_line(&mut lines, &mut line, usize::MAX).await {
            if fits && !line.is_empty() && out.send(std::mem::take(&mut line)).await.is_err() {
                break;
            }
        }
    });

    tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(mut message) = outgoing.recv().await {
            message.push(b'\n');
            if stdout.write_all(&message).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    session
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The id and error code of the answer a line gets (`None`: forwarded).
    type Answered = Option<(Value, i64)>;

    fn code(line: &[u8]) -> Answered {
        match check(line) {
            Line::Answer(answer) => Some((answer["id"].clone(), answer["error"]["code"].as_i64().unwrap())),
            _ => None,
        }
    }

    #[test]
    fn lines_the_session_cannot_parse_are_answered_and_the_rest_forwarded() {
        let deep = format!("{{\"jsonrpc\":\"2.0\",\"id\":3,\"value\":{}{}}}", "[".repeat(200), "]".repeat(200));
        // (line, the answer's id and code; None: forwarded)
        let cases: Vec<(Vec<u8>, Answered)> = vec![
            (br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.to_vec(), None),
            (br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#.to_vec(), None),
            (
                br#"{"jsonrpc":"2.0","id":2,"method":"x","params":{"t":"lone \ud800 here"}}"#.to_vec(),
                Some((Value::Null, -32_700)),
            ),
            (deep.into_bytes(), Some((Value::Null, -32_700))),
            (b"not json".to_vec(), Some((Value::Null, -32_700))),
            (b"{\"jsonrpc\":\"2.0\",\"id\":".to_vec(), Some((Value::Null, -32_700))),
            (b"{\"a\":\"\xff\"}".to_vec(), Some((Value::Null, -32_700))),
            (
                br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"fact_get","arguments":"pref.x"}}"#
                    .to_vec(),
                Some((json!(4), -32_602)),
            ),
            (
                br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","arguments":[1,2]}}"#.to_vec(),
                Some((json!("a"), -32_602)),
            ),
            (br#"{"jsonrpc":"2.0","id":6,"method":"tools/call"}"#.to_vec(), Some((json!(6), -32_602))),
            (br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{}}}"#.to_vec(), None),
            (br#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"x"}}"#.to_vec(), None),
        ];
        for (line, expected) in cases {
            assert_eq!(code(&line), expected, "{}", String::from_utf8_lossy(&line));
        }
        assert_eq!(check(b"  "), Line::Skip);
    }

    #[tokio::test]
    async fn an_overlong_line_is_skipped_to_its_newline_and_the_next_one_read() {
        let input = format!("{}\n{{\"next\":1}}\nlast", "x".repeat(100));
        let mut reader = BufReader::with_capacity(16, input.as_bytes());
        let mut line = Vec::new();
        assert_eq!(read_line(&mut reader, &mut line, 10).await, Some(false));
        assert_eq!(read_line(&mut reader, &mut line, 10).await, Some(true));
        assert_eq!(line, b"{\"next\":1}");
        assert_eq!(read_line(&mut reader, &mut line, 10).await, Some(true));
        assert_eq!(line, b"last");
        assert_eq!(read_line(&mut reader, &mut line, 10).await, None);
    }
}
