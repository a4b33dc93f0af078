//! `cairn hook <host> <event>` fed hook input shaped as Claude Code and
//! kiro-cli document it; output shape, caps and the transcript written,
//! answered by the hook's own in-process fallback (no gateway runs and
//! none is started; `host_gateway.rs` covers the gateway path), and
//! `cairn host install|uninstall`.

use std::io::Write as _;
use std::path::Path;
use std::process::{Output, Stdio};

use serde_json::{Value, json};

use crate::cairn;
use crate::support::run_hook;

fn hook(home: &Path, host: &str, event: &str, input: &str) -> Output {
    hook_with(home, &[host, event], input)
}

/// `cairn hook <args>` with `input` on stdin.
fn hook_with(home: &Path, args: &[&str], input: &str) -> Output {
    // These tests drive the in-process fallback; host_gateway.rs drives the gateway.
    run_hook(home, args, input, &[("CAIRN_HOST_START_GATEWAY", "0")])
}

fn cli(home: &Path, args: &[&str]) -> Output {
    cairn().arg("--home").arg(home).args(args).env("CAIRN_SKIP_MODEL_DOWNLOAD", "1").output().unwrap()
}

fn seed(home: &Path) {
    assert!(cli(home, &["memory", "lessons", "add", "always run the test suite before pushing"]).status.success());
    assert!(cli(home, &["memory", "semantic", "set", "pref.editor", "helix"]).status.success());
    assert!(
        cli(home, &["memory", "episodic", "add", "The flaky integration test was fixed by pinning the port"])
            .status
            .success()
    );
}

fn common(event: &str, session: &str) -> Value {
    json!({
        "session_id": session,
        "transcript_path": "/nonexistent/transcript.jsonl",
        "cwd": "/tmp/project",
        "permission_mode": "default",
        "hook_event_name": event,
    })
}

fn transcript(home: &Path, session: &str) -> Vec<Value> {
    let db = home.join("memory.db");
    let connection = rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut statement = connection
        .prepare("SELECT role, content, tool_calls FROM session_transcripts WHERE session_key = ?1 ORDER BY seq")
        .unwrap();
    statement
        .query_map([session], |row| {
            Ok(json!({
                "role": row.get::<_, String>(0)?,
                "content": row.get::<_, String>(1)?,
                "tool_calls": row.get::<_, Option<String>>(2)?,
            }))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn claude_code_session_start_answers_additional_context() {
    let home = tempfile::tempdir().unwrap();
    seed(home.path());
    let mut input = common("SessionStart", "s-1");
    input["source"] = json!("startup");
    let output = hook(home.path(), "claude-code", "SessionStart", &input.to_string());
    assert!(output.status.success());
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(answer["hookSpecificOutput"]["hookEventName"], "SessionStart");
    let context = answer["hookSpecificOutput"]["additionalContext"].as_str().unwrap();
    assert!(context.contains("always run the test suite before pushing"), "{context}");
    assert!(context.contains("pref.editor"), "{context}");
    assert!(context.chars().count() <= 10_000);
}

#[test]
fn claude_code_user_prompt_submit_answers_message_context_and_records_the_prompt() {
    let home = tempfile::tempdir().unwrap();
    seed(home.path());
    let mut input = common("UserPromptSubmit", "s-2");
    input["prompt"] = json!("why was the integration test flaky?");
    let output = hook(home.path(), "claude-code", "UserPromptSubmit", &input.to_string());
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(answer["hookSpecificOutput"]["hookEventName"], "UserPromptSubmit");
    let context = answer["hookSpecificOutput"]["additionalContext"].as_str().unwrap();
    assert!(context.contains("pinning the port"), "episodic memory reaches the message: {context}");
    assert!(!context.contains("why was the integration test flaky?"), "the prompt is not echoed: {context}");
    let rows = transcript(home.path(), "claude-code:s-2");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["role"], "user");
    assert_eq!(rows[0]["content"], "why was the integration test flaky?");
}

#[test]
fn claude_code_tool_stop_and_end_append_to_the_transcript() {
    let home = tempfile::tempdir().unwrap();
    let mut tool = common("PostToolUse", "s-3");
    tool["tool_name"] = json!("Bash");
    tool["tool_input"] = json!({"command": "cargo test", "description": "run the tests"});
    tool["tool_response"] = json!({"stdout": "test result: ok. 12 passed", "stderr": "", "interrupted": false});
    tool["tool_use_id"] = json!("toolu_01");
    let output = hook(home.path(), "claude-code", "PostToolUse", &tool.to_string());
    assert!(output.status.success());
    assert!(output.stdout.is_empty(), "PostToolUse answers nothing");

    let transcript_file = home.path().join("claude.jsonl");
    std::fs::write(
        &transcript_file,
        [
            json!({"type": "user", "message": {"role": "user", "content": "run the tests"}}),
            json!({"type": "assistant", "message": {"role": "assistant", "content": [
                {"type": "text", "text": "All 12 tests pass."}]}}),
        ]
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n"),
    )
    .unwrap();
    let mut stop = common("Stop", "s-3");
    stop["transcript_path"] = json!(transcript_file);
    stop["stop_hook_active"] = json!(false);
    assert!(hook(home.path(), "claude-code", "Stop", &stop.to_string()).status.success());
    let mut end = common("SessionEnd", "s-3");
    end["reason"] = json!("logout");
    assert!(hook(home.path(), "claude-code", "SessionEnd", &end.to_string()).status.success());

    let rows = transcript(home.path(), "claude-code:s-3");
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert_eq!(rows[0]["role"], "assistant");
    assert!(rows[0]["content"].as_str().unwrap().contains("12 passed"));
    assert!(rows[0]["tool_calls"].as_str().unwrap().contains("cargo test"));
    assert_eq!(rows[1]["content"], "All 12 tests pass.");
    assert!(rows[2]["content"].as_str().unwrap().contains("logout"));
}

#[test]
fn claude_code_output_is_capped_and_keeps_the_lessons() {
    let home = tempfile::tempdir().unwrap();
    assert!(cli(home.path(), &["memory", "lessons", "add", "never force-push to main"]).status.success());
    for index in 0..40 {
        let value = format!("a long preference value number {index} {}", "detail ".repeat(70));
        assert!(
            cli(home.path(), &["memory", "semantic", "set", &format!("pref.long{index}"), &value]).status.success()
        );
    }
    let output = hook(home.path(), "claude-code", "SessionStart", &common("SessionStart", "s-4").to_string());
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    let context = answer["hookSpecificOutput"]["additionalContext"].as_str().unwrap();
    assert!(context.chars().count() <= 10_000, "{}", context.chars().count());
    assert!(context.contains("never force-push to main"), "the lessons survive the cap");
}

#[test]
fn kiro_cli_spawn_and_prompt_print_plain_context() {
    let home = tempfile::tempdir().unwrap();
    seed(home.path());
    let spawn = hook(
        home.path(),
        "kiro-cli",
        "agentSpawn",
        &json!({"hook_event_name": "agentSpawn", "cwd": "/tmp"}).to_string(),
    );
    assert!(spawn.status.success());
    let text = String::from_utf8(spawn.stdout).unwrap();
    assert!(text.contains("always run the test suite before pushing"), "{text}");
    assert!(text.len() <= 10 * 1024);
    assert!(serde_json::from_str::<Value>(&text).is_err(), "kiro-cli gets plain text");
    let prompt = hook(
        home.path(),
        "kiro-cli",
        "userPromptSubmit",
        &json!({"hook_event_name": "userPromptSubmit", "cwd": "/tmp", "prompt": "the flaky integration test"})
            .to_string(),
    );
    assert!(prompt.status.success());
    assert!(String::from_utf8(prompt.stdout).unwrap().contains("pinning the port"));
}

#[test]
fn kiro_cli_hooks_scope_the_context_to_the_named_agent() {
    let home = tempfile::tempdir().unwrap();
    let agents = crate::agents::seed_scoped_agents(home.path());
    std::fs::write(home.path().join("config.json"), json!({"agent": {"agents_dir": agents}}).to_string()).unwrap();
    let spawn = json!({"hook_event_name": "agentSpawn", "cwd": "/tmp"}).to_string();
    let prompt = json!({"hook_event_name": "userPromptSubmit", "cwd": "/tmp", "prompt": "ship it"}).to_string();
    // (agent flag, skills in the spawn catalog, skills the prompt triggers)
    let cases: &[(Option<&str>, &[&str], &[&str])] = &[
        (None, &["deploy-db", "deploy-web"], &["deploy-db", "deploy-web"]),
        (Some("web"), &["deploy-web"], &[]),
        (Some("bare"), &[], &[]),
    ];
    for (agent, catalog, triggered) in cases {
        let args = |event: &'static str| {
            let mut args = vec!["kiro-cli", event];
            if let Some(agent) = agent {
                args.extend(["--agent", agent]);
            }
            args
        };
        let listed = hook_with(home.path(), &args("agentSpawn"), &spawn);
        assert!(listed.status.success());
        let listed = String::from_utf8(listed.stdout).unwrap();
        let fired = hook_with(home.path(), &args("userPromptSubmit"), &prompt);
        assert!(fired.status.success());
        let fired = String::from_utf8(fired.stdout).unwrap();
        for name in ["deploy-db", "deploy-web"] {
            assert_eq!(listed.contains(name), catalog.contains(&name), "agent {agent:?} catalog: {listed}");
            let body = format!("Run the {name} playbook.");
            assert_eq!(fired.contains(&body), triggered.contains(&name), "agent {agent:?} triggers: {fired}");
        }
        if *agent == Some("web") {
            assert!(listed.contains("Ship the web tier."), "the agent's prompt: {listed}");
        }
    }
    // An unknown agent: no context, one stderr line, exit 0 (never blocks the prompt).
    let unknown = hook_with(home.path(), &["kiro-cli", "userPromptSubmit", "--agent", "nobody"], &prompt);
    assert!(unknown.status.success());
    assert!(unknown.stdout.is_empty(), "{}", String::from_utf8_lossy(&unknown.stdout));
    let stderr = String::from_utf8(unknown.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("nobody"), "{stderr}");
}

#[test]
fn bad_or_unknown_input_exits_zero_with_no_context_and_one_stderr_line() {
    let home = tempfile::tempdir().unwrap();
    for (host, event, input) in [
        ("claude-code", "SessionStart", "not json"),
        ("claude-code", "UserPromptSubmit", "[1, 2]"),
        ("claude-code", "UserPromptSubmit", "{\"session_id\": \"s\"}"),
        ("claude-code", "PostToolUse", "{\"session_id\": \"s\"}"),
        ("claude-code", "Notification", "{\"session_id\": \"s\"}"),
        ("kiro-cli", "preToolUse", "{}"),
        ("kiro-cli", "userPromptSubmit", ""),
    ] {
        let output = hook(home.path(), host, event, input);
        assert!(output.status.success(), "{host} {event} {input}");
        assert!(output.stdout.is_empty(), "{host} {event} {input}: {}", String::from_utf8_lossy(&output.stdout));
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{host} {event} {input}: {stderr}");
        assert!(stderr.starts_with("cairn hook: "), "{stderr}");
    }
}

fn host(home: &Path, user_home: &Path, args: &[&str]) -> Output {
    cairn()
        .arg("--home")
        .arg(home)
        .arg("host")
        .args(args)
        .env("HOME", user_home)
        .env("CAIRN_SKIP_MODEL_DOWNLOAD", "1")
        .output()
        .unwrap()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn claude_code_project_install_merges_backs_up_and_uninstalls_exactly() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let settings_path = project.path().join(".claude/settings.json");
    std::fs::create_dir_all(settings_path.parent().unwrap()).unwrap();
    let original = json!({
        "permissions": {"allow": ["Bash(git status)"]},
        "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint.sh"}]}],
                  "Stop": [{"hooks": [{"type": "command", "command": "notify.sh"}]}]}
    });
    std::fs::write(&settings_path, serde_json::to_string_pretty(&original).unwrap()).unwrap();
    let project_dir = project.path().to_str().unwrap();

    let dry = host(home.path(), home.path(), &["install", "claude-code", "--project", project_dir, "--dry-run"]);
    assert!(dry.status.success(), "{}", String::from_utf8_lossy(&dry.stderr));
    let diff = String::from_utf8(dry.stdout).unwrap();
    assert!(diff.contains("+++ ") && diff.contains("+") && diff.contains("hook claude-code SessionStart"), "{diff}");
    assert_eq!(read_json(&settings_path), original, "a dry run writes nothing");
    assert!(!project.path().join(".mcp.json").exists());

    let installed = host(home.path(), home.path(), &["install", "claude-code", "--project", project_dir]);
    assert!(installed.status.success(), "{}", String::from_utf8_lossy(&installed.stderr));
    let settings = read_json(&settings_path);
    assert_eq!(settings["permissions"], original["permissions"]);
    let pre = settings["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(pre[0], original["hooks"]["PreToolUse"][0], "the user's own PreToolUse hook stays first");
    assert_eq!(pre.len(), 2, "{pre:?}");
    assert_eq!(pre[1]["matcher"], "*", "Cairn decides every tool: {pre:?}");
    let stop = settings["hooks"]["Stop"].as_array().unwrap();
    assert_eq!(stop.len(), 2, "merged beside the user's own Stop hook");
    for event in ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd"] {
        let text = settings["hooks"][event].to_string();
        assert!(text.contains(&format!("hook claude-code {event}")), "{event}: {text}");
    }
    assert_eq!(settings["hooks"]["PostToolUse"][0]["matcher"], "*");
    let backup = project.path().join(".claude/settings.json.cairn.bak");
    assert_eq!(read_json(&backup), original, "the previous file is kept");
    let mcp = read_json(&project.path().join(".mcp.json"));
    assert_eq!(mcp["mcpServers"]["cairn"]["args"][2], "mcp");
    assert_eq!(
        mcp["mcpServers"]["cairn"]["command"].as_str().unwrap(),
        std::fs::canonicalize(env!("CARGO_BIN_EXE_cairn")).unwrap().to_str().unwrap()
    );

    // Installing twice adds nothing.
    let again = host(home.path(), home.path(), &["install", "claude-code", "--project", project_dir]);
    assert!(String::from_utf8(again.stdout).unwrap().lines().all(|line| line.starts_with("unchanged ")));
    assert_eq!(read_json(&settings_path), settings);

    // The installed command is a working hook.
    let command = settings["hooks"]["SessionStart"][0]["hooks"][0]["command"].as_str().unwrap().to_owned();
    assert!(cli(home.path(), &["memory", "lessons", "add", "keep commits small"]).status.success());
    let mut child = std::process::Command::new("sh")
        .args(["-c", &command])
        .env("CAIRN_SKIP_MODEL_DOWNLOAD", "1")
        .env("CAIRN_HOST_START_GATEWAY", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(common("SessionStart", "s-9").to_string().as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(answer["hookSpecificOutput"]["additionalContext"].as_str().unwrap().contains("keep commits small"));

    let removed = host(home.path(), home.path(), &["uninstall", "claude-code", "--project", project_dir]);
    assert!(removed.status.success());
    assert_eq!(read_json(&settings_path), original, "uninstall removes exactly what install added");
    assert!(read_json(&project.path().join(".mcp.json")).get("mcpServers").is_none());
}

#[test]
fn claude_code_user_install_keeps_the_rest_of_claude_json_and_refuses_broken_files() {
    let home = tempfile::tempdir().unwrap();
    let user = tempfile::tempdir().unwrap();
    let state = user.path().join(".claude.json");
    std::fs::write(&state, r#"{"numStartups": 12, "mcpServers": {"other": {"command": "other-server"}}}"#).unwrap();
    let installed = host(home.path(), user.path(), &["install", "claude-code"]);
    assert!(installed.status.success(), "{}", String::from_utf8_lossy(&installed.stderr));
    let value = read_json(&state);
    assert_eq!(value["numStartups"], 12);
    assert_eq!(value["mcpServers"]["other"]["command"], "other-server");
    assert_eq!(value["mcpServers"]["cairn"]["type"], "stdio");
    assert!(read_json(&user.path().join(".claude/settings.json"))["hooks"]["SessionStart"].is_array());
    assert!(host(home.path(), user.path(), &["uninstall", "claude-code"]).status.success());
    assert_eq!(read_json(&state), json!({"numStartups": 12, "mcpServers": {"other": {"command": "other-server"}}}));

    std::fs::write(&state, "{ not json").unwrap();
    let refused = host(home.path(), user.path(), &["install", "claude-code"]);
    assert!(!refused.status.success());
    assert_eq!(std::fs::read_to_string(&state).unwrap(), "{ not json", "a broken file is never clobbered");
}

#[test]
fn kiro_cli_agent_install_and_uninstall() {
    let home = tempfile::tempdir().unwrap();
    let user = tempfile::tempdir().unwrap();
    let agents = user.path().join(".kiro/agents");
    std::fs::create_dir_all(&agents).unwrap();
    let original = json!({
        "name": "dev",
        "tools": ["fs_read", "@git"],
        "mcpServers": {"git": {"command": "git-mcp"}},
        "hooks": {"agentSpawn": [{"command": "git status"}]}
    });
    std::fs::write(agents.join("dev.json"), original.to_string()).unwrap();
    let missing = host(home.path(), user.path(), &["install", "kiro-cli", "--agent", "nobody"]);
    assert!(!missing.status.success());
    assert!(!agents.join("nobody.json").exists());
    let no_agent = host(home.path(), user.path(), &["install", "kiro-cli"]);
    assert!(!no_agent.status.success());

    assert!(host(home.path(), user.path(), &["install", "kiro-cli", "--agent", "dev"]).status.success());
    let agent = read_json(&agents.join("dev.json"));
    assert_eq!(agent["tools"], json!(["fs_read", "@git", "@cairn"]));
    assert_eq!(agent["mcpServers"]["git"], original["mcpServers"]["git"]);
    let canonical_home = std::fs::canonicalize(home.path()).unwrap();
    assert_eq!(
        agent["mcpServers"]["cairn"]["args"],
        json!(["--home", canonical_home, "mcp", "serve", "--agent", "dev"]),
        "the agent's MCP server is scoped to it"
    );
    assert_eq!(agent["hooks"]["agentSpawn"].as_array().unwrap().len(), 2);
    for event in ["userPromptSubmit", "preToolUse", "postToolUse", "stop"] {
        let command = agent["hooks"][event][0]["command"].as_str().unwrap();
        assert!(command.ends_with(&format!("hook kiro-cli {event} --agent dev")), "{command}");
    }
    assert!(host(home.path(), user.path(), &["uninstall", "kiro-cli", "--agent", "dev"]).status.success());
    assert_eq!(read_json(&agents.join("dev.json")), original);

    // An unscoped entry an earlier install wrote for this binary and home
    // is replaced by the scoped one, and removed by uninstall; anyone
    // else's `cairn` entry is refused.
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_cairn")).unwrap();
    let mut earlier = original.clone();
    earlier["mcpServers"]["cairn"] = json!({"command": exe, "args": ["--home", canonical_home, "mcp", "serve"]});
    let unscoped = format!("{} --home {} hook kiro-cli userPromptSubmit", exe.display(), canonical_home.display());
    earlier["hooks"]["userPromptSubmit"] = json!([{"command": unscoped}]);
    std::fs::write(agents.join("dev.json"), earlier.to_string()).unwrap();
    assert!(host(home.path(), user.path(), &["install", "kiro-cli", "--agent", "dev"]).status.success());
    let upgraded = read_json(&agents.join("dev.json"));
    assert_eq!(upgraded["mcpServers"]["cairn"]["args"][5], "dev", "{upgraded}");
    let prompts = upgraded["hooks"]["userPromptSubmit"].as_array().unwrap();
    assert_eq!(prompts.len(), 1, "the unscoped hook is replaced: {upgraded}");
    assert!(prompts[0]["command"].as_str().unwrap().ends_with("--agent dev"), "{upgraded}");
    std::fs::write(agents.join("dev.json"), earlier.to_string()).unwrap();
    assert!(host(home.path(), user.path(), &["uninstall", "kiro-cli", "--agent", "dev"]).status.success());
    let cleaned = read_json(&agents.join("dev.json"));
    assert_eq!(cleaned["mcpServers"], original["mcpServers"]);
    assert_eq!(cleaned["hooks"], original["hooks"], "uninstall removes the unscoped hooks too");
    let mut foreign = original.clone();
    foreign["mcpServers"]["cairn"] = json!({"command": "/opt/other/cairn", "args": ["mcp", "serve"]});
    std::fs::write(agents.join("dev.json"), foreign.to_string()).unwrap();
    assert!(!host(home.path(), user.path(), &["install", "kiro-cli", "--agent", "dev"]).status.success());
    assert_eq!(read_json(&agents.join("dev.json")), foreign, "a refused install changes nothing");
}

#[test]
fn kiro_cli_install_merges_the_users_kiro_hooks_after_cairns_and_drops_bad_ones() {
    let home = tempfile::tempdir().unwrap();
    let user = tempfile::tempdir().unwrap();
    let agents = user.path().join(".kiro/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(agents.join("dev.json"), json!({"name": "dev"}).to_string()).unwrap();
    let script = user.path().join("audit.sh");
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    let script = script.to_str().unwrap();
    let kiro_hooks = json!({
        "preToolUse": [{"command": script, "matcher": "execute_bash", "timeout_ms": 5000}],
        "stop": [{"command": "relative/notify.sh"}]
    });
    std::fs::write(home.path().join("config.json"), json!({"agent": {"kiro_hooks": kiro_hooks}}).to_string()).unwrap();
    let installed = host(home.path(), user.path(), &["install", "kiro-cli", "--agent", "dev"]);
    assert!(installed.status.success(), "{}", String::from_utf8_lossy(&installed.stderr));
    let warnings = String::from_utf8(installed.stderr).unwrap();
    assert!(warnings.contains("relative/notify.sh"), "a dropped user hook is named: {warnings}");
    let agent = read_json(&agents.join("dev.json"));
    let pre = agent["hooks"]["preToolUse"].as_array().unwrap();
    assert_eq!(pre.len(), 2, "{pre:?}");
    assert!(pre[0]["command"].as_str().unwrap().ends_with("hook kiro-cli preToolUse --agent dev"), "Cairn's first");
    assert_eq!(pre[1], json!({"command": script, "matcher": "execute_bash", "timeout_ms": 5000}));
    let stop = agent["hooks"]["stop"].as_array().unwrap();
    assert_eq!(stop.len(), 1, "the invalid user stop hook is not installed: {stop:?}");
    assert!(host(home.path(), user.path(), &["uninstall", "kiro-cli", "--agent", "dev"]).status.success());
    assert_eq!(read_json(&agents.join("dev.json")), json!({"name": "dev"}), "uninstall removes both");
}

#[test]
fn concurrent_installs_into_one_settings_file_are_all_kept() {
    let project = tempfile::tempdir().unwrap();
    let homes: Vec<tempfile::TempDir> = (0..8).map(|_| tempfile::tempdir().unwrap()).collect();
    let children: Vec<std::process::Child> = homes
        .iter()
        .map(|home| {
            cairn()
                .arg("--home")
                .arg(home.path())
                .args(["host", "install", "claude-code", "--project"])
                .arg(project.path())
                .env("HOME", home.path())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // Each home's MCP entry is `cairn`: one install wins `.mcp.json` and the
    // others are refused there, after their hooks went into settings.json.
    let mut succeeded = 0;
    for child in children {
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        if output.status.success() {
            succeeded += 1;
        } else {
            assert!(stderr.contains("already has a different `mcpServers.cairn` entry"), "{stderr}");
        }
    }
    assert_eq!(succeeded, 1, "exactly one install owns the project's cairn MCP entry");
    let settings = read_json(&project.path().join(".claude/settings.json"));
    for event in ["SessionStart", "PreToolUse", "SessionEnd"] {
        let entries = settings["hooks"][event].as_array().unwrap();
        assert_eq!(entries.len(), 8, "every install's {event} hook survived: {entries:?}");
    }
}

#[test]
fn the_stop_hook_reads_a_long_transcripts_tail_and_says_what_it_skipped() {
    let home = tempfile::tempdir().unwrap();
    // A transcript of 70 MiB: the reply is in its last line.
    let long = home.path().join("long.jsonl");
    {
        let mut file = std::io::BufWriter::new(std::fs::File::create(&long).unwrap());
        let filler = json!({"type": "user", "message": {"role": "user", "content": "x".repeat(1024)}}).to_string();
        for _ in 0..70 * 1024 {
            writeln!(file, "{filler}").unwrap();
        }
        let reply = json!({"type": "assistant", "message": {"content": [{"type": "text", "text": "The tail reply."}]}});
        writeln!(file, "{reply}").unwrap();
    }
    let mut stop = common("Stop", "s-long");
    stop["transcript_path"] = json!(long);
    let output = hook(home.path(), "claude-code", "Stop", &stop.to_string());
    assert!(output.status.success());
    let rows = transcript(home.path(), "claude-code:s-long");
    assert_eq!(rows.len(), 1, "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(rows[0]["content"], "The tail reply.");

    // No reply in the tail: nothing recorded, and stderr says what was not read.
    let only_users = home.path().join("users.jsonl");
    let filler = json!({"type": "user", "message": {"content": "y".repeat(1024)}}).to_string();
    std::fs::write(&only_users, format!("{filler}\n").repeat(9 * 1024)).unwrap();
    stop["transcript_path"] = json!(only_users);
    let output = hook(home.path(), "claude-code", "Stop", &stop.to_string());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("earlier bytes not read"), "{stderr}");
    // A refused path is named as refused, not silently dropped.
    stop["transcript_path"] = json!(home.path().join("server.token"));
    std::fs::write(home.path().join("server.token"), "0".repeat(64)).unwrap();
    let stderr = String::from_utf8(hook(home.path(), "claude-code", "Stop", &stop.to_string()).stderr).unwrap();
    assert!(stderr.contains("was not read") && stderr.contains("not recorded"), "{stderr}");
    assert_eq!(transcript(home.path(), "claude-code:s-long").len(), 1);

    // Hook input over 4 MiB is named as such, not as a JSON error.
    let mut big = common("UserPromptSubmit", "s-long");
    big["prompt"] = json!("z".repeat(5 * 1024 * 1024));
    let stderr =
        String::from_utf8(hook(home.path(), "claude-code", "UserPromptSubmit", &big.to_string()).stderr).unwrap();
    assert!(stderr.contains("over 4194304 bytes"), "{stderr}");
}
