//! One store suite, run against every backend: SQLite (through
//! [`MemoryDb`] itself), in memory, and PostgreSQL (a real server, from
//! `CAIRN_TEST_POSTGRES_URL`; under `CI=true` a missing server fails).
//!
//! The cases drive the code above the seam (the ladder, lesson dedup, the
//! audit cap), so each backend is held to the same outcomes.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::memory::MemoryBackend;
use super::postgres::PostgresBackend;
use super::{Backend, Counter, NewEvent};
use crate::error::{MemoryError, Result};
use crate::lessons::{LessonCategory, LessonWrite, apply_lesson, lesson_key, newest_lessons};
use crate::semantic::{PreparedWrite, apply_delete, apply_write, decide, load_existing};
use crate::types::{DeleteOutcome, MemoryAuditAction, Source, WriteOutcome};
use crate::{MemoryConfig, MemoryDb};

/// A store under test and a way to open a second handle on the same rows
/// (a second process or gateway, where the backend has one).
struct Fixture {
    backend: Arc<dyn Backend>,
    reopen: Box<dyn Fn() -> Arc<dyn Backend> + Send + Sync>,
    _home: Option<tempfile::TempDir>,
}

fn sqlite() -> Fixture {
    let home = tempfile::tempdir().unwrap();
    let path = home.path().join("memory.db");
    let open = move || -> Arc<dyn Backend> { Arc::new(MemoryDb::open(&path, MemoryConfig::default()).unwrap()) };
    Fixture { backend: open(), reopen: Box::new(open), _home: Some(home) }
}

fn memory() -> Fixture {
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::default());
    let shared = Arc::clone(&backend);
    Fixture { backend, reopen: Box::new(move || Arc::clone(&shared)), _home: None }
}

static SCHEMAS: AtomicU64 = AtomicU64::new(0);

fn postgres() -> Option<Fixture> {
    let Ok(url) = std::env::var("CAIRN_TEST_POSTGRES_URL") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CAIRN_TEST_POSTGRES_URL is not set: .ci/run starts a throwaway PostgreSQL cluster and sets it"
        );
        eprintln!("skipping: CAIRN_TEST_POSTGRES_URL is not set");
        return None;
    };
    // A fresh schema per test: the tests share one server and run in parallel.
    let schema = format!(
        "cairn_t{}_{}_{}",
        std::process::id(),
        SCHEMAS.fetch_add(1, Ordering::Relaxed),
        crate::db::now_ms() % 1_000_000
    );
    let open = move || -> Arc<dyn Backend> { Arc::new(PostgresBackend::open(&url, &schema).unwrap()) };
    Some(Fixture { backend: open(), reopen: Box::new(open), _home: None })
}

macro_rules! store_suite {
    ($($case:ident),* $(,)?) => {
        mod on_sqlite {
            $(#[test] fn $case() { super::$case(&super::sqlite()) })*
        }
        mod on_memory {
            $(#[test] fn $case() { super::$case(&super::memory()) })*
        }
        mod on_postgres {
            $(#[test] fn $case() { if let Some(fixture) = super::postgres() { super::$case(&fixture) } })*
        }
    };
}

store_suite!(
    ladder_outcomes,
    tombstones_and_revival,
    failed_write_leaves_nothing,
    audit_trail_is_bounded,
    revisions_move_on_changes_only,
    lessons_dedup_and_replace,
    backfill_stores_only_unchanged_rows,
    concurrent_writers_lose_nothing,
);

fn write(backend: &dyn Backend, key: &str, value: &str, confidence: f64, source: &Source) -> Result<WriteOutcome> {
    let value_text = serde_json::to_string(value).unwrap();
    backend.write("writing a semantic entry", |tx| {
        apply_write(
            tx,
            &PreparedWrite { key, value_text: &value_text, confidence, source, category: None, vector: None },
        )
    })
}

fn value_of(backend: &dyn Backend, key: &str) -> Option<String> {
    let row = backend.read("reading", |tx| tx.semantic_row(key)).unwrap()?;
    (!row.is_deleted).then(|| serde_json::from_str::<String>(&row.value).unwrap())
}

fn outcome_name(outcome: &WriteOutcome) -> String {
    match outcome {
        WriteOutcome::Created { .. } => "created".to_owned(),
        WriteOutcome::Updated { .. } => "updated".to_owned(),
        WriteOutcome::Unchanged { .. } => "unchanged".to_owned(),
        WriteOutcome::Skipped { reason, .. } => format!("skipped:{}", reason.code()),
    }
}

fn ladder_outcomes(fixture: &Fixture) {
    let user = Source::UserExplicit;
    let auto = Source::Consolidation;
    // (key, value, confidence, source, outcome, the value stored afterwards)
    let cases: &[(&str, &str, f64, &Source, &str, &str)] = &[
        ("pref.editor", "vim", 0.9, &auto, "created", "vim"),
        ("pref.editor", "vim", 0.9, &auto, "unchanged", "vim"),
        ("pref.editor", "helix", 0.8, &auto, "updated", "helix"),
        ("pref.editor", "nano", 0.6, &auto, "skipped:lower_confidence", "helix"),
        ("pref.editor", "zed", 0.5, &user, "updated", "zed"),
        ("pref.editor", "emacs", 1.0, &auto, "skipped:protected_user_explicit", "zed"),
        ("pref.editor", "kakoune", 0.3, &user, "updated", "kakoune"),
        ("pref.editor", "vscode", 1.0, &Source::Import, "skipped:existing_wins", "kakoune"),
        ("pref.theme", "dark", 0.9, &Source::Import, "created", "dark"),
    ];
    for (index, (key, value, confidence, source, outcome, stored)) in cases.iter().enumerate() {
        let got = write(&*fixture.backend, key, value, *confidence, source).unwrap();
        assert_eq!(outcome_name(&got), *outcome, "case {index}: {key} = {value}");
        assert_eq!(value_of(&*fixture.backend, key).as_deref(), Some(*stored), "case {index}");
    }
    let events = fixture.backend.read("reading", |tx| tx.newest_events(100)).unwrap();
    let actions: Vec<&str> = events.iter().rev().map(|event| event.action.as_str()).collect();
    assert_eq!(
        actions,
        ["created", "updated", "conflict_skip", "updated", "conflict_skip", "updated", "conflict_skip", "created"]
    );
}

fn tombstones_and_revival(fixture: &Fixture) {
    let backend = &*fixture.backend;
    write(backend, "project.name", "cairn", 0.9, &Source::Consolidation).unwrap();
    let deleted =
        backend.write("deleting", |tx| apply_delete(tx, "project.name", &Source::UserExplicit, None)).unwrap();
    assert_eq!(deleted, DeleteOutcome::Deleted);
    let again = backend.write("deleting", |tx| apply_delete(tx, "project.name", &Source::UserExplicit, None)).unwrap();
    assert_eq!(again, DeleteOutcome::NotFound);
    let row = backend.read("reading", |tx| tx.semantic_row("project.name")).unwrap().unwrap();
    assert!(row.is_deleted);
    assert_eq!(row.version, 2);
    // An import never revives a tombstone; any other writer does, as a new entry.
    let import = write(backend, "project.name", "other", 1.0, &Source::Import).unwrap();
    assert_eq!(outcome_name(&import), "skipped:existing_wins");
    let revived = write(backend, "project.name", "cairn 2", 0.8, &Source::Consolidation).unwrap();
    assert_eq!(outcome_name(&revived), "created");
    let row = backend.read("reading", |tx| tx.semantic_row("project.name")).unwrap().unwrap();
    assert_eq!((row.is_deleted, row.version), (false, 3));
    let live: Vec<String> =
        backend.read("listing", |tx| tx.live_semantic("project.")).unwrap().into_iter().map(|row| row.key).collect();
    assert_eq!(live, ["project.name"]);
}

fn failed_write_leaves_nothing(fixture: &Fixture) {
    let backend = &*fixture.backend;
    write(backend, "pref.shell", "fish", 0.9, &Source::Consolidation).unwrap();
    let before = backend.read("reading", |tx| Ok((tx.revision(Counter::Semantic)?, tx.event_count()?))).unwrap();
    let failed: Result<()> = backend.write("a write that fails halfway", |tx| {
        apply_write(
            tx,
            &PreparedWrite {
                key: "pref.shell",
                value_text: "\"zsh\"",
                confidence: 0.9,
                source: &Source::Consolidation,
                category: None,
                vector: None,
            },
        )?;
        Err(MemoryError::InvalidConfig("refused after the write".to_owned()))
    });
    assert!(failed.is_err());
    assert_eq!(value_of(backend, "pref.shell").as_deref(), Some("fish"));
    let after = backend.read("reading", |tx| Ok((tx.revision(Counter::Semantic)?, tx.event_count()?))).unwrap();
    assert_eq!(after, before);
}

fn audit_trail_is_bounded(fixture: &Fixture) {
    let cap = 5;
    for index in 0..12 {
        let detail = format!("event {index}");
        fixture
            .backend
            .write("auditing", |tx| {
                tx.append_event(
                    &NewEvent {
                        at: index,
                        memory_type: "semantic",
                        action: MemoryAuditAction::Rejected,
                        key: None,
                        old_value: None,
                        new_value: None,
                        source: Some("test"),
                        confidence: Some(0.5),
                        detail: Some(&detail),
                    },
                    cap,
                )
            })
            .unwrap();
    }
    let events = fixture.backend.read("reading", |tx| tx.newest_events(100)).unwrap();
    let details: Vec<&str> = events.iter().filter_map(|event| event.detail.as_deref()).collect();
    assert_eq!(details, ["event 11", "event 10", "event 9", "event 8", "event 7"]);
    assert_eq!(fixture.backend.read("counting", |tx| tx.event_count()).unwrap(), cap);
    assert!(events.windows(2).all(|pair| pair[0].id > pair[1].id), "ids grow with every row");
}

fn revisions_move_on_changes_only(fixture: &Fixture) {
    let backend = &*fixture.backend;
    let revision = || backend.read("reading", |tx| tx.revision(Counter::Semantic)).unwrap();
    let start = revision();
    write(backend, "pref.font", "iosevka", 0.9, &Source::Consolidation).unwrap();
    assert_eq!(revision(), start + 1);
    write(backend, "pref.font", "iosevka", 0.9, &Source::Consolidation).unwrap();
    write(backend, "pref.font", "arial", 0.1, &Source::Consolidation).unwrap();
    assert_eq!(revision(), start + 1, "an unchanged or skipped write changes nothing");
    backend.write("deleting", |tx| apply_delete(tx, "pref.font", &Source::UserExplicit, None)).unwrap();
    assert_eq!(revision(), start + 2);
}

fn lesson(backend: &dyn Backend, rule: &str, source: &Source) -> crate::lessons::LessonOutcome {
    let value_text = serde_json::to_string(rule).unwrap();
    let confidence = crate::lessons::lesson_confidence(source);
    backend
        .write("writing a lesson", |tx| {
            apply_lesson(
                tx,
                LessonWrite {
                    key: lesson_key(rule, None),
                    rule,
                    text: rule,
                    value_text: &value_text,
                    category: LessonCategory::Knowledge,
                    source,
                    confidence,
                    vector: None,
                    space: None,
                },
            )
        })
        .unwrap()
}

fn lessons_dedup_and_replace(fixture: &Fixture) {
    let backend = &*fixture.backend;
    let user = Source::UserExplicit;
    // (rule, outcome, rules live afterwards, newest first)
    let cases: &[(&str, &str, &[&str])] = &[
        ("run cargo fmt before committing", "created", &["run cargo fmt before committing"]),
        ("cargo fmt", "skipped:duplicate_lesson", &["run cargo fmt before committing"]),
        (
            "always run cargo fmt before committing rust code",
            "created",
            &["always run cargo fmt before committing rust code"],
        ),
        (
            "deploy only on weekdays",
            "created",
            &["deploy only on weekdays", "always run cargo fmt before committing rust code"],
        ),
    ];
    for (index, (rule, outcome, live)) in cases.iter().enumerate() {
        let written = lesson(backend, rule, &user);
        assert_eq!(outcome_name(&written.outcome), *outcome, "case {index}: {rule}");
        let lessons = backend.read("reading lessons", |tx| newest_lessons(tx, 10)).unwrap();
        let rules: Vec<&str> = lessons.iter().map(|lesson| lesson.rule.as_str()).collect();
        if index == 3 {
            // Same millisecond writes order by key; compare as a set.
            let mut sorted = rules.clone();
            sorted.sort_unstable();
            let mut expected = live.to_vec();
            expected.sort_unstable();
            assert_eq!(sorted, expected, "case {index}");
        } else {
            assert_eq!(rules, *live, "case {index}");
        }
    }
    // An import never replaces a stored lesson.
    let import = lesson(backend, "deploy only on weekdays after the review", &Source::Import);
    assert_eq!(outcome_name(&import.outcome), "skipped:existing_wins");
}

fn backfill_stores_only_unchanged_rows(fixture: &Fixture) {
    let backend = &*fixture.backend;
    write(backend, "pref.lang", "rust", 0.9, &Source::Consolidation).unwrap();
    let pending = backend.read("finding", |tx| tx.semantic_missing_vectors("model#3", 10)).unwrap();
    assert_eq!(pending.len(), 1);
    let version = pending[0].version;
    // The row changes between the read and the store: the stale vector is dropped.
    write(backend, "pref.lang", "go", 0.9, &Source::Consolidation).unwrap();
    let stale = backend
        .write("storing", |tx| tx.set_semantic_vector_if_version("pref.lang", version, &[1.0, 0.0, 0.0], "model#3"))
        .unwrap();
    assert!(!stale);
    let stored = backend
        .write("storing", |tx| tx.set_semantic_vector_if_version("pref.lang", version + 1, &[0.0, 1.0, 0.0], "model#3"))
        .unwrap();
    assert!(stored);
    let vector = backend.read("reading", |tx| tx.semantic_vector("pref.lang", "model#3")).unwrap();
    assert_eq!(vector, Some(vec![0.0, 1.0, 0.0]));
    assert_eq!(backend.read("reading", |tx| tx.semantic_vector("pref.lang", "other#3")).unwrap(), None);
    let counts = backend.read("counting", |tx| tx.semantic_counts(Some("model#3"))).unwrap();
    assert_eq!((counts.live, counts.missing_vectors), (1, 0));
}

/// 2 handles × 4 threads × 50 writes to 5 shared keys, with mixed sources
/// and confidences. Afterwards the audit trail, replayed through the
/// ladder from nothing, must reproduce every decision and the final rows,
/// and every acknowledged write must be in it.
fn concurrent_writers_lose_nothing(fixture: &Fixture) {
    const THREADS: usize = 4;
    const WRITES: usize = 50;
    let keys = ["team.a", "team.b", "team.c", "team.d", "team.e"];
    let handles = [Arc::clone(&fixture.backend), (fixture.reopen)()];
    let mut acknowledged: Vec<(String, String, String)> = Vec::new();
    std::thread::scope(|scope| {
        let mut workers = Vec::new();
        for (gateway, handle) in handles.iter().enumerate() {
            for thread in 0..THREADS {
                let handle = Arc::clone(handle);
                workers.push(scope.spawn(move || {
                    let mut acked = Vec::new();
                    for index in 0..WRITES {
                        let n = gateway * 1_000_000 + thread * 1_000 + index;
                        let key = keys[(n * 7 + index) % keys.len()];
                        let source = if n % 11 == 0 { Source::UserExplicit } else { Source::Consolidation };
                        let confidence = [0.8, 0.85, 0.9, 0.95, 1.0][(n / 3) % 5];
                        let value = format!("g{gateway}t{thread}w{index}");
                        let outcome = write(&*handle, key, &value, confidence, &source).unwrap();
                        acked.push((key.to_owned(), value, outcome_name(&outcome)));
                    }
                    acked
                }));
            }
        }
        for worker in workers {
            acknowledged.extend(worker.join().unwrap());
        }
    });
    let events = fixture.backend.read("reading", |tx| tx.newest_events(10_000)).unwrap();
    assert_eq!(events.len(), THREADS * 2 * WRITES - unchanged(&acknowledged), "one audit row per decision");
    // Replay in commit order (ids grow with commits, since writers are serialised).
    let mut state: HashMap<String, crate::semantic::Existing> = HashMap::new();
    for event in events.iter().rev() {
        let key = event.key.clone().unwrap();
        let value = event.new_value.clone().unwrap();
        let source: Source = event.source.as_deref().unwrap().parse().unwrap();
        let confidence = event.confidence.unwrap();
        let value_text = value.clone();
        let decision = decide(&key, state.get(&key), &value_text, confidence, &source);
        match event.action.as_str() {
            "created" | "updated" => {
                assert_eq!(
                    decision,
                    crate::semantic::Decision::Write,
                    "event {} is not what the ladder decides",
                    event.id
                );
                state.insert(
                    key,
                    crate::semantic::Existing {
                        value: value_text,
                        confidence,
                        source: source.as_str().to_owned(),
                        is_deleted: false,
                        has_vector_in: None,
                    },
                );
            }
            "conflict_skip" => {
                assert!(
                    matches!(decision, crate::semantic::Decision::Skip(_)),
                    "event {} should have been written",
                    event.id
                )
            }
            other => panic!("unexpected action {other}"),
        }
    }
    for key in keys {
        let stored = fixture.backend.read("reading", |tx| load_existing(tx, key)).unwrap();
        let replayed = state.get(key);
        assert_eq!(stored.as_ref().map(|row| &row.value), replayed.map(|row| &row.value), "{key}");
    }
    // Every acknowledged write is in the trail with the outcome it was told.
    let mut trail: HashMap<(String, String), &str> = HashMap::new();
    for event in &events {
        trail.insert((event.key.clone().unwrap(), event.new_value.clone().unwrap()), event.action.as_str());
    }
    for (key, value, outcome) in &acknowledged {
        let stored_value = serde_json::to_string(value).unwrap();
        let action = trail.get(&(key.clone(), stored_value)).copied();
        let expected = match outcome.as_str() {
            "created" => Some("created"),
            "updated" => Some("updated"),
            "unchanged" => None,
            skipped => {
                assert!(skipped.starts_with("skipped:"), "{skipped}");
                Some("conflict_skip")
            }
        };
        assert_eq!(action, expected, "{key} = {value} was acknowledged as {outcome}");
    }
}

fn unchanged(acknowledged: &[(String, String, String)]) -> usize {
    acknowledged.iter().filter(|(_, _, outcome)| outcome == "unchanged").count()
}
