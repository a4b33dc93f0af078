//! Auto skills end to end through `cairn serve`: sessions with tool calls
//! go idle, the history path asks a loopback OpenAI-compatible LLM for a
//! skill, and what comes back is gated, redacted, deduplicated, validated
//! and staged for review over HTTP.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cairn;
use crate::serve::{Gateway, start_in};

/// The shortest idle threshold the config accepts is 0.01 h (36 s), plus ticks.
const IDLE_PATIENCE: Duration = Duration::from_secs(300);

/// A key a credential scanner recognises (not the documented example key).
const AWS_KEY: &str = "AKIAZ3XQ7LMN4PQR8STU";

/// What the LLM answers to the history prompt of each session, found by
/// the session's marker word in the transcript.
fn reply_for(prompt: &str) -> Value {
    let skill = |name: &str, description: &str, triggers: Value, procedure: &str| json!({"name": name, "description": description, "triggers": triggers, "procedure": procedure});
    let (key, skill) = if prompt.contains("MARKER-ROTATE") {
        let procedure = format!(
            "1. Run `logrotate -f /etc/logrotate.d/nginx`.\n2. Compress with gzip.\n3. Upload with AWS_ACCESS_KEY_ID={AWS_KEY}."
        );
        (
            "new_skill",
            skill(
                "rotate-nginx-logs",
                "Rotate the nginx access logs and gzip the old ones",
                json!(["rotate the nginx logs"]),
                &procedure,
            ),
        )
    } else if prompt.contains("MARKER-AWS") {
        (
            "new_skill",
            skill(
                "read-aws-config",
                "Read the AWS configuration of the machine",
                json!(["aws config"]),
                "1. cat the file.",
            ),
        )
    } else if prompt.contains("MARKER-DUPLICATE") {
        (
            "new_skill",
            skill(
                "archive-app-logs",
                "compress and ARCHIVE the application log files, weekly",
                json!(["archive logs"]),
                "1. tar.",
            ),
        )
    } else if prompt.contains("MARKER-SUBPROCESS") {
        let mut skill = skill(
            "list-big-files",
            "List the biggest files under a directory",
            json!(["big files"]),
            "1. Run the helper.",
        );
        skill["script"] = json!("import subprocess\nprint(subprocess.check_output(['du', '-a', '.']))\n");
        ("new_skill", skill)
    } else if prompt.contains("MARKER-SCRIPT") {
        let mut skill = skill(
            "count-todo-lines",
            "Count TODO lines in the Python sources",
            json!(["count todos"]),
            "1. Run scripts/helper.py.",
        );
        skill["script"] = json!(
            "import sys\nfrom pathlib import Path\nprint(sum(p.read_text().count('TODO') for p in Path(sys.argv[1]).rglob('*.py')))\n"
        );
        ("new_skill", skill)
    } else if prompt.contains("MARKER-LIVE") {
        ("refined_skill", json!({"name": "auto/compress-logs", "procedure": "1. tar czf, then verify with tar tzf."}))
    } else if prompt.contains("MARKER-REFINE") {
        ("refined_skill", json!({"name": "release-notes", "procedure": "1. Overwritten by the model."}))
    } else {
        return json!({"history": "Nothing to note."});
    };
    let mut reply = json!({"history": "Worked through a multi-step task with tools."});
    reply[key] = skill;
    reply
}

/// A loopback chat-completions server answering with [`reply_for`] and
/// keeping every prompt.
struct ScriptedLlm {
    base_url: String,
    prompts: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ScriptedLlm {
    fn start() -> Self {
        let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
        let base_url = format!("http://{}/v1", server.server_addr().to_ip().unwrap());
        let prompts = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen, stopped) = (Arc::clone(&prompts), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::SeqCst) {
                let Ok(Some(mut request)) = server.recv_timeout(Duration::from_millis(50)) else { continue };
                let mut body = String::new();
                request.as_reader().read_to_string(&mut body).unwrap();
                let body: Value = serde_json::from_str(&body).unwrap();
                let prompt = body["messages"][0]["content"].as_str().unwrap().to_owned();
                let reply = if prompt.starts_with("You summarise a finished conversation") {
                    reply_for(&prompt).to_string()
                } else {
                    r#"{"semantic": []}"#.to_owned()
                };
                seen.lock().unwrap().push(prompt);
                let answer = json!({"choices": [{"message": {"role": "assistant", "content": reply}}]});
                let header = tiny_http::Header::from_bytes("Content-Type", "application/json").unwrap();
                request.respond(tiny_http::Response::from_string(answer.to_string()).with_header(header)).unwrap();
            }
        });
        Self { base_url, prompts, stop, thread: Some(thread) }
    }

    fn history_prompt(&self, marker: &str) -> Option<String> {
        self.prompts.lock().unwrap().iter().find(|prompt| prompt.contains(marker)).cloned()
    }
}

impl Drop for ScriptedLlm {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A session of six assistant turns that each called a shell tool, after
/// the user's request naming `marker`; `extra` adds one more tool call.
fn session(marker: &str, extra: Option<&str>) -> Value {
    let mut messages = vec![json!({"role": "user", "content": format!("{marker}: help me with the server")})];
    for step in 0..6 {
        messages.push(json!({
            "role": "assistant",
            "content": format!("step {step} done"),
            "tool_calls": [{"name": "shell", "input": {"command": format!("ls -la /var/log/step{step}")}}],
        }));
    }
    if let Some(command) = extra {
        messages.push(json!({"role": "assistant", "content": "checked", "tool_calls": [{"name": "shell", "input": {"command": command}}]}));
    }
    json!({ "messages": messages })
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

const HAND_WRITTEN: &str = "---\nname: release-notes\ndescription: Write the release notes\n---\nWritten by hand.\n";
const GENERATED: &str = "---\nname: auto/compress-logs\ndescription: Compress and archive the application log files weekly\n\
                         source: auto\nsession_key: earlier\ncreated_at: 2026-01-01T00:00:00Z\n---\n1. tar czf.\n";

fn audit(home: &Path) -> Vec<Value> {
    std::fs::read_to_string(home.join("skills-audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn wait_until(what: &str, mut ready: impl FnMut() -> bool, gateway: &Gateway) {
    let started = Instant::now();
    while !ready() {
        assert!(started.elapsed() < IDLE_PATIENCE, "waited too long for {what}: {}", gateway.get("/api/health").body);
        std::thread::sleep(Duration::from_millis(200));
    }
}

const SESSIONS: &[(&str, &str, Option<&str>)] = &[
    ("auto-rotate", "MARKER-ROTATE", None),
    ("auto-aws", "MARKER-AWS", Some("cat ~/.aws/credentials")),
    ("auto-duplicate", "MARKER-DUPLICATE", None),
    ("auto-subprocess", "MARKER-SUBPROCESS", None),
    ("auto-script", "MARKER-SCRIPT", None),
    ("auto-refine", "MARKER-REFINE", None),
];

#[test]
fn idle_sessions_stage_reviewed_skills_that_then_trigger() {
    let llm = ScriptedLlm::start();
    let home = tempfile::tempdir().unwrap();
    let config = json!({
        "llm": {"base_url": llm.base_url, "model": "scripted", "max_retries": 0},
        "memory": {"history_idle_hours": 0.01},
        "skills": {"auto_create_from_sessions": true, "auto_refine_on_deviation": true},
    });
    write(&home.path().join("config.json"), &config.to_string());
    write(&home.path().join("skills/release-notes/SKILL.md"), HAND_WRITTEN);
    write(&home.path().join("skills/auto/compress-logs/SKILL.md"), GENERATED);
    let gateway = start_in(home, &["--heartbeat-secs", "1"], &[]);

    assert_eq!(gateway.get("/api/skills/-/pending").body, json!({"pending": []}));
    for (key, marker, extra) in SESSIONS {
        let posted = gateway.send("POST", &format!("/api/sessions/{key}/messages"), &session(marker, *extra));
        assert_eq!(posted.status, 200, "{}", posted.body);
    }
    let expected = |extra: &Option<&str>| if extra.is_some() { 8 } else { 7 };
    wait_until(
        "every session's history consolidation",
        || {
            SESSIONS.iter().all(|(key, _, extra)| {
                gateway.get(&format!("/api/sessions/{key}")).body["session"]["history_marker"] == json!(expected(extra))
            })
        },
        &gateway,
    );

    // Only the clean prose session and the clean script session are staged.
    let pending = gateway.get("/api/skills/-/pending");
    assert_eq!(pending.status, 200);
    let listed: Vec<&str> =
        pending.body["pending"].as_array().unwrap().iter().map(|item| item["slug"].as_str().unwrap()).collect();
    assert_eq!(listed, ["count-todo-lines", "rotate-nginx-logs"], "{}", pending.body);
    let rotate = &pending.body["pending"][1];
    assert_eq!(rotate["name"], "auto/rotate-nginx-logs");
    assert_eq!(rotate["session_key"], "auto-rotate");
    assert_eq!(rotate["triggers"], json!(["rotate the nginx logs"]));
    assert_eq!((&rotate["has_script"], &rotate["script"]), (&json!(false), &Value::Null));
    assert!(rotate["created_at"].as_str().unwrap().parse::<jiff::Timestamp>().is_ok(), "{rotate}");
    // The credential in the model's procedure never reaches the file.
    let staged = gateway.home().join("skills/auto/.pending/rotate-nginx-logs/SKILL.md");
    let text = std::fs::read_to_string(&staged).unwrap();
    assert!(!text.contains(AWS_KEY) && text.contains("[REDACTED"), "{text}");
    assert!(!rotate["procedure"].as_str().unwrap().contains(AWS_KEY));
    assert!(text.contains("\nsource: auto\n") && text.contains("session_key: \"auto-rotate\""), "{text}");
    let script = &pending.body["pending"][0];
    assert_eq!(script["has_script"], true);
    assert!(script["script"].as_str().unwrap().contains("rglob"));

    // The session that touched ~/.aws was not even asked for a skill.
    let aws_prompt = llm.history_prompt("MARKER-AWS").expect("the AWS session was consolidated");
    assert!(!aws_prompt.contains("\"new_skill\""), "{aws_prompt}");
    assert!(llm.history_prompt("MARKER-ROTATE").unwrap().contains("\"new_skill\""));
    assert!(!gateway.home().join("skills/auto/.pending/read-aws-config").exists());

    let events = audit(gateway.home());
    let event = |action: &str, skill: &str| {
        events
            .iter()
            .find(|event| event["action"] == action && event["skills"][0] == skill)
            .unwrap_or_else(|| panic!("no {action} event for {skill}: {events:?}"))
            .clone()
    };
    // The near-duplicate of the generated compress-logs skill is refused and audited.
    let duplicate = event("auto_skill_duplicate", "auto/archive-app-logs");
    assert_eq!(duplicate["ok"], false);
    assert!(duplicate["detail"].as_str().unwrap().contains("auto/compress-logs"), "{duplicate}");
    assert!(!gateway.home().join("skills/auto/.pending/archive-app-logs").exists());
    // The subprocess script is refused, naming the rule.
    let script_refusal = event("auto_skill_create", "auto/list-big-files");
    assert_eq!(script_refusal["ok"], false);
    assert!(script_refusal["detail"].as_str().unwrap().contains("process-exec"), "{script_refusal}");
    // Refining the hand-authored skill is refused and the file is untouched.
    let refine = event("auto_skill_refine", "release-notes");
    assert_eq!(refine["ok"], false);
    assert!(refine["detail"].as_str().unwrap().contains("not_auto"), "{refine}");
    assert_eq!(std::fs::read_to_string(gateway.home().join("skills/release-notes/SKILL.md")).unwrap(), HAND_WRITTEN);
    assert_eq!(event("auto_skill_create", "auto/rotate-nginx-logs")["ok"], true);

    // Not live before approval: a matching message does not deliver it.
    let before = gateway.send(
        "POST",
        "/api/sessions/chat-after/messages",
        &json!({"messages": [{"role": "user", "content": "please rotate the nginx logs"}]}),
    );
    assert!(!before.body["context"]["text"].as_str().unwrap_or("").contains("logrotate"), "{}", before.body);

    let approved = gateway.send("POST", "/api/skills/-/pending/rotate-nginx-logs/approve", &json!({}));
    assert_eq!((approved.status, &approved.body), (200, &json!({"approved": "auto/rotate-nginx-logs"})));
    assert!(gateway.home().join("skills/auto/rotate-nginx-logs/SKILL.md").is_file());
    assert_eq!(event_count(gateway.home(), "auto_skill_approve"), 1);
    let again = gateway.send("POST", "/api/skills/-/pending/rotate-nginx-logs/approve", &json!({}));
    assert_eq!((again.status, again.code()), (404, "not_found"));

    // Live: the next matching message carries the skill.
    let after = gateway.send(
        "POST",
        "/api/sessions/chat-after/messages",
        &json!({"messages": [{"role": "user", "content": "please rotate the nginx logs again"}]}),
    );
    assert_eq!(after.status, 200, "{}", after.body);
    let context = after.body["context"]["text"].as_str().unwrap();
    assert!(context.contains("logrotate -f /etc/logrotate.d/nginx"), "{context}");
    assert!(!context.contains(AWS_KEY));
    let listed = gateway.get("/api/skills").body;
    assert!(listed["skills"].as_array().unwrap().iter().any(|skill| skill["name"] == "auto/rotate-nginx-logs"));

    // A script edited after staging fails the approval's re-validation.
    write(&gateway.home().join("skills/auto/.pending/count-todo-lines/scripts/helper.py"), "import socket\n");
    let refused = gateway.send("POST", "/api/skills/-/pending/count-todo-lines/approve", &json!({}));
    assert_eq!((refused.status, refused.code()), (422, "script_rejected"), "{}", refused.body);
    assert!(refused.body["error"].as_str().unwrap().contains("network"), "{}", refused.body);
    let rejected = gateway.send("POST", "/api/skills/-/pending/count-todo-lines/reject", &json!({}));
    assert_eq!((rejected.status, &rejected.body), (200, &json!({"rejected": "count-todo-lines"})));
    let gone = gateway.send("POST", "/api/skills/-/pending/count-todo-lines/reject", &json!({}));
    assert_eq!((gone.status, gone.code()), (404, "not_found"));
    assert_eq!(gateway.get("/api/skills/-/pending").body, json!({"pending": []}));
    // The lifecycle runs on the heartbeat.
    let health = gateway.wait_for("/api/health", "the lifecycle job's first run", |body| {
        body["heartbeat"]["jobs"]["auto_skill_lifecycle"]["runs"].as_u64().unwrap_or(0) >= 1
    });
    assert_eq!(health["heartbeat"]["jobs"]["auto_skill_lifecycle"]["last_ok"], true, "{health}");
}

/// A hand-written skill placed under auto/: never shown as a procedure to
/// refine, never managed by the lifecycle.
const HAND_PLACED: &str = "---\nname: auto/hand-placed\ndescription: Notes on compressing logs\n\
                           triggers: [\"compress the logs\"]\n---\nHAND-PLACED BODY.\n";

#[test]
fn a_refinement_waits_for_review_with_the_current_procedure_shown_and_can_be_restored() {
    let llm = ScriptedLlm::start();
    let home = tempfile::tempdir().unwrap();
    let config = json!({
        "llm": {"base_url": llm.base_url, "model": "scripted", "max_retries": 0},
        "memory": {"history_idle_hours": 0.01},
        "skills": {"auto_create_from_sessions": true, "auto_refine_on_deviation": true, "approval_required": true},
    });
    write(&home.path().join("config.json"), &config.to_string());
    let live_file = home.path().join("skills/auto/compress-logs/SKILL.md");
    write(&live_file, GENERATED);
    write(&home.path().join("skills/auto/hand-placed/SKILL.md"), HAND_PLACED);
    let gateway = start_in(home, &["--heartbeat-secs", "1"], &[]);
    let mut messages = session("MARKER-LIVE", None);
    messages["messages"][0]["content"] = json!("MARKER-LIVE: run auto/compress-logs again, and compress the logs");
    assert_eq!(gateway.send("POST", "/api/sessions/auto-live/messages", &messages).status, 200);
    wait_until(
        "the session's history consolidation",
        || gateway.get("/api/sessions/auto-live").body["session"]["history_marker"] == json!(7),
        &gateway,
    );

    // The model was shown the live procedure, and only the generated skill's.
    let prompt = llm.history_prompt("MARKER-LIVE").unwrap();
    assert!(prompt.contains("auto/compress-logs:\n<<<\n1. tar czf.\n>>>"), "{prompt}");
    assert!(!prompt.contains("HAND-PLACED BODY"), "{prompt}");
    // Not live: a pending update, reviewable beside the current procedure.
    assert_eq!(std::fs::read_to_string(&live_file).unwrap(), GENERATED);
    let pending = gateway.get("/api/skills/-/pending").body;
    let update = &pending["pending"][0];
    assert_eq!(
        (&update["name"], &update["kind"], &update["session_key"]),
        (&json!("auto/compress-logs"), &json!("update"), &json!("auto-live")),
        "{pending}"
    );
    assert_eq!(update["current_procedure"], "1. tar czf.");
    assert_eq!(update["procedure"], "1. tar czf, then verify with tar tzf.");
    let (ok, out, all) = cli(gateway.home(), &["skills", "pending"]);
    assert!(ok && out.contains("auto/compress-logs\tupdate\tsession auto-live"), "{all}");

    let approved = gateway.send("POST", "/api/skills/-/pending/compress-logs/approve", &json!({}));
    assert_eq!((approved.status, &approved.body), (200, &json!({"approved": "auto/compress-logs"})));
    let refined = std::fs::read_to_string(&live_file).unwrap();
    assert!(
        refined.contains("refined_at: ") && refined.ends_with("---\n1. tar czf, then verify with tar tzf.\n"),
        "{refined}"
    );
    let versions: Vec<_> =
        std::fs::read_dir(gateway.home().join("skills/auto/.versions/compress-logs")).unwrap().collect();
    assert_eq!(versions.len(), 1);
    let skill = gateway.get("/api/skills/auto/compress-logs").body;
    assert!(skill["content"].as_str().unwrap().contains("verify with tar tzf"), "{skill}");

    // Restore through the CLI, then undo it over HTTP.
    let (ok, out, all) = cli(gateway.home(), &["skills", "restore", "auto/compress-logs"]);
    assert!(ok && out.contains("\"restored\":\"auto/compress-logs\""), "{all}");
    assert_eq!(std::fs::read_to_string(&live_file).unwrap(), GENERATED);
    let undone = gateway.send("POST", "/api/skills/-/auto/compress-logs/restore", &json!({}));
    assert_eq!((undone.status, &undone.body), (200, &json!({"restored": "auto/compress-logs"})));
    assert_eq!(std::fs::read_to_string(&live_file).unwrap(), refined);
    let refused = gateway.send("POST", "/api/skills/-/auto/hand-placed/restore", &json!({}));
    assert_eq!((refused.status, refused.code()), (409, "not_auto"), "{}", refused.body);
    let missing = gateway.send("POST", "/api/skills/-/auto/no-such-skill/restore", &json!({}));
    assert_eq!((missing.status, missing.code()), (404, "not_found"));
    let (ok, _, all) = cli(gateway.home(), &["skills", "restore", "hand-placed"]);
    assert!(!ok && all.contains("only generated skills"), "{all}");

    // The audit trail, read back over HTTP and the CLI; a bad line is skipped and counted.
    use std::io::Write as _;
    let mut trail = std::fs::OpenOptions::new().append(true).open(gateway.home().join("skills-audit.jsonl")).unwrap();
    writeln!(trail, "{{not json").unwrap();
    drop(trail);
    let trail = gateway.get("/api/skills/-/audit?limit=1000");
    assert_eq!(trail.status, 200, "{}", trail.body);
    assert_eq!((&trail.body["skipped"], &trail.body["truncated"]), (&json!(1), &json!(false)), "{}", trail.body);
    let events = trail.body["events"].as_array().unwrap();
    let actions: Vec<&str> = events
        .iter()
        .map(|event| event["action"].as_str().unwrap())
        .filter(|action| action.starts_with("auto_skill"))
        .collect();
    let expected = [["auto_skill_restore"; 5].as_slice(), &["auto_skill_approve", "auto_skill_refine"]].concat();
    assert_eq!(actions, expected, "{}", trail.body);
    let refine = events.iter().find(|event| event["action"] == "auto_skill_refine").unwrap();
    assert_eq!((&refine["skills"], &refine["ok"]), (&json!(["auto/compress-logs"]), &json!(true)));
    assert!(refine["detail"].as_str().unwrap().contains("staged for review"), "{refine}");
    assert!(refine["at"].as_str().unwrap().parse::<jiff::Timestamp>().is_ok(), "{refine}");
    assert_eq!(gateway.get("/api/skills/-/audit?limit=2").body["events"].as_array().unwrap().len(), 2);
    for bad in ["0", "1001", "many"] {
        assert_eq!(gateway.get(&format!("/api/skills/-/audit?limit={bad}")).status, 400, "{bad}");
    }
    let (ok, out, all) = cli(gateway.home(), &["skills", "audit", "--limit", "3", "--json"]);
    assert!(ok, "{all}");
    let log: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!((log["events"].as_array().unwrap().len(), &log["skipped"]), (3, &json!(1)));
    let (ok, out, all) = cli(gateway.home(), &["skills", "audit"]);
    assert!(
        ok && out.contains("\tauto_skill_approve\tok\tauto/compress-logs\t")
            && all.contains("1 malformed lines skipped"),
        "{all}"
    );
    let (ok, _, all) = cli(gateway.home(), &["skills", "audit", "--limit", "0"]);
    assert!(!ok && all.contains("--limit must be 1 to 1000"), "{all}");
    // The hand-placed skill is not a generated one: no lifecycle mark.
    let (_, out, _) = cli(gateway.home(), &["skills", "list", "--json"]);
    let rows: Value = serde_json::from_str(out.trim()).unwrap();
    let auto_of = |name: &str| rows.as_array().unwrap().iter().find(|row| row["name"] == name).unwrap()["auto"].clone();
    assert_eq!((auto_of("auto/compress-logs"), auto_of("auto/hand-placed")), (json!("active"), Value::Null));
}

fn event_count(home: &Path, action: &str) -> usize {
    audit(home).iter().filter(|event| event["action"] == action).count()
}

/// Runs `cairn`: success, standard output, and both streams together.
fn cli(home: &Path, args: &[&str]) -> (bool, String, String) {
    let output = cairn().arg("--home").arg(home).args(args).env("HOME", home).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let both = format!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    (output.status.success(), stdout, both)
}

#[test]
fn the_cli_reviews_pending_skills_and_marks_generated_ones() {
    let home = tempfile::tempdir().unwrap();
    let pending = "---\nname: auto/tidy-imports\ndescription: Sort the imports\ntriggers: [\"tidy imports\"]\n\
                   source: auto\nsession_key: \"chat-9\"\ncreated_at: 2026-01-01T00:00:00Z\n---\n1. isort.\n";
    write(&home.path().join("skills/auto/.pending/tidy-imports/SKILL.md"), pending);
    write(&home.path().join("skills/auto/.pending/drop-me/SKILL.md"), &pending.replace("tidy-imports", "drop-me"));
    write(&home.path().join("skills/release-notes/SKILL.md"), HAND_WRITTEN);

    let (ok, out, all) = cli(home.path(), &["skills", "pending", "--json"]);
    assert!(ok, "{all}");
    let listed: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(listed["pending"][1]["session_key"], "chat-9");
    let (ok, _, out) = cli(home.path(), &["skills", "approve", "auto/tidy-imports"]);
    assert!(ok && out.contains("\"approved\":\"auto/tidy-imports\""), "{out}");
    let (ok, _, out) = cli(home.path(), &["skills", "reject", "drop-me"]);
    assert!(ok && out.contains("\"rejected\":\"drop-me\""), "{out}");
    let (ok, _, out) = cli(home.path(), &["skills", "reject", "drop-me"]);
    assert!(!ok && out.contains("no auto skill"), "{out}");

    let (ok, out, all) = cli(home.path(), &["skills", "list", "--json"]);
    assert!(ok, "{all}");
    let rows: Value = serde_json::from_str(out.trim()).unwrap();
    let auto_of = |name: &str| rows.as_array().unwrap().iter().find(|row| row["name"] == name).unwrap()["auto"].clone();
    assert_eq!((auto_of("auto/tidy-imports"), auto_of("release-notes")), (json!("active"), Value::Null));

    let (ok, _, out) = cli(home.path(), &["skills", "archive", "tidy-imports"]);
    assert!(ok && out.contains("\"archived\":\"auto/tidy-imports\""), "{out}");
    assert!(home.path().join("skills/auto/.archived/tidy-imports/SKILL.md").is_file());
    let (_, out, _) = cli(home.path(), &["skills", "list", "--json"]);
    assert!(!out.contains("auto/tidy-imports"), "archived skills are not offered: {out}");
    let (ok, _, out) = cli(home.path(), &["skills", "approve", "Bad_Slug"]);
    assert!(!ok && out.contains("invalid auto-skill slug"), "{out}");
}

#[test]
fn kiro_cli_tool_hooks_record_tool_calls_in_the_transcript() {
    let home = tempfile::tempdir().unwrap();
    let event = json!({
        "hook_event_name": "postToolUse",
        "cwd": "/work/project",
        "tool_name": "execute_bash",
        "tool_input": {"command": "cargo test"},
        "tool_response": {"success": true},
    });
    let mut child = cairn()
        .arg("--home")
        .arg(home.path())
        .args(["hook", "kiro-cli", "postToolUse"])
        .env("HOME", home.path())
        .env("CAIRN_HOST_START_GATEWAY", "0")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(event.to_string().as_bytes()).unwrap();
    assert!(child.wait().unwrap().success());
    let connection = rusqlite::Connection::open_with_flags(
        home.path().join("memory.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let (key, calls): (String, String) = connection
        .query_row("SELECT session_key, tool_calls FROM session_transcripts", [], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap();
    assert_eq!(key, "kiro-cli:/work/project");
    let calls: Value = serde_json::from_str(&calls).unwrap();
    assert_eq!(calls, json!([{"name": "execute_bash", "input": {"command": "cargo test"}}]));
}

#[test]
fn session_tool_calls_are_validated_and_stored() {
    let gateway = crate::serve::start(&["--heartbeat-secs", "3600"]);
    let call = |name: &str, input: Value| json!({"name": name, "input": input});
    let message = |calls: Vec<Value>| json!({"messages": [{"role": "assistant", "content": "", "tool_calls": calls}]});
    for (body, code) in [
        (message(vec![]), "empty_message"),
        (message(vec![call("", json!({}))]), "invalid_tool_call"),
        (message(vec![call(&"t".repeat(129), json!({}))]), "invalid_tool_call"),
        (message(vec![call("shell", json!({"command": "x".repeat(17 * 1024)}))]), "invalid_tool_call"),
        (message((0..65).map(|index| call(&format!("tool{index}"), Value::Null)).collect()), "too_many_tool_calls"),
    ] {
        let refused = gateway.send("POST", "/api/sessions/tools-1/messages", &body);
        assert_eq!((refused.status, refused.code()), (400, code), "{}", refused.body);
    }
    let unknown =
        json!({"messages": [{"role": "assistant", "content": "x", "tool_calls": [{"name": "a", "args": {}}]}]});
    assert_eq!(gateway.send("POST", "/api/sessions/tools-1/messages", &unknown).code(), "invalid_body");
    assert_eq!(gateway.get("/api/sessions/tools-1").status, 404, "nothing was stored");

    let accepted = gateway.send(
        "POST",
        "/api/sessions/tools-1/messages",
        &message(vec![call("shell", json!({"command": "make"}))]),
    );
    assert_eq!(accepted.status, 200, "{}", accepted.body);
    let connection = rusqlite::Connection::open_with_flags(
        gateway.home().join("memory.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let calls: String = connection
        .query_row("SELECT tool_calls FROM session_transcripts WHERE session_key = 'tools-1'", [], |row| row.get(0))
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&calls).unwrap(),
        json!([{"name": "shell", "input": {"command": "make"}}])
    );
}
