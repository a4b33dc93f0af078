//! Issue 44's acceptance: a scripted model on loopback emits ten facts for a
//! recorded transcript (five quoting it, three quoting words it never
//! holds, two the transcript later abandons). Exactly five are written, the
//! audit holds three `quote_not_found` and two `unresolved_hypothesis`, and
//! every written row shows its evidence through the CLI, MCP and HTTP.

use std::path::Path;

use serde_json::{Value, json};

use crate::cairn;
use crate::mcp::{connect, ok};
use crate::memory_consolidate::consolidate;
use crate::serve::start_in;
use crate::support::scripted_llm;

/// The recorded session, numbered from 0 as the prompt numbers it.
const TRANSCRIPT: &[(&str, &str)] = &[
    ("user", "I work on the billing service and I prefer tabs over spaces."),
    ("assistant", "Got it, tabs it is."),
    ("user", "Our staging database is Postgres 16 on db-stage-2."),
    ("assistant", "Noted the staging database."),
    ("user", "Let's pin the Rust toolchain to 1.79 for the billing build."),
    ("assistant", "Pinned the toolchain to 1.79."),
    ("user", "That didn't work, the build needs 1.82 features."),
    ("user", "Maybe the flaky test comes from clock skew on the CI runners."),
    ("assistant", "I'll check the runners."),
    ("user", "I was wrong about clock skew on the CI runners; it is a race in the test itself."),
    ("user", "Deploys go out on Tuesdays after the standup."),
    ("assistant", "Okay, Tuesday deploys."),
    ("user", "My editor is helix and I review code in the mornings."),
    ("assistant", "Thanks, noted."),
];

/// `(key, value, from, to, quote)` of the facts that must be written.
const QUOTED: &[(&str, &str, u64, u64, &str)] = &[
    ("pref.indentation", "tabs", 0, 1, "I prefer tabs over spaces"),
    ("project.staging_db", "postgres 16", 2, 2, "staging database is  POSTGRES 16"),
    ("project.deploy_day", "tuesday", 10, 11, "Deploys go out on Tuesdays after the standup"),
    ("pref.editor", "helix", 12, 12, "My editor is helix"),
    ("user.review_time", "mornings", 12, 13, "I review code in the mornings"),
];

/// Facts whose quotes the transcript does not hold.
const INVENTED: &[(&str, &str, u64, u64, &str)] = &[
    ("pref.language", "go", 4, 5, "we write everything in Go"),
    ("project.owner", "alice", 0, 3, "Alice owns the billing service"),
    ("pref.timezone", "utc", 12, 13, "my timezone is UTC"),
];

/// Facts the transcript abandons later: the next message says "didn't
/// work"; a later one says "I was wrong" about the same clock skew.
const ABANDONED: &[(&str, &str, u64, u64, &str)] = &[
    ("project.toolchain", "1.79", 4, 5, "pin the Rust toolchain to 1.79"),
    ("project.flaky_cause", "clock skew", 7, 7, "flaky test comes from clock skew on the CI runners"),
];

fn fact(&(key, value, from, to, quote): &(&str, &str, u64, u64, &str)) -> Value {
    json!({"key": key, "value": value, "confidence": 0.9, "evidence": {"from": from, "to": to, "quote": quote}})
}

fn cli(home: &Path, args: &[&str]) -> String {
    let output = cairn().arg("--home").arg(home).args(args).env("CAIRN_SKIP_MODEL_DOWNLOAD", "1").output().unwrap();
    assert!(output.status.success(), "{args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap()
}

fn cli_json(home: &Path, args: &[&str]) -> Value {
    let stdout = cli(home, args);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|_| panic!("{args:?} printed {stdout:?}"))
}

/// The evidence a written fact must show (the quote as stored: whitespace folded).
fn expected(&(_, _, from, to, quote): &(&str, &str, u64, u64, &str)) -> Value {
    let quote = quote.split_whitespace().collect::<Vec<_>>().join(" ");
    json!({"session_key": "chat-1", "from_message": from, "to_message": to, "quote": quote})
}

#[test]
fn consolidation_writes_only_quoted_settled_facts_and_every_surface_shows_their_evidence() {
    let home = tempfile::tempdir().unwrap();
    let transcript = home.path().join("chat.jsonl");
    let lines: Vec<String> =
        TRANSCRIPT.iter().map(|(role, content)| json!({"role": role, "content": content}).to_string()).collect();
    std::fs::write(&transcript, lines.join("\n")).unwrap();

    // Interleaved, so order proves nothing.
    let facts: Vec<Value> =
        [&QUOTED[..2], &INVENTED[..1], &ABANDONED[..1], &QUOTED[2..4], &INVENTED[1..], &ABANDONED[1..], &QUOTED[4..]]
            .concat()
            .iter()
            .map(fact)
            .collect();
    assert_eq!(facts.len(), 10);
    let lesson_quote = "Deploys go out on Tuesdays after the standup";
    let history = json!({
        "history": null,
        "lessons": [{"rule": "Deploy on Tuesdays after the standup", "category": "knowledge",
                     "evidence": {"from": 10, "to": 10, "quote": lesson_quote}}]
    });
    let (url, prompts, server) = scripted_llm(vec![json!({"semantic": facts}).to_string(), history.to_string()]);
    let (code, report) = consolidate(home.path(), &url, &transcript);
    server.join().unwrap();
    assert_eq!(code, 0, "{report}");
    let prompt = prompts.recv().unwrap();
    assert!(prompt.contains("#9 [user] I was wrong about clock skew"), "{prompt}");
    assert!(prompt.contains("\"quote\""), "{prompt}");

    assert_eq!(report["preferences"]["semantic_written"], json!(5), "{report}");
    let codes: Vec<&str> = report["preferences"]["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        ["quote_not_found", "unresolved_hypothesis", "quote_not_found", "quote_not_found", "unresolved_hypothesis"]
    );
    assert_eq!(report["history"]["lessons_written"], json!(1), "{report}");

    // The audit trail holds each refusal once, with the key it refused.
    let audit = cli_json(home.path(), &["memory", "audit", "-n", "200", "--json"]);
    let refused = |code: &str| -> Vec<String> {
        let mut keys: Vec<String> = audit
            .as_array()
            .unwrap()
            .iter()
            .filter(|event| event["detail"] == code)
            .map(|event| {
                assert_eq!((&event["action"], &event["source"]), (&json!("rejected"), &json!("consolidation")));
                event["key"].as_str().unwrap().to_owned()
            })
            .collect();
        keys.sort();
        keys
    };
    assert_eq!(refused("quote_not_found"), ["pref.language", "pref.timezone", "project.owner"]);
    assert_eq!(refused("unresolved_hypothesis"), ["project.flaky_cause", "project.toolchain"]);

    // CLI: exactly the quoted facts, each with its evidence.
    let listed = cli_json(home.path(), &["memory", "semantic", "list", "--json"]);
    let mut keys: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|entry| entry["key"].as_str())
        .filter(|key| !key.starts_with("lesson."))
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        ["pref.editor", "pref.indentation", "project.deploy_day", "project.staging_db", "user.review_time"]
    );
    for written in QUOTED {
        let entry = cli_json(home.path(), &["memory", "semantic", "get", written.0, "--json"]);
        assert_eq!(entry["evidence"], expected(written), "{entry}");
        let plain = cli(home.path(), &["memory", "semantic", "get", written.0]);
        let line = format!(
            "evidence: session chat-1, messages #{}..#{}: {:?}",
            written.2,
            written.3,
            expected(written)["quote"].as_str().unwrap()
        );
        assert!(plain.contains(&line), "{plain}");
    }
    let lessons = cli_json(home.path(), &["memory", "lessons", "list", "--json"]);
    assert_eq!(lessons[0]["evidence"]["quote"], lesson_quote, "{lessons}");
    let plain = cli(home.path(), &["memory", "lessons", "list"]);
    assert!(plain.contains("evidence: session chat-1, messages #10..#10"), "{plain}");
    // A fact a person writes carries none.
    cli(home.path(), &["memory", "semantic", "set", "pref.shell", "fish"]);
    assert!(cli_json(home.path(), &["memory", "semantic", "get", "pref.shell", "--json"]).get("evidence").is_none());

    // HTTP: the gateway's listing of facts and lessons.
    let gateway = start_in(home, &["--heartbeat-secs", "3600"], &[]);
    let entries = gateway.get("/api/memory/semantic").body;
    for written in QUOTED {
        let entry = entries["entries"].as_array().unwrap().iter().find(|entry| entry["key"] == written.0).unwrap();
        assert_eq!(entry["evidence"], expected(written), "{entry}");
    }
    assert!(
        entries["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|entry| entry["key"] == "pref.shell")
            .unwrap()
            .get("evidence")
            .is_none()
    );
    let lessons = gateway.get("/api/memory/lessons").body;
    assert_eq!(lessons["lessons"][0]["evidence"]["quote"], lesson_quote, "{lessons}");

    // MCP (a session on the same home, served through the running gateway): fact_get and learn_list.
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
        let client = connect(gateway.home()).await;
        for written in QUOTED {
            let answer = ok(&client, "fact_get", json!({"key": written.0})).await;
            assert_eq!(answer["entry"]["evidence"], expected(written), "{answer}");
        }
        let answer = ok(&client, "learn_list", json!({})).await;
        assert_eq!(answer["lessons"][0]["evidence"]["from_message"], 10, "{answer}");
        client.cancel().await.unwrap();
    });
}
