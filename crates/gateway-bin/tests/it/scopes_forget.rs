//! Memory the user controls, through the real binary: projects A and B
//! and a linked worktree of A (real git repositories) read their own
//! memory and the global memory only, through the Claude Code hook and
//! `memory_search` over MCP; a forget lists exactly what it removes and
//! what it removed stays forgotten through consolidation, import,
//! restore and `memory_remember`; a home written before scopes existed
//! opens with every row global and nothing lost.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::cairn;
use crate::mcp::{Client, connect_in, ok, refused};
use crate::support::{run_hook, scripted_llm};

/// Probe prompts per place.
const PROBES: usize = 100;
/// The names of the distinct rows per scope (a probe asks for one of them).
const NOTES: [&str; 10] = ["amber", "birch", "cedar", "dune", "ember", "fjord", "grove", "harbor", "iris", "juniper"];

fn git(dir: &Path, args: &[&str]) {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.email=test@example.com", "-c", "user.name=test", "-c", "init.defaultBranch=main"])
        .args(args)
        .output()
        .expect("git runs");
    assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
}

/// Repository A with a linked worktree, and repository B.
struct Places {
    _root: tempfile::TempDir,
    a: PathBuf,
    tree: PathBuf,
    b: PathBuf,
}

fn places() -> Places {
    let root = tempfile::tempdir().unwrap();
    let (a, tree, b) = (root.path().join("alpha"), root.path().join("alpha-feature"), root.path().join("beta"));
    for repo in [&a, &b] {
        std::fs::create_dir_all(repo).unwrap();
        git(repo, &["init", "-q"]);
        git(repo, &["commit", "-q", "--allow-empty", "-m", "start"]);
    }
    git(&a, &["worktree", "add", "-q", "-b", "feature", tree.to_str().unwrap()]);
    std::fs::create_dir_all(tree.join("src/deep")).unwrap();
    Places { _root: root, a, tree, b }
}

/// `cairn hook claude-code <event>` run by a host in `cwd`, answered by
/// the hook's own process (no gateway).
fn hook(home: &Path, event: &str, input: &Value) -> Value {
    let output = run_hook(home, &["claude-code", event], &input.to_string(), &[("CAIRN_HOST_START_GATEWAY", "0")]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    if output.stdout.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(&output.stdout).unwrap()
}

fn context_of(answer: &Value) -> String {
    answer["hookSpecificOutput"]["additionalContext"].as_str().unwrap_or("").to_owned()
}

fn prompt(home: &Path, cwd: &Path, session: &str, text: &str) -> String {
    let input = json!({
        "session_id": session,
        "transcript_path": "/nonexistent/transcript.jsonl",
        "cwd": cwd,
        "hook_event_name": "UserPromptSubmit",
        "prompt": text,
    });
    context_of(&hook(home, "UserPromptSubmit", &input))
}

fn session_start(home: &Path, cwd: &Path, session: &str) -> String {
    let input = json!({"session_id": session, "cwd": cwd, "hook_event_name": "SessionStart", "source": "startup"});
    context_of(&hook(home, "SessionStart", &input))
}

fn cli(home: &Path, args: &[&str]) -> std::process::Output {
    cairn().arg("--home").arg(home).args(args).env("CAIRN_SKIP_MODEL_DOWNLOAD", "1").output().unwrap()
}

fn cli_json(home: &Path, args: &[&str]) -> Value {
    let output = cli(home, args);
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|_| panic!("{args:?} printed {stdout:?} / {}", String::from_utf8_lossy(&output.stderr)))
}

/// The note `index` of a place: a service name and a port only it has.
fn note(service: &str, port_base: usize, index: usize) -> String {
    format!("Deploy note {}: the {service} service listens on port {}", NOTES[index], port_base + index)
}

async fn seed(home: &Path, places: &Places) -> (Client, Client, Client) {
    let (in_a, in_b, in_tree) =
        (connect_in(home, &places.a).await, connect_in(home, &places.b).await, connect_in(home, &places.tree).await);
    for index in 0..NOTES.len() {
        ok(&in_a, "memory_remember", json!({"text": note("alpha", 7000, index)})).await;
        ok(&in_b, "memory_remember", json!({"text": note("beta", 8000, index)})).await;
        ok(&in_a, "memory_remember", json!({"text": note("shared gateway", 9000, index), "scope": "global"})).await;
    }
    ok(&in_a, "fact_set", json!({"key": "project.deploy_cmd", "value": "make ship-alpha"})).await;
    ok(&in_b, "fact_set", json!({"key": "project.deploy_cmd", "value": "cargo dist-beta"})).await;
    ok(&in_b, "fact_set", json!({"key": "pref.deploy_day", "value": "Tuesday"})).await;
    ok(&in_a, "history_append", json!({"text": "Alpha swapped its walnut load balancer today"})).await;
    (in_a, in_b, in_tree)
}

fn ports(text: &str, base: usize) -> Vec<usize> {
    (0..NOTES.len()).map(|index| base + index).filter(|port| text.contains(&format!("port {port}"))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projects_and_worktrees_read_their_own_memory_and_the_global_memory_only() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let places = places();
    let (in_a, in_b, in_tree) = seed(home, &places).await;

    // Each place: (its directory, its own port range, the other project's).
    let cases = [
        ("alpha", places.a.clone(), 7000, 8000),
        ("alpha worktree", places.tree.join("src/deep"), 7000, 8000),
        ("beta", places.b.clone(), 8000, 7000),
    ];
    for (name, dir, own, other) in &cases {
        let (mut own_seen, mut global_seen) = (0, 0);
        for probe in 0..PROBES {
            let index = probe % NOTES.len();
            let text = format!("deploy note {}: which port does the service listen on?", NOTES[index]);
            let context = prompt(home, dir, &format!("{name}-{probe}"), &text);
            assert!(ports(&context, *other).is_empty(), "{name} probe {probe} sees the other project:\n{context}");
            own_seen += usize::from(ports(&context, *own).contains(&(own + index)));
            global_seen += usize::from(ports(&context, 9000).contains(&(9000 + index)));
        }
        assert_eq!((own_seen, global_seen), (PROBES, PROBES), "{name}: own and global rows recalled");
        let start = session_start(home, dir, &format!("{name}-start"));
        let (mine, theirs) =
            if *own == 7000 { ("make ship-alpha", "cargo dist-beta") } else { ("cargo dist-beta", "make ship-alpha") };
        assert!(start.contains(mine) && !start.contains(theirs), "{name}: {start}");
        assert!(start.contains("pref.deploy_day"), "{name}: global facts reach every project: {start}");
        assert_eq!(start.contains("walnut load balancer"), *own == 7000, "{name}: a project's history entry: {start}");
    }

    for (name, client, own, other) in
        [("alpha", &in_a, 7000, 8000), ("worktree", &in_tree, 7000, 8000), ("beta", &in_b, 8000, 7000)]
    {
        for probe in 0..PROBES {
            let index = probe % NOTES.len();
            let query = format!("deploy note {} port", NOTES[index]);
            let found = ok(client, "memory_search", json!({"query": query, "limit": 50})).await;
            let text = found["hits"].to_string();
            assert!(ports(&text, other).is_empty(), "{name} probe {probe}: {text}");
            assert!(ports(&text, own).contains(&(own + index)), "{name} probe {probe}: {text}");
            assert!(ports(&text, 9000).contains(&(9000 + index)), "{name} probe {probe}: {text}");
        }
        let across =
            ok(client, "memory_search", json!({"query": "deploy note cedar port", "all_projects": true, "limit": 50}))
                .await;
        assert!(!ports(&across["hits"].to_string(), other).is_empty(), "{name}: all_projects reads across projects");
    }

    // The sessions the hooks recorded carry the project they ran in.
    let db = rusqlite::Connection::open(home.join("memory.db")).unwrap();
    let scope_of = |session: &str| -> String {
        db.query_row("SELECT scope FROM session_state WHERE session_key = ?1", [session], |row| row.get(0)).unwrap()
    };
    assert_eq!(scope_of("claude-code:alpha-0"), scope_of("claude-code:alpha worktree-0"));
    assert_ne!(scope_of("claude-code:alpha-0"), scope_of("claude-code:beta-0"));
    assert!(scope_of("claude-code:alpha-0").starts_with("alpha-"), "{}", scope_of("claude-code:alpha-0"));
    for client in [in_a, in_b, in_tree] {
        client.cancel().await.unwrap();
    }
}

#[test]
fn separate_worktrees_is_a_setting_and_a_bad_value_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let places = places();
    let add = |dir: &Path, text: &str| {
        let output = cli(home.path(), &["memory", "episodic", "add", text, "--project", dir.to_str().unwrap()]);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    };
    add(&places.a, "The alpha main checkout builds with the nightly toolchain");
    let seen_from_tree =
        |home: &Path| prompt(home, &places.tree, "s", "which toolchain does the alpha checkout build with");
    assert!(seen_from_tree(home.path()).contains("nightly toolchain"));
    std::fs::write(home.path().join("config.json"), r#"{"memory": {"separate_worktrees": true}}"#).unwrap();
    assert!(!seen_from_tree(home.path()).contains("nightly toolchain"), "a worktree is its own project now");
    std::fs::write(home.path().join("config.json"), r#"{"memory": {"separate_worktrees": "yes"}}"#).unwrap();
    let output = cli(home.path(), &["memory", "stats"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("memory.separate_worktrees"));
}

const FORGOTTEN: &str = "The staging cluster lives in the Frankfurt rack behind the blue door";

fn frankfurt_hits(home: &Path) -> usize {
    let found = cli_json(home, &["memory", "search", "Frankfurt rack blue door", "--all-projects", "--json"]);
    let facts = cli_json(home, &["memory", "semantic", "list", "--all-projects", "--json"]);
    let text = format!("{found}{facts}");
    text.matches("Frankfurt").count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_forgotten_stays_forgotten_on_every_write_path() {
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let places = places();
    let client = connect_in(home, &places.a).await;
    ok(&client, "memory_remember", json!({"text": FORGOTTEN})).await;
    ok(&client, "fact_set", json!({"key": "project.staging", "value": FORGOTTEN})).await;
    ok(&client, "memory_remember", json!({"text": "The production cluster is run by the platform team"})).await;
    prompt(home, &places.a, "f-1", &format!("note this: {FORGOTTEN}"));
    assert!(frankfurt_hits(home) >= 2);

    let preview = ok(&client, "memory_forget", json!({"query": "frankfurt rack behind the BLUE door"})).await;
    assert_eq!(preview["dry_run"], true);
    assert_eq!(
        (
            preview["counts"]["episodic"].as_u64(),
            preview["counts"]["facts"].as_u64(),
            preview["counts"]["transcripts"].as_u64()
        ),
        (Some(1), Some(1), Some(1)),
        "{preview}"
    );
    assert!(frankfurt_hits(home) >= 2, "a preview changes nothing");
    let done =
        ok(&client, "memory_forget", json!({"query": "frankfurt rack behind the BLUE door", "confirm": true})).await;
    assert_eq!((&done["counts"], &done["items"]), (&preview["counts"], &preview["items"]));
    assert_eq!(frankfurt_hits(home), 0);

    // Consolidation of a transcript that repeats it: every item is refused as forgotten.
    let transcript = home.join("repeat.jsonl");
    std::fs::write(&transcript, format!("{}\n", json!({"role": "user", "content": FORGOTTEN}))).unwrap();
    let cited = json!({"from": 0, "to": 0, "quote": FORGOTTEN});
    let (url, _prompts, server) = scripted_llm(vec![
        json!({"semantic": [{"key": "pref.staging", "value": FORGOTTEN, "confidence": 0.95, "evidence": cited}]})
            .to_string(),
        json!({"history": null, "episodic": [{"text": FORGOTTEN, "evidence": cited}], "lessons": [{"rule": FORGOTTEN, "category": "knowledge", "evidence": cited}]})
            .to_string(),
    ]);
    let output = cli(
        home,
        &[
            "memory",
            "consolidate",
            "--session",
            "repeat",
            "--transcript",
            transcript.to_str().unwrap(),
            "--llm-base-url",
            &url,
            "--llm-model",
            "scripted",
            "--json",
        ],
    );
    server.join().unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    assert_eq!(report.matches("\"forgotten\"").count(), 3, "each refusal is reported: {report}");

    // A document holding it, merged and restored.
    let document = json!({
        "format": "cairn-memory-export", "version": 2, "schema_version": 7, "exported_at": 1_700_000_000_000_i64,
        "semantic": [{"key": "pref.staging_note", "value": FORGOTTEN, "confidence": 1.0, "source": "user_explicit", "updated_at": 1_700_000_000_000_i64}],
        "lessons": [], "deleted": [],
        "episodic": [{"text": format!("Archived: {FORGOTTEN}."), "importance": 0.5, "created_at": 1_700_000_000_000_i64, "source": "user_explicit"}],
        "files": {"preferences": "", "projects": "", "history": {}},
    });
    let file = home.join("holding.json");
    std::fs::write(&file, document.to_string()).unwrap();
    let merged = cli(home, &["memory", "import", file.to_str().unwrap(), "--json"]);
    let merged = String::from_utf8_lossy(&merged.stdout);
    assert_eq!(merged.matches("\"code\":\"forgotten\"").count(), 2, "{merged}");
    let restored = cli(home, &["memory", "import", file.to_str().unwrap(), "--restore", "--json"]);
    assert!(!restored.status.success(), "a restore into this home is refused");

    let (code, _) = refused(&client, "memory_remember", json!({"text": FORGOTTEN})).await;
    assert_eq!(code, "forgotten");
    let (code, _) = refused(&client, "fact_set", json!({"key": "pref.again", "value": FORGOTTEN})).await;
    assert_eq!(code, "forgotten");
    assert_eq!(frankfurt_hits(home), 0);
    let audit = cli_json(home, &["memory", "audit", "-n", "200", "--json"]).to_string();
    assert!(audit.contains("forgotten"), "the refusals are audited");
    client.cancel().await.unwrap();
}

#[test]
fn the_cli_forget_previews_then_forgets_a_whole_project_and_its_history() {
    let home = tempfile::tempdir().unwrap();
    let places = places();
    let a = places.a.to_str().unwrap();
    for text in ["Alpha keeps its fixtures in the testdata folder", "Alpha pins the linter to version 3"] {
        assert!(cli(home.path(), &["memory", "episodic", "add", text, "--project", a]).status.success());
    }
    assert!(cli(home.path(), &["memory", "episodic", "add", "The user reviews code every morning"]).status.success());
    assert!(cli(home.path(), &["memory", "files", "append", "Spent the day on the alpha linter"]).status.success());

    let preview = cli_json(home.path(), &["memory", "forget", "--whole-project", "--project", a, "--json"]);
    assert_eq!((preview["dry_run"].as_bool(), preview["counts"]["episodic"].as_u64()), (Some(true), Some(2)));
    let done = cli_json(home.path(), &["memory", "forget", "--whole-project", "--project", a, "--yes", "--json"]);
    assert_eq!(done["counts"], preview["counts"]);
    let left = cli_json(home.path(), &["memory", "episodic", "list", "--all-projects", "--json"]);
    assert_eq!(left.as_array().unwrap().len(), 1, "{left}");

    let history =
        cli_json(home.path(), &["memory", "forget", "--query", "alpha linter", "--global", "--yes", "--json"]);
    assert_eq!(history["counts"]["history_entries"], 1, "{history}");
    let refused = cli(home.path(), &["memory", "forget", "--json"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stdout).contains("nothing_selected"));
    let bad = cli(home.path(), &["memory", "forget", "--since", "last tuesday"]);
    assert!(!bad.status.success());
}

#[test]
fn a_home_written_before_scopes_opens_with_every_row_global_and_nothing_lost() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/data");
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("memory/history")).unwrap();
    std::fs::copy(data.join("home-before-scopes/memory.db"), home.path().join("memory.db")).unwrap();
    std::fs::copy(
        data.join("home-before-scopes/memory/history/2026-12-05.md"),
        home.path().join("memory/history/2026-12-05.md"),
    )
    .unwrap();
    let before: Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("home-before-scopes.export.json")).unwrap()).unwrap();

    let output = cli(home.path(), &["memory", "export"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let mut after: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(after["schema_version"], 10);
    let mut expected = before.clone();
    for document in [&mut after, &mut expected] {
        document["exported_at"] = json!(0);
        document["schema_version"] = json!(0);
    }
    assert_eq!(after, expected, "the migrated home exports what it held");

    let db = rusqlite::Connection::open(home.path().join("memory.db")).unwrap();
    let scopes = |sql: &str| -> Vec<String> {
        let mut statement = db.prepare(sql).unwrap();
        statement.query_map([], |row| row.get(0)).unwrap().map(Result::unwrap).collect()
    };
    assert_eq!(scopes("SELECT DISTINCT scope FROM episodic_memories"), ["global"]);
    assert_eq!(scopes("SELECT DISTINCT scope FROM session_state"), ["global"]);
    let messages: i64 = db.query_row("SELECT count(*) FROM session_transcripts", [], |row| row.get(0)).unwrap();
    assert_eq!(messages, 1);
    // Global rows are seen from any project.
    let places = places();
    let start = session_start(home.path(), &places.b, "after");
    assert!(start.contains("pref.editor") && start.contains("cargo build --workspace"), "{start}");
}

#[test]
fn the_http_scope_parameters_and_forget_refuse_what_names_nothing() {
    let gateway = crate::serve::start(&[]);
    let kept = gateway.send("POST", "/api/memory/episodic", &json!({"text": "A fragment no refused call may touch"}));
    assert_eq!(kept.status, 200, "{:?}", kept.body);
    let refused_get = |path: &str, code: &str| {
        let reply = gateway.get(path);
        assert_eq!((reply.status, reply.body["code"].as_str()), (400, Some(code)), "{path}: {:?}", reply.body);
    };
    refused_get("/api/memory/episodic?project=Not%20A%20Scope", "invalid_scope");
    refused_get("/api/memory/semantic?only=x%40y", "invalid_scope");
    refused_get("/api/memory/episodic/search?q=fragment&project=..%2Fup", "invalid_scope");
    for (body, status, code) in [
        (json!({}), 422, "nothing_selected"),
        (json!({"query": "fragment", "scope": "everything"}), 400, "invalid_scope"),
        (json!({"query": "fragment", "scope": "project"}), 400, "project_required"),
        (json!({"query": "fragment", "project": "Bad Name"}), 400, "invalid_scope"),
        (json!({"since": "last tuesday"}), 400, "invalid_time"),
        (json!({"query": "fragment", "confirm": true, "everything": true}), 422, "invalid_body"),
    ] {
        let reply = gateway.send("POST", "/api/memory/forget", &body);
        assert_eq!((reply.status, reply.body["code"].as_str()), (status, Some(code)), "{body}: {:?}", reply.body);
    }
    let written =
        gateway.send("POST", "/api/memory/episodic", &json!({"text": "another fragment here", "project": "A B"}));
    assert_eq!((written.status, written.body["code"].as_str()), (400, Some("invalid_scope")), "{:?}", written.body);
    let call = json!({"project": "Bad Name!", "params": {"name": "memory_search", "arguments": {"query": "fragment"}}});
    let reply = gateway.send("POST", "/api/mcp/tools/call", &call);
    assert_eq!((reply.status, reply.body["code"].as_str()), (400, Some("invalid_scope")), "{:?}", reply.body);

    // Nothing was forgotten or written by the refused calls.
    let listed = gateway.get("/api/memory/episodic?all_projects=true");
    assert_eq!(listed.body["episodes"].as_array().unwrap().len(), 1, "{:?}", listed.body);
    let preview = gateway.send("POST", "/api/memory/forget", &json!({"query": "no refused call"}));
    assert_eq!(preview.body["report"]["counts"]["episodic"], 1, "{:?}", preview.body);
    assert_eq!(preview.body["report"]["dry_run"], true);
}
