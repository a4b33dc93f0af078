//! One settings layer and one home for every entry point: `cairn config`,
//! CLI writes and `cairn serve` read the same `config.json` the same way,
//! and the home's own secrets are never read on a model's behalf.

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use crate::cairn;
use crate::serve::start_in;

const TOKEN: &str = "cairn-test-token-0123456789abcdef0123456789abcdef";

/// `cairn --home HOME ARGS` with the test environment scrubbed.
pub(crate) fn run(home: &Path, args: &[&str]) -> Output {
    cairn()
        .arg("--home")
        .arg(home)
        .args(args)
        .env_remove("CAIRN_HOME")
        .env_remove("CAIRN_EMBED_MODEL_PATH")
        .env_remove("CAIRN_SERVE_PORT")
        .env("CAIRN_SKIP_MODEL_DOWNLOAD", "1")
        .env("HOME", home)
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn entry<'a>(show: &'a Value, key: &str) -> &'a Value {
    show["settings"].as_array().unwrap().iter().find(|entry| entry["key"] == key).unwrap_or_else(|| panic!("{key}"))
}

/// The one config.json every entry point below reads.
fn shared_config(model_dir: &Path) -> Value {
    json!({
        "memory": {"extra_prefixes": ["team."], "colour": "blue"},
        "embedding": {"model_path": model_dir},
        "hooks": {"transforms": {"^deploy": "[ops] "}}
    })
}

#[test]
fn config_show_cli_writes_and_serve_resolve_one_config_the_same_way() {
    let home = tempfile::tempdir().unwrap();
    let model_dir = home.path().join("no-such-model");
    std::fs::write(home.path().join("config.json"), shared_config(&model_dir).to_string()).unwrap();

    let output = run(home.path(), &["config", "show", "--json"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let show: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(entry(&show, "memory.extra_prefixes")["value"], json!(["team."]));
    assert_eq!(entry(&show, "memory.extra_prefixes")["source"], "file");
    assert_eq!(entry(&show, "embedding.model_path")["value"], json!(model_dir));
    assert_eq!(entry(&show, "server.port")["source"], "default");
    assert_eq!(entry(&show, "hooks")["value"]["transforms"], json!([["^deploy", "[ops] "]]));
    let warnings = show["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].as_str().unwrap().contains("`memory.colour`"));

    // The CLI writer honours the configured prefix and warns once.
    let output = run(home.path(), &["memory", "semantic", "set", "team.lead", "ana", "--json"]);
    assert!(output.status.success(), "{} {}", stdout(&output), stderr(&output));
    assert_eq!(stderr(&output).matches("memory.colour").count(), 1, "{}", stderr(&output));
    // The model is resolved from the same key.
    let output = run(home.path(), &["model", "status"]);
    assert!(stdout(&output).contains("no-such-model"), "{}", stdout(&output));

    // serve: same values, same single warning, same prefix.
    let gateway = start_in(home, &[], &[]);
    let health = gateway.get("/api/health").body;
    let config_warnings: Vec<&str> =
        health["config_warnings"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(config_warnings.iter().filter(|warning| warning.contains("memory.colour")).count(), 1, "{health}");
    let stored = gateway.get("/api/memory/semantic?q=lead").body;
    assert!(stored.to_string().contains("team.lead"), "{stored}");
    let put = gateway.send("PUT", "/api/memory/semantic", &json!({"key": "team.size", "value": 4}));
    assert_eq!(put.status, 200, "{}", put.body);
    let preview = gateway.get("/api/memory/context-preview?q=deploy%20now").body;
    assert!(preview["message"]["text"].as_str().unwrap().contains("[ops] deploy now"), "{preview}");
}

#[test]
fn config_set_validates_and_keeps_the_file_on_refusal() {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("config.json");
    let original = "{\n  \"server\": {\"port\": 9001},\n  \"llm\": {\"model\": \"m\"}\n}\n";
    std::fs::write(&path, original).unwrap();
    for (key, value) in [
        ("server.port", "eighty"),
        ("server.port", "700000"),
        ("server.prot", "1"),
        ("memory.extra_prefixes", "[\"Team\"]"),
        ("embedding.pool_workers", "0"),
        ("home", "/tmp"),
        ("memory.episodic_cap", "0"),
        ("memory.episodic_cap", "-10"),
        ("memory.episodic_cap", "many"),
        ("memory.episodic_cap", "99999999999"),
        ("storage.postgres_pool_size", "0"),
        ("storage.postgres_pool_size", "100000"),
    ] {
        // `--`: a negative value is a value, not a flag.
        let output = run(home.path(), &["config", "set", "--", key, value]);
        assert_eq!(output.status.code(), Some(2), "{key} {value}: {}", stderr(&output));
        assert!(stderr(&output).contains("refused"), "{}", stderr(&output));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), original, "{key} = {value}");
    }
    let output = run(home.path(), &["config", "set", "server.port", "9100"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.find("\"server\"").unwrap() < text.find("\"llm\"").unwrap(), "key order kept: {text}");
    let show: Value = serde_json::from_str(&stdout(&run(home.path(), &["config", "show", "--json"]))).unwrap();
    assert_eq!(entry(&show, "server.port")["value"], 9100);
    assert_eq!(entry(&show, "llm.model")["value"], "m");
    assert_eq!(
        (&entry(&show, "memory.episodic_cap")["value"], &entry(&show, "memory.episodic_cap")["source"]),
        (&json!(10_000), &json!("default"))
    );
    assert_eq!(entry(&show, "storage.postgres_pool_size")["value"], 8);
    for (key, value) in [("memory.episodic_cap", "1000000"), ("storage.postgres_pool_size", "16")] {
        let output = run(home.path(), &["config", "set", key, value]);
        assert!(output.status.success(), "{key}: {}", stderr(&output));
    }
    let show: Value = serde_json::from_str(&stdout(&run(home.path(), &["config", "show", "--json"]))).unwrap();
    assert_eq!(
        (&entry(&show, "memory.episodic_cap")["value"], &entry(&show, "memory.episodic_cap")["source"]),
        (&json!(1_000_000), &json!("file"))
    );
    assert_eq!(entry(&show, "storage.postgres_pool_size")["value"], 16);
    // The environment wins over the file, and says so.
    let output = cairn()
        .arg("--home")
        .arg(home.path())
        .args(["config", "show", "--json"])
        .env("CAIRN_SERVE_PORT", "9200")
        .output()
        .unwrap();
    let show: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(
        (&entry(&show, "server.port")["value"], &entry(&show, "server.port")["source"]),
        (&json!(9200), &json!("env"))
    );
}

/// An agent whose prompt points at the gateway's own token.
fn token_agent(home: &Path) -> std::path::PathBuf {
    std::fs::write(home.join("server.token"), format!("{TOKEN}\n")).unwrap();
    let agents = home.join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    let spec = json!({"name": "leaky", "prompt": format!("file://{}", home.join("server.token").display())});
    std::fs::write(agents.join("leaky.json"), spec.to_string()).unwrap();
    agents
}

#[test]
fn the_homes_own_secrets_never_reach_an_agent_prompt() {
    let home = tempfile::tempdir().unwrap();
    let agents = token_agent(home.path());
    let agents_arg = agents.to_str().unwrap();
    for args in [
        vec!["agent", "show", "leaky", "--json", "--agents-dir", agents_arg],
        vec!["context", "preview", "--agent", "leaky", "--agents-dir", agents_arg],
    ] {
        let output = run(home.path(), &args);
        assert!(!stdout(&output).contains(TOKEN), "{args:?} leaked the token: {}", stdout(&output));
        assert!(!stderr(&output).contains(TOKEN), "{args:?} leaked the token on stderr");
    }
    std::fs::write(home.path().join("config.json"), json!({"agent": {"agents_dir": agents}}).to_string()).unwrap();
    let gateway = start_in(home, &[], &[]);
    let detail = gateway.get("/api/agents/detail/leaky");
    assert!(!detail.body.to_string().contains(&gateway.token), "{}", detail.body);
    let start = gateway.send("POST", "/api/sessions/s-1/start", &json!({"agent": "leaky"}));
    assert_eq!((start.status, start.code()), (404, "unknown_agent"), "{}", start.body);
    assert!(start.body["error"].as_str().unwrap().contains("sensitive"), "{}", start.body);
    assert!(!start.body.to_string().contains(&gateway.token), "{}", start.body);
}

#[test]
fn serve_migrates_legacy_markdown_once_at_start_and_marks_fresh_homes() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("memory")).unwrap();
    std::fs::write(home.path().join("memory/preferences.md"), "# Preferences\n\n- editor: helix\n").unwrap();
    let mut gateway = start_in(home, &[], &[]);
    let events = gateway.wait_for("/api/memory/events", "the automatic migration", |body| {
        body["events"].as_array().unwrap().iter().any(|event| event["action"] == "migration")
    });
    let migration =
        events["events"].as_array().unwrap().iter().find(|event| event["action"] == "migration").unwrap().clone();
    assert_eq!(migration["source"], "auto", "{migration}");
    let facts = gateway.get("/api/memory/semantic?q=editor").body;
    assert!(facts.to_string().contains("helix"), "{facts}");
    assert!(gateway.terminate().success());
    let home = gateway.into_home();
    let output = run(home.path(), &["memory", "migrate", "--json"]);
    let report: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(report["already_migrated"], true, "migrated once: {report}");

    let fresh = tempfile::tempdir().unwrap();
    let mut gateway = start_in(fresh, &[], &[]);
    gateway.wait_for("/api/memory/events", "the fresh home's migration mark", |body| {
        body["events"].as_array().unwrap().iter().any(|event| event["action"] == "migration")
    });
    assert!(gateway.terminate().success());
    let fresh = gateway.into_home();
    let report: Value = serde_json::from_str(&stdout(&run(fresh.path(), &["memory", "migrate", "--json"]))).unwrap();
    assert_eq!(report["already_migrated"], true, "a fresh home is marked migrated too: {report}");
}

#[test]
fn previews_record_nothing_and_deliveries_count_bodies_that_reached_a_prompt() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("skills/deploy")).unwrap();
    std::fs::write(
        home.path().join("skills/deploy/SKILL.md"),
        "---\nname: deploy\ndescription: Ship it\ntriggers: deploy\n---\nRun make deploy.\n",
    )
    .unwrap();
    let gateway = start_in(home, &["--heartbeat-secs", "3600"], &[]);
    let deliveries = || {
        let listed = gateway.get("/api/skills").body;
        let deploy =
            listed["skills"].as_array().unwrap().iter().find(|skill| skill["name"] == "deploy").unwrap().clone();
        deploy["deliveries"].as_u64().unwrap_or(0)
    };
    for _ in 0..3 {
        let preview = gateway.get("/api/memory/context-preview?q=please%20deploy%20now").body;
        assert!(preview["message"]["text"].as_str().unwrap().contains("Run make deploy."), "{preview}");
    }
    assert_eq!(deliveries(), 0, "previews record nothing");
    let posted = gateway.send(
        "POST",
        "/api/sessions/s-skills/messages",
        &json!({"messages": [{"role": "user", "content": "please deploy now"}]}),
    );
    assert!(posted.body["context"]["text"].as_str().unwrap().contains("Run make deploy."), "{}", posted.body);
    assert_eq!(deliveries(), 1, "a body that reached a prompt is one delivery");
}
