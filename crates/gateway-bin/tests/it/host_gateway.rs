//! Host hooks and MCP sessions answered by the home's resident gateway:
//! scripted Claude Code and kiro-cli sessions through the real binary and
//! a loopback LLM, a gateway killed mid-session, settings changed under a
//! running gateway, and the hook's recall beside the CLI's.

use std::io::Write as _;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cairn;
use crate::serve::{Gateway, PATIENCE, start_in, tiny_model};
use crate::serve_sessions::{FakeLlm, IDLE_PATIENCE};
use crate::support::transcript;

/// `cairn hook <args>` on `home` with `input` on stdin; `start` lets it
/// start a gateway when none answers.
fn hook_on(home: &Path, args: &[&str], input: &Value, start: bool) -> Output {
    let mut child = cairn()
        .arg("--home")
        .arg(home)
        .arg("hook")
        .args(args)
        .env_remove("CAIRN_HOME")
        .env("CAIRN_SKIP_MODEL_DOWNLOAD", "1")
        .env("CAIRN_HOST_START_GATEWAY", if start { "1" } else { "0" })
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input.to_string().as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

/// A hook answered by the running gateway (none is started).
fn hook(home: &Path, args: &[&str], input: &Value) -> Output {
    let output = hook_on(home, args, input, false);
    assert!(output.status.code().is_some(), "{args:?}");
    output
}

/// The context of a Claude Code answer (none: empty).
fn claude_context(output: &Output) -> String {
    if output.stdout.is_empty() {
        return String::new();
    }
    let answer: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&output.stdout)));
    answer["hookSpecificOutput"]["additionalContext"].as_str().unwrap_or_default().to_owned()
}

fn event(name: &str, session: &str) -> Value {
    json!({"session_id": session, "cwd": "/work/billing", "hook_event_name": name, "transcript_path": "/nonexistent"})
}

/// A gateway with the tiny model loaded, a loopback LLM, tool rules, and
/// the shortest idle time the settings accept.
fn pipeline_gateway(llm: &FakeLlm, models: &Path) -> Gateway {
    let home = tempfile::tempdir().unwrap();
    let config = json!({
        "llm": {"base_url": llm.base_url, "model": "scripted", "max_retries": 0},
        "memory": {"history_idle_hours": 0.01},
        "hooks": {"auto_deny_tools": ["Bash", "execute_bash"], "auto_approve_tools": ["Read"]},
    });
    std::fs::write(home.path().join("config.json"), config.to_string()).unwrap();
    let model = tiny_model(models);
    let gateway = start_in(home, &["--heartbeat-secs", "1", "--model-path", model.to_str().unwrap()], &[]);
    gateway.wait_for("/api/memory/embedding-status", "the model to load", |body| body["setup_step"] == "done");
    gateway
}

#[test]
fn a_scripted_claude_code_session_runs_the_whole_pipeline_through_the_gateway() {
    let llm = FakeLlm::start();
    let models = tempfile::tempdir().unwrap();
    let gateway = pipeline_gateway(&llm, models.path());
    let home = gateway.home().to_owned();
    let session = "cc-1";

    let start = hook(&home, &["claude-code", "SessionStart"], &event("SessionStart", session));
    assert!(start.status.success(), "{}", String::from_utf8_lossy(&start.stderr));
    for round in 0..35 {
        let mut prompt = event("UserPromptSubmit", session);
        prompt["prompt"] = json!(format!("round {round}: remember that we release the billing service on Tuesdays"));
        let answered = hook(&home, &["claude-code", "UserPromptSubmit"], &prompt);
        assert!(answered.status.success());
        let context = claude_context(&answered);
        assert!(!context.contains("keyword-only"), "the gateway answers with hybrid recall: {context}");
        let mut tool = event("PostToolUse", session);
        tool["tool_name"] = json!("Read");
        tool["tool_input"] = json!({"file_path": format!("/work/billing/release-{round}.md")});
        tool["tool_response"] = json!({"content": "release checklist"});
        let recorded = hook(&home, &["claude-code", "PostToolUse"], &tool);
        assert!(recorded.status.success() && recorded.stdout.is_empty());
        let mut stop = event("Stop", session);
        stop["last_assistant_message"] =
            json!(format!("Noted for round {round}: billing releases go out on Tuesdays."));
        assert!(hook(&home, &["claude-code", "Stop"], &stop).status.success());
    }

    // Tool decisions in Claude Code's protocol.
    let decide = |tool: &str| {
        let mut input = event("PreToolUse", session);
        input["tool_name"] = json!(tool);
        input["tool_input"] = json!({"command": "rm -rf build"});
        hook(&home, &["claude-code", "PreToolUse"], &input)
    };
    let denied: Value = serde_json::from_slice(&decide("Bash").stdout).unwrap();
    assert_eq!(denied["hookSpecificOutput"]["permissionDecision"], "deny", "{denied}");
    assert!(denied["hookSpecificOutput"]["permissionDecisionReason"].as_str().unwrap().contains("auto_deny_tools"));
    let approved: Value = serde_json::from_slice(&decide("Read").stdout).unwrap();
    assert_eq!(approved["hookSpecificOutput"]["permissionDecision"], "allow", "{approved}");
    let unruled = decide("Edit");
    assert!(unruled.status.success() && unruled.stdout.is_empty(), "no rule: the host asks as usual");

    let mut end = event("SessionEnd", session);
    end["reason"] = json!("logout");
    assert!(hook(&home, &["claude-code", "SessionEnd"], &end).status.success());
    let rows = transcript(&home, &format!("claude-code:{session}"));
    assert_eq!(rows.len(), 35 * 3 + 1, "every prompt, tool call and reply is recorded");
    assert!(rows.iter().any(|(role, text)| role == "assistant" && text.contains("Noted for round 34")));

    // The 30-message preferences consolidation ran for the host session,
    // off the hook's path, and the fact is in the next session's context.
    gateway.wait_for("/api/memory/semantic?prefix=pref.", "the consolidated fact", |body| {
        body["entries"].as_array().is_some_and(|entries| entries.iter().any(|entry| entry["key"] == "pref.deploy_day"))
    });
    let next = hook(&home, &["claude-code", "SessionStart"], &event("SessionStart", "cc-2"));
    let context = claude_context(&next);
    assert!(context.contains("pref.deploy_day"), "the stated fact is in the next SessionStart: {context}");
    assert!(!context.contains("OPTIONS:"), "Claude Code renders no OPTIONS buttons: {context}");

    // Idle: the history path writes the day's history, episodes and lessons.
    let started = Instant::now();
    let history = home.join("memory").join("history");
    while std::fs::read_dir(&history).map_or(0, Iterator::count) == 0 {
        assert!(started.elapsed() < IDLE_PATIENCE, "the idle session was not consolidated");
        std::thread::sleep(Duration::from_millis(200));
    }
    gateway.wait_for("/api/memory/lessons", "the session's lesson", |body| {
        body["lessons"].as_array().is_some_and(|lessons| !lessons.is_empty())
    });
}

#[test]
fn a_scripted_kiro_cli_session_runs_the_whole_pipeline_through_the_gateway() {
    let llm = FakeLlm::start();
    let models = tempfile::tempdir().unwrap();
    let gateway = pipeline_gateway(&llm, models.path());
    let home = gateway.home().to_owned();
    let kiro = |name: &str| json!({"hook_event_name": name, "cwd": "/work/billing", "session_id": "k-1"});

    let spawn = hook(&home, &["kiro-cli", "agentSpawn"], &kiro("agentSpawn"));
    assert!(spawn.status.success(), "{}", String::from_utf8_lossy(&spawn.stderr));
    for round in 0..35 {
        let mut prompt = kiro("userPromptSubmit");
        prompt["prompt"] = json!(format!("round {round}: we release the billing service on Tuesdays"));
        let answered = hook(&home, &["kiro-cli", "userPromptSubmit"], &prompt);
        assert!(answered.status.success());
        assert!(!String::from_utf8_lossy(&answered.stdout).contains("keyword-only"));
        let mut tool = kiro("postToolUse");
        tool["tool_name"] = json!("fs_read");
        tool["tool_input"] = json!({"path": "/work/billing/README.md"});
        tool["tool_response"] = json!({"success": true});
        assert!(hook(&home, &["kiro-cli", "postToolUse"], &tool).status.success());
        let mut stop = kiro("stop");
        stop["assistant_response"] = json!(format!("Round {round} noted: Tuesday releases."));
        assert!(hook(&home, &["kiro-cli", "stop"], &stop).status.success());
    }
    // kiro-cli blocks a tool with exit 2 and the reason on stderr.
    let mut bash = kiro("preToolUse");
    bash["tool_name"] = json!("execute_bash");
    bash["tool_input"] = json!({"command": "rm -rf build"});
    let blocked = hook(&home, &["kiro-cli", "preToolUse"], &bash);
    assert_eq!(blocked.status.code(), Some(2), "{}", String::from_utf8_lossy(&blocked.stderr));
    assert!(String::from_utf8_lossy(&blocked.stderr).contains("auto_deny_tools"));
    bash["tool_name"] = json!("fs_read");
    assert_eq!(hook(&home, &["kiro-cli", "preToolUse"], &bash).status.code(), Some(0));

    let rows = transcript(&home, "kiro-cli:k-1");
    assert_eq!(rows.len(), 35 * 3);
    assert!(rows.iter().any(|(role, text)| role == "assistant" && text == "Round 34 noted: Tuesday releases."));
    gateway.wait_for("/api/memory/semantic?prefix=pref.", "the consolidated fact", |body| {
        body["entries"].as_array().is_some_and(|entries| entries.iter().any(|entry| entry["key"] == "pref.deploy_day"))
    });
    let next = hook(&home, &["kiro-cli", "agentSpawn"], &kiro("agentSpawn"));
    let context = String::from_utf8(next.stdout).unwrap();
    assert!(context.contains("pref.deploy_day"), "{context}");
    let started = Instant::now();
    let history = home.join("memory").join("history");
    while std::fs::read_dir(&history).map_or(0, Iterator::count) == 0 {
        assert!(started.elapsed() < IDLE_PATIENCE, "the idle kiro-cli session was not consolidated");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The pid of the gateway holding `home`'s instance lock.
fn gateway_pid(home: &Path) -> Option<i32> {
    std::fs::read_to_string(home.join("serve.lock")).ok()?.trim().parse().ok()
}

/// Waits until a gateway other than `not` answers for `home`.
fn wait_for_gateway(home: &Path, not: Option<i32>) -> i32 {
    let started = Instant::now();
    loop {
        if let Some(pid) = gateway_pid(home).filter(|pid| Some(*pid) != not)
            && let Ok(address) = std::fs::read_to_string(home.join("serve.address"))
            && std::net::TcpStream::connect(address.trim()).is_ok()
        {
            return pid;
        }
        assert!(started.elapsed() < PATIENCE, "no gateway came up for {}", home.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn kill(pid: i32, signal: rustix::process::Signal) {
    let _ = rustix::process::kill_process(rustix::process::Pid::from_raw(pid).unwrap(), signal);
}

#[test]
fn a_hook_starts_the_gateway_and_a_killed_gateway_loses_nothing_and_comes_back() {
    let home = tempfile::tempdir().unwrap();
    // The gateway must not take the default port; autostart picks a free one.
    let record = |index: usize| {
        let mut tool = event("PostToolUse", "kill-1");
        tool["tool_name"] = json!("Read");
        tool["tool_input"] = json!({"file_path": format!("/src/{index}.rs")});
        tool["tool_response"] = json!("ok");
        let output = hook_on(home.path(), &["claude-code", "PostToolUse"], &tool, true);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    };
    // No gateway: the first hook answers itself and starts one.
    record(0);
    let first = wait_for_gateway(home.path(), None);
    for index in 1..20 {
        record(index);
    }
    kill(first, rustix::process::Signal::KILL);
    // The next hooks answer without it (the stale address refuses) and a
    // new gateway is started.
    for index in 20..40 {
        record(index);
    }
    let second = wait_for_gateway(home.path(), Some(first));
    for index in 40..60 {
        record(index);
    }
    let rows = transcript(home.path(), "claude-code:kill-1");
    let files: Vec<String> =
        rows.iter().map(|(_, text)| text.clone()).filter(|text| text.starts_with("[Read result]")).collect();
    assert_eq!(files.len(), 60, "every recorded tool call survived the crash: {rows:?}");
    let context = {
        let mut prompt = event("UserPromptSubmit", "kill-1");
        prompt["prompt"] = json!("what did we read?");
        claude_context(&hook_on(home.path(), &["claude-code", "UserPromptSubmit"], &prompt, true))
    };
    assert!(!context.contains("did not answer"), "the new gateway answers: {context}");
    kill(second, rustix::process::Signal::TERM);
}

#[test]
fn a_hung_gateway_never_holds_the_hook_past_its_deadline() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.json"), json!({"host": {"record_deadline_ms": 300}}).to_string()).unwrap();
    // A listener that accepts and never answers, recorded as the gateway.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std::fs::write(home.path().join("serve.address"), format!("{}\n", listener.local_addr().unwrap())).unwrap();
    std::fs::write(home.path().join("server.token"), "a".repeat(64)).unwrap();
    let mut tool = event("PostToolUse", "hung-1");
    tool["tool_name"] = json!("Read");
    tool["tool_input"] = json!({});
    let output = hook(home.path(), &["claude-code", "PostToolUse"], &tool);
    assert!(output.status.success());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("did not answer within the 300 ms deadline"), "{stderr}");
    drop(listener);
}

#[test]
fn a_denied_tool_is_refused_by_the_fallback_too() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.json"), json!({"hooks": {"auto_deny_tools": ["Bash"]}}).to_string())
        .unwrap();
    let mut input = event("PreToolUse", "f-1");
    input["tool_name"] = json!("Bash");
    let output = hook(home.path(), &["claude-code", "PreToolUse"], &input);
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "deny");
    let kiro = json!({"hook_event_name": "preToolUse", "cwd": "/tmp", "tool_name": "Bash", "tool_input": {}});
    assert_eq!(hook(home.path(), &["kiro-cli", "preToolUse"], &kiro).status.code(), Some(2));
}

/// Turns with distinct topics, for the parity check.
fn turns() -> Vec<Value> {
    let subjects =
        ["the billing service", "the search index", "Maria's onboarding", "the hiking trip", "the CI runner"];
    let facts = [
        "moved to Tuesdays",
        "failed on the staging cluster",
        "needs a new owner",
        "was planned for May",
        "uses Postgres 16",
    ];
    let mut rows = Vec::new();
    for (index, subject) in subjects.iter().enumerate() {
        for (offset, fact) in facts.iter().enumerate() {
            for repeat in 0..8 {
                rows.push(json!({
                    "text": format!("Note {repeat} about {subject}: it {fact}, said person {}.", index * 7 + offset),
                    "created_at": format!("2026-0{}-1{}T10:00:00Z", 1 + (index + repeat) % 9, offset),
                }));
            }
        }
    }
    rows
}

/// The fragments of an `[Episodic Memory]` block, in order, without the
/// dates the session context shows before each.
fn fragments(block: &str) -> Vec<String> {
    block
        .lines()
        .filter_map(|line| line.strip_prefix("- "))
        .map(|line| match line.strip_prefix('(').and_then(|rest| rest.split_once(") ")) {
            Some((date, text)) if date.len() == 10 && date.as_bytes()[4] == b'-' => text.to_owned(),
            _ => line.to_owned(),
        })
        .collect()
}

#[test]
fn the_hooks_episodic_block_equals_memory_search_context_for_100_prompts() {
    let models = tempfile::tempdir().unwrap();
    let model = tiny_model(models.path());
    let home = tempfile::tempdir().unwrap();
    let rows = home.path().join("turns.jsonl");
    std::fs::write(&rows, turns().iter().map(Value::to_string).collect::<Vec<_>>().join("\n")).unwrap();
    let imported = cairn()
        .arg("--home")
        .arg(home.path())
        .args(["memory", "import-episodic"])
        .arg(&rows)
        .env("CAIRN_EMBED_MODEL_PATH", &model)
        .output()
        .unwrap();
    assert!(imported.status.success(), "{}", String::from_utf8_lossy(&imported.stderr));
    let gateway = start_in(home, &["--model-path", model.to_str().unwrap(), "--heartbeat-secs", "3600"], &[]);
    gateway.wait_for("/api/memory/embedding-status", "the model to load", |body| body["setup_step"] == "done");
    let home = gateway.home().to_owned();
    let subjects = ["billing", "search index", "onboarding", "hiking", "CI runner", "Postgres", "staging", "owner"];
    let prompts: Vec<String> =
        (0..100).map(|index| format!("what happened with {} ({index})?", subjects[index % subjects.len()])).collect();
    let queries = home.join("queries.jsonl");
    std::fs::write(
        &queries,
        prompts.iter().map(|prompt| json!({"query": prompt}).to_string()).collect::<Vec<_>>().join("\n"),
    )
    .unwrap();
    let searched = cairn()
        .arg("--home")
        .arg(&home)
        .args(["memory", "search", "--context", "--queries"])
        .arg(&queries)
        .env("CAIRN_EMBED_MODEL_PATH", &model)
        .output()
        .unwrap();
    assert!(searched.status.success(), "{}", String::from_utf8_lossy(&searched.stderr));
    let blocks: Vec<String> = String::from_utf8(searched.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["block"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(blocks.len(), 100);
    let mut nonempty = 0;
    for (prompt, block) in prompts.iter().zip(&blocks) {
        let mut input = event("UserPromptSubmit", "parity");
        input["prompt"] = json!(prompt);
        let context = claude_context(&hook(&home, &["claude-code", "UserPromptSubmit"], &input));
        let episodic = context.split("\n\n").find(|part| part.starts_with("[Episodic Memory]")).unwrap_or_default();
        assert_eq!(fragments(episodic), fragments(block), "prompt {prompt:?}");
        nonempty += usize::from(!block.is_empty());
    }
    assert!(nonempty >= 50, "most prompts recall something ({nonempty} of 100)");
}

fn config(home: &Path, args: &[&str]) -> Output {
    let args: Vec<&str> = std::iter::once("config").chain(args.iter().copied()).collect();
    crate::settings::run(home, &args)
}

#[test]
fn config_changes_reach_the_running_gateway_without_a_restart() {
    let gateway = crate::serve::start(&["--heartbeat-secs", "3600"]);
    let home = gateway.home().to_owned();
    crate::agents::seed_scoped_agents(&home);
    let mut prompt = event("UserPromptSubmit", "live-1");
    prompt["prompt"] = json!("ship it");
    let mut bash = event("PreToolUse", "live-1");
    bash["tool_name"] = json!("Bash");
    let ask = || {
        (
            claude_context(&hook(&home, &["claude-code", "UserPromptSubmit"], &prompt)),
            hook(&home, &["claude-code", "PreToolUse"], &bash).stdout,
        )
    };
    let (context, decision) = ask();
    assert!(context.contains("Run the deploy-db playbook."), "the skill triggers: {context}");
    assert!(decision.is_empty(), "no tool rule yet");

    // (key, value): a hooks.*, a skills.* and a memory.* key, each applied live.
    for (key, value) in
        [("hooks.auto_deny_tools", r#"["Bash"]"#), ("skills.max_triggered", "0"), ("memory.history_idle_hours", "7.5")]
    {
        let set = config(&home, &["set", key, value]);
        assert!(set.status.success(), "{}", String::from_utf8_lossy(&set.stderr));
        let said = String::from_utf8(set.stderr).unwrap();
        // The hooks section is one setting; the others are named by key.
        let named = if key.starts_with("hooks.") { "hooks" } else { key };
        assert!(said.contains("the running gateway applied") && said.contains(named), "{key}: {said}");
    }
    let (context, decision) = ask();
    assert!(!context.contains("Run the deploy-db playbook."), "skills.max_triggered 0 triggers none: {context}");
    let decision: Value = serde_json::from_slice(&decision).unwrap();
    assert_eq!(decision["hookSpecificOutput"]["permissionDecision"], "deny", "{decision}");
    assert_eq!(gateway.get("/api/health").body["settings"]["history_idle_hours"], 7.5);

    // A start-only key is reported, not silently ignored.
    let port = config(&home, &["set", "server.max_body_bytes", "65536"]);
    let said = String::from_utf8(port.stderr).unwrap();
    assert!(said.contains("next start") && said.contains("server.max_body_bytes"), "{said}");

    // An edit of config.json by hand is picked up too.
    let path = home.join("config.json");
    let mut file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    file["hooks"]["auto_deny_tools"] = json!([]);
    std::fs::write(&path, file.to_string()).unwrap();
    let started = Instant::now();
    while !hook(&home, &["claude-code", "PreToolUse"], &bash).stdout.is_empty() {
        assert!(started.elapsed() < PATIENCE, "the edited config.json was not picked up");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn session_start_is_the_same_text_while_memory_is_unchanged() {
    let gateway = crate::serve::start(&["--heartbeat-secs", "3600"]);
    let home = gateway.home().to_owned();
    let fact = gateway.send("PUT", "/api/memory/semantic", &json!({"key": "pref.editor", "value": "helix"}));
    assert_eq!(fact.status, 200, "{}", fact.body);
    let start = |session: &str| hook(&home, &["claude-code", "SessionStart"], &event("SessionStart", session)).stdout;
    let first = start("same-1");
    assert!(String::from_utf8_lossy(&first).contains("pref.editor"));
    // Seconds later, another session: nothing in it may carry a time of day.
    std::thread::sleep(Duration::from_millis(1_100));
    assert_eq!(start("same-2"), first, "a host may cache the session context");
    let changed = gateway.send("PUT", "/api/memory/semantic", &json!({"key": "pref.editor", "value": "zed"}));
    assert_eq!(changed.status, 200, "{}", changed.body);
    assert_ne!(start("same-3"), first, "a change of memory changes it");
}
