//! A minimal agent host on Cairn: an OpenAI-compatible chat API for the
//! model, Cairn for the context of every turn, the config hooks deciding
//! each tool call, and consolidation of the finished session into memory.
//!
//! ```sh
//! cargo run --example agent_loop -- --base-url http://127.0.0.1:8080/v1 --model my-model "first message" "second"
//! cargo run --example agent_loop        # against a scripted loopback model, as CI runs it
//! ```
//!
//! The one tool offered is `execute_bash`; the hooks deny it, so the host
//! answers the model with the refusal instead of running anything.

use std::sync::Arc;
use std::time::Duration;

use cairn_host::{Cairn, Config, ConsolidatorConfig, HooksConfig, Summarizer, SummarizerError, ToolDecision};
use cairn_memory_core::{ToolCall, TranscriptMessage};
use serde_json::{Value, json};

/// Chat completions over HTTP.
struct ChatApi {
    base_url: String,
    model: String,
}

impl ChatApi {
    fn complete(&self, messages: &[Value], tools: Option<&Value>) -> Result<Value, String> {
        let mut body = json!({"model": self.model, "messages": messages});
        if let Some(tools) = tools {
            body["tools"] = tools.clone();
        }
        let mut response = ureq::post(format!("{}/chat/completions", self.base_url))
            .send_json(&body)
            .map_err(|error| format!("chat completion failed: {error}"))?;
        let answer: Value = response.body_mut().read_json().map_err(|error| format!("unreadable answer: {error}"))?;
        answer["choices"][0]["message"]
            .as_object()
            .map(|message| Value::Object(message.clone()))
            .ok_or_else(|| format!("answer without a message: {answer}"))
    }
}

/// Consolidation asks the same model.
impl Summarizer for ChatApi {
    fn summarize(&self, prompt: &str) -> Result<String, SummarizerError> {
        let message = self.complete(&[json!({"role": "user", "content": prompt})], None).map_err(SummarizerError)?;
        Ok(message["content"].as_str().unwrap_or_default().to_owned())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut flag = |name: &str| -> Option<String> {
        let at = args.iter().position(|arg| arg == name)?;
        args.remove(at);
        (at < args.len()).then(|| args.remove(at))
    };
    let base_url = flag("--base-url");
    let model = flag("--model").unwrap_or_else(|| "scripted".to_owned());
    let scripted = base_url.is_none().then(scripted_model::start);
    let base_url = base_url.or_else(|| scripted.as_ref().map(|model| model.base_url.clone())).unwrap_or_default();
    let user_messages = if args.is_empty() {
        vec!["Our billing service now runs on Postgres 16.".to_owned(), "Please run the migration script.".to_owned()]
    } else {
        args
    };

    let home = tempfile::tempdir()?;
    let api = Arc::new(ChatApi { base_url, model });
    let hooks = HooksConfig::from_json_str(r#"{"auto_deny_tools": ["execute_bash"]}"#)?;
    // Idle at once: the session is consolidated as soon as the loop ends.
    let consolidation = ConsolidatorConfig { idle: Duration::ZERO, ..ConsolidatorConfig::default() };
    let cairn = Cairn::open(Config::new(home.path()).hooks(hooks).consolidation(api.clone(), consolidation))?;
    let tools = json!([{"type": "function", "function": {
        "name": "execute_bash", "description": "Run a shell command",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]);

    let session = "example-session";
    let system = cairn.session_context(session, &user_messages[0])?.text;
    let mut messages = vec![json!({"role": "system", "content": system})];
    let mut refused = 0;
    for user in &user_messages {
        let context = cairn.message_context(session, user)?;
        messages.push(json!({"role": "user", "content": context.text}));
        cairn.record_turn(session, "user", user)?;
        loop {
            let reply = api.complete(&messages, Some(&tools))?;
            messages.push(reply.clone());
            let calls = reply["tool_calls"].as_array().cloned().unwrap_or_default();
            if calls.is_empty() {
                let text = reply["content"].as_str().unwrap_or_default();
                println!("user: {user}\nassistant: {text}\n");
                cairn.record_turn(session, "assistant", text)?;
                break;
            }
            for call in calls {
                let name = call["function"]["name"].as_str().unwrap_or_default();
                let input: Value =
                    serde_json::from_str(call["function"]["arguments"].as_str().unwrap_or("{}")).unwrap_or_default();
                let result = match cairn.tool_decision(name) {
                    ToolDecision::Deny { pattern } => {
                        refused += 1;
                        format!("refused: the tool matches the deny pattern {pattern:?}")
                    }
                    _ => format!("this example runs no tools; {name} was not run"),
                };
                println!("tool call {name} {input} -> {result}");
                let message = TranscriptMessage::new("assistant", format!("called {name}"))
                    .with_tool_calls(vec![ToolCall::new(name, input)]);
                cairn.record_message(session, message)?;
                messages.push(json!({"role": "tool", "tool_call_id": call["id"], "content": result}));
            }
        }
    }

    let reports = cairn.consolidate_idle();
    for (session, report) in &reports {
        match report {
            Ok(report) => println!(
                "consolidated {session}: {} episodic, {} lessons, history appended: {}",
                report.counts.episodic_written, report.counts.lessons_written, report.history_appended
            ),
            Err(error) => println!("consolidating {session} failed: {error}"),
        }
    }
    let recalled = cairn.search("postgres billing", 3)?;
    println!("recalled after the session: {:?}", recalled.iter().map(|hit| &hit.text).collect::<Vec<_>>());

    if scripted.is_some() {
        // The scripted model asks for the denied tool once and its history
        // reply carries one fragment and one lesson.
        assert_eq!(refused, 1, "the hooks refused the shell call");
        let report = reports.iter().find_map(|(_, report)| report.as_ref().ok()).expect("one session consolidated");
        assert_eq!((report.counts.episodic_written, report.counts.lessons_written), (1, 1), "{report:?}");
        assert!(recalled.iter().any(|hit| hit.text.contains("Postgres 16")), "{recalled:?}");
    }
    Ok(())
}

/// A loopback stand-in for an OpenAI-compatible server, so the example runs
/// offline: it asks for `execute_bash` when told to run something, answers
/// the consolidation prompts with fixed JSON, and otherwise acknowledges.
mod scripted_model {
    use serde_json::{Value, json};

    pub struct Scripted {
        pub base_url: String,
    }

    const HISTORY: &str = r#"{"history": "The user said billing runs on Postgres 16 and asked for a migration run, which was refused.",
 "episodic": [{"text": "The billing service runs on Postgres 16 since this week.", "importance": 0.7, "tags": ["billing"],
               "evidence": {"from": 0, "to": 0, "quote": "billing service now runs on Postgres 16"}}],
 "lessons": [{"rule": "Ask before running migration scripts", "not": "Run migrations unasked", "category": "preference",
              "evidence": {"from": 2, "to": 4, "quote": "Please run the migration script."}}]}"#;

    pub fn start() -> Scripted {
        let server = tiny_http::Server::http("127.0.0.1:0").expect("a loopback port");
        let base_url = format!("http://{}/v1", server.server_addr().to_ip().expect("an IP address"));
        std::thread::spawn(move || {
            for mut request in server.incoming_requests() {
                let mut body = String::new();
                let _ = request.as_reader().read_to_string(&mut body);
                let body: Value = serde_json::from_str(&body).unwrap_or_default();
                let message = reply(&body);
                let answer = json!({"choices": [{"message": message}]}).to_string();
                let header = tiny_http::Header::from_bytes("Content-Type", "application/json").expect("a header");
                let _ = request.respond(tiny_http::Response::from_string(answer).with_header(header));
            }
        });
        Scripted { base_url }
    }

    fn reply(body: &Value) -> Value {
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let first = messages.first().and_then(|message| message["content"].as_str()).unwrap_or_default();
        let last = messages.last().cloned().unwrap_or_default();
        if first.starts_with("You summarise a finished conversation") {
            return json!({"role": "assistant", "content": HISTORY});
        }
        if first.starts_with("You maintain a user's long-term memory") {
            return json!({"role": "assistant", "content": r#"{"semantic": []}"#});
        }
        if last["role"] == "tool" {
            return json!({"role": "assistant", "content": "I could not run it: the shell is not allowed here."});
        }
        let text = last["content"].as_str().unwrap_or_default();
        if text.contains("run the migration") {
            let arguments = json!({"command": "./migrate.sh"}).to_string();
            return json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call-1", "type": "function",
                "function": {"name": "execute_bash", "arguments": arguments}}]});
        }
        json!({"role": "assistant", "content": "Noted."})
    }
}
