//! Two `cairn serve` processes on one PostgreSQL store (`CAIRN_STORAGE_URL`),
//! against a real server: `.ci/run` starts a throwaway cluster and sets
//! `CAIRN_TEST_POSTGRES_URL`; under `CI=true` a missing server fails.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use serde_json::{Value, json};

use crate::serve::{Gateway, http_agent, start_in, tiny_model};

/// A fresh database on the test server, as a URL; `None` (outside CI)
/// when no server is configured.
fn fresh_database() -> Option<String> {
    let Ok(base) = std::env::var("CAIRN_TEST_POSTGRES_URL") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CAIRN_TEST_POSTGRES_URL is not set: .ci/run starts a throwaway PostgreSQL cluster and sets it"
        );
        eprintln!("skipping: CAIRN_TEST_POSTGRES_URL is not set");
        return None;
    };
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!("cairn_gw_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
    let mut admin = postgres::Client::connect(&base, postgres::NoTls).unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
    let (root, _) = base.rsplit_once('/').unwrap();
    Some(format!("{root}/{name}"))
}

/// The live value under `key`, read through `gateway`.
fn value_of(gateway: &Gateway, key: &str) -> Option<Value> {
    let listed = gateway.get(&format!("/api/memory/semantic?prefix={key}")).body;
    listed["entries"].as_array().unwrap().iter().find(|entry| entry["key"] == key).map(|entry| entry["value"].clone())
}

/// Two gateways, each with its own home, on the store at `url`.
fn two_gateways(url: &str, args: &[&str]) -> (Gateway, Gateway) {
    let env = [("CAIRN_STORAGE_URL", url)];
    let first = start_in(tempfile::tempdir().unwrap(), args, &env);
    let second = start_in(tempfile::tempdir().unwrap(), args, &env);
    (first, second)
}

#[test]
fn a_fact_written_through_one_gateway_is_read_through_the_other_at_once() {
    let Some(url) = fresh_database() else { return };
    let (a, b) = two_gateways(&url, &[]);
    for (writer, reader, key, value) in [(&a, &b, "pref.editor", "helix"), (&b, &a, "pref.editor", "zed")] {
        let written = writer.send("PUT", "/api/memory/semantic", &json!({"key": key, "value": value}));
        assert_eq!(written.status, 200, "{}", written.body);
        assert_eq!(value_of(reader, key), Some(json!(value)));
    }
    assert_eq!(a.delete("/api/memory/semantic/pref.editor").status, 200);
    assert_eq!(value_of(&b, "pref.editor"), None);
    let stats = b.get("/api/memory/stats").body;
    assert_eq!(
        (stats["stats"]["semantic_live"].as_i64(), stats["stats"]["semantic_deleted"].as_i64()),
        (Some(0), Some(1))
    );
    // The home holds no memory.db: the rows are in PostgreSQL.
    assert!(!a.home().join("memory.db").exists());
    let mut a = a;
    assert!(a.terminate().success(), "a clean stop on PostgreSQL exits 0");
}

#[test]
fn an_episodic_fragment_written_through_one_gateway_is_found_by_the_others_vector_search() {
    let Some(url) = fresh_database() else { return };
    let models = tempfile::tempdir().unwrap();
    let model = tiny_model(models.path());
    let (a, b) = two_gateways(&url, &["--model-path", model.to_str().unwrap(), "--heartbeat-secs", "1"]);
    for gateway in [&a, &b] {
        gateway.wait_for("/api/memory/embedding-status", "the model to load", |body| body["setup_step"] == "done");
    }
    // B builds its vector index before A writes, so finding the row means catching up.
    let text = "We hiked the ridge trail above the lake at dawn";
    assert_eq!(b.get("/api/memory/episodic/search?q=ridge%20trail").status, 200);
    let written = a.send("POST", "/api/memory/episodic", &json!({"text": text}));
    assert_eq!(written.body["result"]["outcome"], "inserted", "{}", written.body);
    assert_eq!(written.body["result"]["has_vector"], true, "{}", written.body);
    let id = written.body["result"]["id"].clone();
    let query = "/api/memory/episodic/search?q=We%20hiked%20the%20ridge%20trail%20above%20the%20lake%20at%20dawn";
    let found = b.get(query).body;
    let hit = &found["results"][0];
    assert_eq!(hit["id"], id, "{found}");
    assert_eq!(hit["score"]["vector_rank"], 1, "found by the vector index: {found}");
    assert!(hit["score"]["cosine"].as_f64().unwrap() > 0.99, "{found}");
    // A tombstone through B leaves A's results at once.
    assert_eq!(b.delete(&format!("/api/memory/episodic/{id}")).status, 200);
    let after = a.get(query).body;
    assert!(after["results"].as_array().unwrap().iter().all(|hit| hit["id"] != id), "{after}");
}

#[test]
fn another_gateways_index_catches_up_while_its_writes_go_on_before_any_search() {
    let Some(url) = fresh_database() else { return };
    // Keyword only: every distinct text is a new fragment.
    let (a, b) = two_gateways(&url, &[]);
    assert_eq!(b.get("/api/memory/episodic/search?q=harbour").status, 200, "B builds its keyword index");
    let indexed = |gateway: &Gateway| {
        gateway.get("/api/memory/embedding-status").body["episodic_index"]["keyword_index_len"].as_u64()
    };
    assert_eq!(indexed(&b), Some(0));
    // A writes a fragment every 100 ms, never pausing as long as B's
    // listener polls (500 ms); B's status reads its index without a search.
    let (stop, writing) = (AtomicBool::new(false), AtomicBool::new(true));
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let started = std::time::Instant::now();
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) && started.elapsed() < std::time::Duration::from_secs(30) {
                let text = format!("The ferry number {n} left the northern harbour on time");
                let written = a.send("POST", "/api/memory/episodic", &json!({"text": text}));
                assert_eq!(written.body["result"]["outcome"], "inserted", "{}", written.body);
                n += 1;
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            writing.store(false, Ordering::SeqCst);
        });
        let started = std::time::Instant::now();
        let caught_up = loop {
            if indexed(&b).unwrap_or(0) >= 3 {
                break writing.load(Ordering::SeqCst);
            }
            if !writing.load(Ordering::SeqCst) || started.elapsed() > std::time::Duration::from_secs(25) {
                break false;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        stop.store(true, Ordering::SeqCst);
        assert!(caught_up, "B's index stayed behind while A wrote: {:?}", indexed(&b));
    });
}

/// The conflict ladder, restated: user-explicit wins over everything and
/// only user-explicit overwrites it; otherwise a confidence within 0.1 of
/// the stored one or higher replaces it.
fn ladder_allows(stored: Option<&(String, f64)>, source: &str, confidence: f64) -> bool {
    match stored {
        None => true,
        Some(_) if source == "user_explicit" => true,
        Some((stored_source, _)) if stored_source == "user_explicit" => false,
        Some((_, stored_confidence)) => confidence + 0.1 + 1e-9 >= *stored_confidence,
    }
}

#[test]
fn four_clients_on_two_gateways_lose_no_acknowledged_write_and_break_no_ladder_rule() {
    const CLIENTS: usize = 4;
    const WRITES: usize = 200;
    let Some(url) = fresh_database() else { return };
    let (a, b) = two_gateways(&url, &[]);
    let keys = [
        "project.k0",
        "project.k1",
        "project.k2",
        "project.k3",
        "project.k4",
        "project.k5",
        "project.k6",
        "project.k7",
    ];
    let mut acknowledged: Vec<(String, String, String)> = Vec::new();
    std::thread::scope(|scope| {
        let mut clients = Vec::new();
        for (g, gateway) in [&a, &b].into_iter().enumerate() {
            for c in 0..CLIENTS {
                let (base, auth) = (gateway.base.clone(), gateway.auth());
                clients.push(scope.spawn(move || {
                    let agent = http_agent();
                    let mut acked = Vec::new();
                    for i in 0..WRITES {
                        let n = g * 10_000 + c * 1_000 + i;
                        let key = keys[(i * 3 + c + g) % keys.len()];
                        let source = if n % 7 == 0 { "user_explicit" } else { "consolidation" };
                        let confidence = [0.8, 0.85, 0.9, 0.95, 1.0][(n / 3) % 5];
                        let value = format!("g{g}c{c}i{i}");
                        let response = agent
                            .put(&format!("{base}/api/memory/semantic"))
                            .header("Authorization", &auth)
                            .send_json(json!({"key": key, "value": value, "confidence": confidence, "source": source}))
                            .unwrap();
                        assert_eq!(response.status(), 200);
                        let body: Value =
                            serde_json::from_str(&response.into_body().read_to_string().unwrap()).unwrap();
                        acked.push((key.to_owned(), value, body["result"]["outcome"].as_str().unwrap().to_owned()));
                    }
                    acked
                }));
            }
        }
        for client in clients {
            acknowledged.extend(client.join().unwrap());
        }
    });
    assert_eq!(acknowledged.len(), CLIENTS * 2 * WRITES);

    // Replay the audit trail in commit order through the ladder.
    let mut store = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let events = store
        .query(
            "SELECT action, key, new_value, source, confidence FROM cairn.memory_events
             WHERE memory_type = 'semantic' ORDER BY id",
            &[],
        )
        .unwrap();
    assert_eq!(events.len(), acknowledged.len(), "one audit row per write (no value repeats)");
    let skipped = events.iter().filter(|event| event.get::<_, String>(0) == "conflict_skip").count();
    assert!(skipped > 0 && skipped < events.len(), "the burst exercises both rungs of the ladder ({skipped} skips)");
    let mut state: HashMap<String, (String, f64)> = HashMap::new();
    let mut last_value: HashMap<String, String> = HashMap::new();
    let mut told: HashMap<(String, String), String> = HashMap::new();
    for event in &events {
        let (action, key, value, source, confidence): (String, String, String, String, f64) =
            (event.get(0), event.get(1), event.get(2), event.get(3), event.get(4));
        let allowed = ladder_allows(state.get(&key), &source, confidence);
        match action.as_str() {
            "created" | "updated" => {
                assert!(allowed, "{key} = {value} was written against the ladder");
                state.insert(key.clone(), (source, confidence));
                last_value.insert(key.clone(), value.clone());
            }
            "conflict_skip" => assert!(!allowed, "{key} = {value} was skipped although the ladder allows it"),
            other => panic!("unexpected action {other}"),
        }
        told.insert((key, value), action);
    }
    // Every acknowledged outcome is the one the trail recorded.
    for (key, value, outcome) in &acknowledged {
        let recorded = told.get(&(key.clone(), json!(value).to_string())).map(String::as_str);
        let expected = if outcome == "skipped" { "conflict_skip" } else { outcome.as_str() };
        assert_eq!(recorded, Some(expected), "{key} = {value} was acknowledged as {outcome}");
    }
    // The rows hold the last accepted write of each key, read through either gateway.
    for key in keys {
        let expected = last_value.get(key).map(|value| serde_json::from_str::<Value>(value).unwrap());
        for gateway in [&a, &b] {
            assert_eq!(value_of(gateway, key), expected, "{key}");
        }
    }
}

#[test]
fn sigkill_of_one_gateway_mid_burst_loses_nothing_it_acknowledged() {
    let Some(url) = fresh_database() else { return };
    let (mut a, b) = two_gateways(&url, &[]);
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = [(&a, "a"), (&b, "b")]
        .into_iter()
        .flat_map(|(gateway, name)| (0..2).map(move |writer| (gateway.base.clone(), gateway.auth(), name, writer)))
        .map(|(base, auth, name, writer)| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let agent = http_agent();
                let mut acknowledged = Vec::new();
                for index in 0.. {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let key = format!("project.{name}{writer}.n{index}");
                    let text = format!("Gateway {name} writer {writer} wrote fragment number {index}");
                    let fact = agent
                        .put(&format!("{base}/api/memory/semantic"))
                        .header("Authorization", &auth)
                        .send_json(json!({"key": key, "value": index}));
                    let fragment = agent
                        .post(&format!("{base}/api/memory/episodic"))
                        .header("Authorization", &auth)
                        .send_json(json!({"text": text}));
                    match (fact, fragment) {
                        (Ok(fact), Ok(fragment)) if fact.status() == 200 && fragment.status() == 200 => {
                            acknowledged.push((key, text));
                        }
                        // The killed gateway refuses or drops the connection; the other goes on.
                        _ => break,
                    }
                }
                acknowledged
            })
        })
        .collect();
    a.wait_for("/api/memory/stats", "some writes", |body| body["stats"]["semantic_live"].as_i64().unwrap_or(0) >= 200);
    a.kill();
    // The surviving gateway keeps writing for a while after the kill.
    b.wait_for("/api/memory/stats", "writes after the kill", |body| {
        body["stats"]["semantic_live"].as_i64().unwrap_or(0) >= 400
    });
    stop.store(true, Ordering::SeqCst);
    let acknowledged: Vec<(String, String)> = writers.into_iter().flat_map(|writer| writer.join().unwrap()).collect();
    assert!(acknowledged.iter().any(|(key, _)| key.starts_with("project.a")));
    let entries = b.get("/api/memory/semantic?prefix=project.").body;
    let stored: std::collections::HashSet<&str> =
        entries["entries"].as_array().unwrap().iter().map(|entry| entry["key"].as_str().unwrap()).collect();
    let missing: Vec<&String> =
        acknowledged.iter().map(|(key, _)| key).filter(|key| !stored.contains(key.as_str())).collect();
    assert!(missing.is_empty(), "{} acknowledged facts missing: {:?}", missing.len(), &missing[..missing.len().min(5)]);
    let mut store = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let texts: std::collections::HashSet<String> = store
        .query("SELECT text FROM cairn.episodic_memories WHERE NOT is_deleted", &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    let lost: Vec<&String> = acknowledged.iter().map(|(_, text)| text).filter(|text| !texts.contains(*text)).collect();
    assert!(lost.is_empty(), "{} acknowledged fragments missing: {:?}", lost.len(), &lost[..lost.len().min(5)]);
}

/// `cairn memory <args> --json` in `home`, on the store `storage_url` names (SQLite when `None`).
fn memory_cli(home: &std::path::Path, storage_url: Option<&str>, args: &[&str]) -> Value {
    let mut command = crate::cairn();
    command.arg("--home").arg(home).arg("memory").args(args).env_remove("CAIRN_STORAGE_URL");
    if let Some(url) = storage_url {
        command.env("CAIRN_STORAGE_URL", url);
    }
    let output = command.output().unwrap();
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8(output.stdout).unwrap();
    serde_json::from_str(stdout.trim()).unwrap_or(Value::String(stdout))
}

/// An export document without the time it was written.
fn exported_rows(path: &std::path::Path) -> Value {
    let mut document: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    document.as_object_mut().unwrap().remove("exported_at");
    document
}

#[test]
fn an_export_from_sqlite_restores_into_postgresql_and_back_exactly() {
    let Some(url) = fresh_database() else { return };
    let legacy = tempfile::tempdir().unwrap();
    let memory = legacy.path().join("workspace/memory");
    std::fs::create_dir_all(memory.join("history")).unwrap();
    std::fs::write(memory.join("preferences.md"), "- editor: helix\n- theme: dark\n").unwrap();
    std::fs::write(
        memory.join("history/2026-01-02.md"),
        "\n#### 09:15\nSet up the Cairn repository today.\n\n#### 11:40\nMoved the standup to nine thirty.\n",
    )
    .unwrap();
    std::fs::write(
        legacy.path().join("lessons.jsonl"),
        "{\"rule\": \"Run cargo fmt before committing\", \"category\": \"tool\"}\n",
    )
    .unwrap();
    let sqlite = tempfile::tempdir().unwrap();
    memory_cli(sqlite.path(), None, &["migrate", "--from", legacy.path().to_str().unwrap(), "--json"]);
    // Rows from more than one source, a changed value and a deleted key.
    memory_cli(
        sqlite.path(),
        None,
        &["semantic", "set", "project.lang", "rust", "--source", "consolidation", "--confidence", "0.9", "--json"],
    );
    memory_cli(sqlite.path(), None, &["semantic", "set", "pref.editor", "zed", "--json"]);
    memory_cli(sqlite.path(), None, &["semantic", "delete", "pref.theme", "--json"]);
    // And the home's own Markdown memory.
    let history = sqlite.path().join("memory/history");
    std::fs::create_dir_all(&history).unwrap();
    std::fs::write(history.join("2026-01-03.md"), "\n#### 10:00\nReviewed the storage seam.\n").unwrap();
    std::fs::write(sqlite.path().join("memory/projects.md"), "## cairn\nMemory for agent hosts.\n").unwrap();
    let first = sqlite.path().join("first.json");
    memory_cli(sqlite.path(), None, &["export", first.to_str().unwrap()]);

    let postgres = tempfile::tempdir().unwrap();
    let restored = memory_cli(postgres.path(), Some(&url), &["import", first.to_str().unwrap(), "--restore", "--json"]);
    assert_eq!(
        (&restored["semantic_written"], &restored["lessons_written"], &restored["deleted_written"]),
        (&json!(2), &json!(1), &json!(1)),
        "{restored}"
    );
    let second = postgres.path().join("second.json");
    memory_cli(postgres.path(), Some(&url), &["export", second.to_str().unwrap()]);
    assert_eq!(exported_rows(&second), exported_rows(&first), "SQLite -> PostgreSQL");

    // The server's store now holds memory: a second restore is refused, exit 1.
    let again = crate::cairn()
        .arg("--home")
        .arg(postgres.path())
        .args(["memory", "import", first.to_str().unwrap(), "--restore"])
        .env("CAIRN_STORAGE_URL", &url)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1), "{again:?}");
    assert!(String::from_utf8_lossy(&again.stderr).contains("needs an empty store"), "{again:?}");
    // Repair rebuilds a memory.db file; on the server's store it refuses and says why.
    let repair = crate::cairn()
        .arg("--home")
        .arg(postgres.path())
        .args(["memory", "repair"])
        .env("CAIRN_STORAGE_URL", &url)
        .output()
        .unwrap();
    assert!(!repair.status.success());
    assert!(String::from_utf8_lossy(&repair.stderr).contains("PostgreSQL"), "{repair:?}");

    let back = tempfile::tempdir().unwrap();
    memory_cli(back.path(), None, &["import", second.to_str().unwrap(), "--restore", "--json"]);
    let third = back.path().join("third.json");
    memory_cli(back.path(), None, &["export", third.to_str().unwrap()]);
    assert_eq!(exported_rows(&third), exported_rows(&first), "PostgreSQL -> SQLite");
    let rows = exported_rows(&first);
    for layer in ["semantic", "lessons", "episodic", "deleted"] {
        assert!(rows[layer].as_array().is_some_and(|rows| !rows.is_empty()), "{layer}: {rows}");
    }
    let sources: std::collections::BTreeSet<&str> =
        rows["semantic"].as_array().unwrap().iter().map(|row| row["source"].as_str().unwrap()).collect();
    assert!(sources.len() >= 2, "{sources:?}");
    assert!(!rows["files"]["history"].as_object().unwrap().is_empty(), "{rows}");
}
