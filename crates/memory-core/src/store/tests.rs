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
use super::sqlite::SqliteBackend;
use super::{
    Backend, Counter, EventRecord, LedgerEntry, MarkerColumn, NewEpisodicRow, SessionRow, TranscriptRow, vector_blob,
};
use crate::MemoryConfig;
use crate::error::{MemoryError, Result, StorageErrorKind};
use crate::lessons::{LessonCategory, LessonWrite, apply_lesson, lesson_key, newest_lessons};
use crate::semantic::{PreparedWrite, apply_delete, apply_write, decide, load_existing};
use crate::types::{DeleteOutcome, MemoryAuditAction, Source, WriteOutcome};

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
    let open = move || -> Arc<dyn Backend> {
        let config = MemoryConfig::default();
        Arc::new(SqliteBackend::open(&path, config.busy_timeout, false).unwrap())
    };
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
        crate::clock::now_ms() % 1_000_000
    );
    let open = move || -> Arc<dyn Backend> { Arc::new(PostgresBackend::open(&url, &schema, 4).unwrap()) };
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
    restored_rows_read_back_exactly,
    failed_write_leaves_nothing,
    audit_trail_is_bounded,
    audit_trail_returns_to_a_lowered_cap,
    revisions_move_on_changes_only,
    lessons_dedup_and_replace,
    backfill_stores_only_unchanged_rows,
    concurrent_writers_lose_nothing,
    episodic_ids_grow_and_tombstones_stay,
    episodic_eviction_order,
    episodic_row_and_page,
    episodic_vectors_by_space,
    episodic_missing_vectors,
    episodic_vector_stored_only_on_unchanged_rows,
    episodic_touch_and_quoting,
    episodic_revisions,
    failed_episodic_write_leaves_nothing,
    transcripts_append_read_and_delete,
    idle_sessions_least_recent_first,
    claims_and_markers,
    ledger_keeps_the_first_record,
    settings_get_and_set,
    evidence_follows_its_row,
    runs_are_recorded_and_rows_put_back,
    episodic_live_count_follows_the_rows,
);

/// The kept count of active rows equals a count of the table after
/// inserts, tombstones and a write that fails, and survives a reopen.
fn episodic_live_count_follows_the_rows(fixture: &Fixture) {
    // The kept counts against the rows themselves.
    let counted = |backend: &dyn Backend| {
        backend
            .read("counting", |tx| {
                let counts = tx.episodic_counts(None)?;
                assert_eq!(tx.episodic_live_count()?, counts.live);
                let ids = tx.episodic_active_ids()?;
                let mut deleted = 0;
                for id in 1..=200 {
                    if let Some((row, _)) = tx.episodic_row(id, None)? {
                        deleted += i64::from(row.is_deleted);
                    }
                }
                assert_eq!(counts.deleted, deleted, "tombstoned rows");
                Ok((counts.live, ids.len() as i64))
            })
            .unwrap()
    };
    let backend = &*fixture.backend;
    assert_eq!(counted(backend), (0, 0));
    let ids = insert_episodes(
        backend,
        &[("one row", 0.5, 100, None), ("two rows", 0.5, 200, Some("s1")), ("three rows", 0.5, 300, None)],
    );
    assert_eq!(counted(backend), (3, 3));
    tombstone(backend, ids[1]);
    tombstone(backend, ids[1]);
    assert_eq!(counted(backend), (2, 2), "a second tombstone of one row changes nothing");
    let failed: Result<()> = backend.write("a write that fails", |tx| {
        tx.tombstone_episodic(ids[0])?;
        Err(MemoryError::InvalidConfig("refused on purpose".to_owned()))
    });
    assert!(failed.is_err());
    assert_eq!(counted(backend), (2, 2), "a rolled-back tombstone leaves the count");
    let reopened = (fixture.reopen)();
    assert_eq!(counted(&*reopened), (2, 2));
}

fn runs_are_recorded_and_rows_put_back(fixture: &Fixture) {
    let backend = &*fixture.backend;
    let (first, second) = backend
        .write("recording runs", |tx| {
            Ok((tx.insert_run("applied", 10, "{\"a\":1}")?, tx.insert_run("pending", 20, "{}")?))
        })
        .unwrap();
    assert!(second > first, "ids grow");
    backend.write("deciding", |tx| tx.update_run(second, "rejected", 30, "{\"b\":2}")).unwrap();
    let (runs, missing) = backend.read("listing runs", |tx| Ok((tx.run_rows()?, tx.run_row(second + 1)?))).unwrap();
    let states: Vec<(i64, &str, i64, i64, &str)> = runs
        .iter()
        .map(|run| (run.id, run.state.as_str(), run.created_at, run.updated_at, run.body.as_str()))
        .collect();
    assert_eq!(states, [(second, "rejected", 20, 30, "{\"b\":2}"), (first, "applied", 10, 10, "{\"a\":1}")]);
    assert_eq!(missing, None);
    assert_eq!(fixture_reopened_run(fixture, first).map(|run| run.state), Some("applied".to_owned()));
    backend.write("pruning", |tx| tx.delete_run(first)).unwrap();
    assert_eq!(fixture_reopened_run(fixture, first), None);

    // A revert puts a row back exactly, or removes one a run created.
    write(backend, "pref.editor", "\"vim\"", 0.9, &Source::Consolidation).unwrap();
    write(backend, "pref.editor", "\"helix\"", 0.95, &Source::Consolidation).unwrap();
    write(backend, "pref.shell", "\"fish\"", 0.9, &Source::Consolidation).unwrap();
    let prior = super::SemanticRow {
        key: "pref.editor".to_owned(),
        value: "\"vim\"".to_owned(),
        confidence: 0.9,
        source: "consolidation".to_owned(),
        category: None,
        created_at: 5,
        updated_at: 6,
        is_deleted: false,
        version: 1,
        embedding_space: None,
    };
    backend
        .write("reverting", |tx| {
            tx.put_semantic_row(&prior)?;
            tx.remove_semantic_row("pref.shell")
        })
        .unwrap();
    let (editor, shell) =
        backend.read("reading", |tx| Ok((tx.semantic_row("pref.editor")?, tx.semantic_row("pref.shell")?))).unwrap();
    assert_eq!(editor, Some(prior));
    assert_eq!(shell, None);
}

fn fixture_reopened_run(fixture: &Fixture, id: i64) -> Option<super::RunRow> {
    (fixture.reopen)().read("reading a run", |tx| tx.run_row(id)).unwrap()
}

fn write(backend: &dyn Backend, key: &str, value: &str, confidence: f64, source: &Source) -> Result<WriteOutcome> {
    let value_text = serde_json::to_string(value).unwrap();
    backend.write("writing a semantic entry", |tx| {
        apply_write(
            tx,
            &PreparedWrite {
                key,
                value_text: &value_text,
                confidence,
                source,
                category: None,
                vector: None,
                evidence: None,
            },
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

fn restored_rows_read_back_exactly(fixture: &Fixture) {
    let backend = &*fixture.backend;
    let row = |key: &str, is_deleted: bool, version: i64| super::SemanticRow {
        key: key.to_owned(),
        value: if is_deleted { "null".to_owned() } else { "\"helix\"".to_owned() },
        confidence: 0.85,
        source: "consolidation".to_owned(),
        category: None,
        created_at: 1_700_000_000_000,
        updated_at: 1_700_000_500_000,
        is_deleted,
        version,
        embedding_space: Some("ignored#3".to_owned()),
    };
    let (live, deleted) = (row("pref.editor", false, 4), row("pref.theme", true, 2));
    backend
        .write("restoring", |tx| {
            tx.insert_semantic_row(&live)?;
            tx.insert_semantic_row(&deleted)
        })
        .unwrap();
    let without_space = |row: &super::SemanticRow| super::SemanticRow { embedding_space: None, ..row.clone() };
    let (read_live, read_deleted, tombstones) = backend
        .read("reading", |tx| {
            Ok((tx.semantic_row("pref.editor")?, tx.semantic_row("pref.theme")?, tx.deleted_semantic()?))
        })
        .unwrap();
    assert_eq!(read_live, Some(without_space(&live)));
    assert_eq!(read_deleted, Some(without_space(&deleted)));
    assert_eq!(tombstones, [without_space(&deleted)]);
    // A key already stored is refused, and the transaction leaves nothing behind.
    let again: Result<()> = backend.write("restoring", |tx| {
        tx.insert_semantic_row(&row("pref.shell", false, 1))?;
        tx.insert_semantic_row(&row("pref.theme", false, 1))
    });
    let error = again.unwrap_err();
    assert!(
        matches!(&error, MemoryError::Storage { source, .. } if source.kind() == StorageErrorKind::Constraint),
        "{error:?}"
    );
    assert_eq!(backend.read("reading", |tx| tx.semantic_row("pref.shell")).unwrap(), None);
    assert_eq!(backend.read("reading", |tx| tx.semantic_row("pref.theme")).unwrap(), Some(without_space(&deleted)));
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
                evidence: None,
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
        append_numbered_event(fixture, index, cap);
    }
    let events = fixture.backend.read("reading", |tx| tx.newest_events(100)).unwrap();
    let details: Vec<&str> = events.iter().filter_map(|event| event.detail.as_deref()).collect();
    assert_eq!(details, ["event 11", "event 10", "event 9", "event 8", "event 7"]);
    assert_eq!(fixture.backend.read("counting", |tx| tx.event_count()).unwrap(), cap);
    assert!(events.windows(2).all(|pair| pair[0].id > pair[1].id), "ids grow with every row");
}

/// Appends one audit row numbered `index` under `cap`.
fn append_numbered_event(fixture: &Fixture, index: i64, cap: i64) {
    let detail = format!("event {index}");
    fixture
        .backend
        .write("auditing", |tx| {
            tx.append_event(
                index,
                &EventRecord {
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

/// Rows far behind the cap (left by a cap lowered here, on a server by a
/// rolled-back trim) are gone within 256 writes, and the trail then holds
/// exactly the newest `cap` rows.
fn audit_trail_returns_to_a_lowered_cap(fixture: &Fixture) {
    for index in 0..300 {
        append_numbered_event(fixture, index, 1_000);
    }
    let count = || fixture.backend.read("counting", |tx| tx.event_count()).unwrap();
    assert_eq!(count(), 300);
    let mut back_at = None;
    for index in 300..600 {
        append_numbered_event(fixture, index, 5);
        if back_at.is_none() && count() == 5 {
            back_at = Some(index);
        }
    }
    let back_at = back_at.expect("the trail never came back to its cap");
    assert!(back_at < 300 + 256, "back to the cap only at write {back_at}");
    assert_eq!(count(), 5);
    let events = fixture.backend.read("reading", |tx| tx.newest_events(100)).unwrap();
    let details: Vec<&str> = events.iter().filter_map(|event| event.detail.as_deref()).collect();
    assert_eq!(details, ["event 599", "event 598", "event 597", "event 596", "event 595"]);
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
                    evidence: None,
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
                        version: 1,
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

/// An episodic row to insert: (text, importance, created_at, space of its vector).
type Episode<'a> = (&'a str, f64, i64, Option<&'a str>);

/// The vector blob every stored test row carries (its space is what differs).
fn test_blob(space: &str) -> Vec<u8> {
    vector_blob(&[space.len() as f32, 0.5, -1.0])
}

fn insert_episode(backend: &dyn Backend, (text, importance, created_at, space): Episode<'_>) -> i64 {
    let blob = space.map(test_blob);
    let vector = blob.as_deref().zip(space);
    backend
        .write("writing an episodic row", |tx| {
            tx.insert_episodic(&NewEpisodicRow {
                text,
                tags_json: r#"["test"]"#,
                importance,
                source: "consolidation",
                created_at,
                source_ref: None,
                scope: "global",
                vector,
            })
        })
        .unwrap()
}

fn insert_episodes(backend: &dyn Backend, episodes: &[Episode<'_>]) -> Vec<i64> {
    episodes.iter().map(|episode| insert_episode(backend, *episode)).collect()
}

fn tombstone(backend: &dyn Backend, id: i64) -> Option<String> {
    backend.write("tombstoning an episodic row", |tx| tx.tombstone_episodic(id)).unwrap()
}

fn sorted(mut ids: Vec<i64>) -> Vec<i64> {
    ids.sort_unstable();
    ids
}

fn episodic_ids_grow_and_tombstones_stay(fixture: &Fixture) {
    let backend = &*fixture.backend;
    let ids = insert_episodes(
        backend,
        &[
            ("the deploy runs on fridays", 0.5, 100, None),
            ("the deploy runs on fridays", 0.5, 200, None),
            ("lunch is at noon", 0.5, 300, None),
        ],
    );
    assert!(ids[0] >= 1 && ids.windows(2).all(|pair| pair[0] < pair[1]), "ids grow: {ids:?}");
    let with_text = || backend.read("finding", |tx| tx.episodic_with_text("the deploy runs on fridays")).unwrap();
    let active = |id| backend.read("checking", |tx| tx.episodic_is_active(id)).unwrap();
    assert_eq!(with_text(), Some(ids[0]), "the lowest id of the rows with the text");
    assert_eq!(backend.read("finding", |tx| tx.episodic_with_text("the deploy runs")).unwrap(), None, "exact text");

    assert_eq!(tombstone(backend, ids[0]).as_deref(), Some("the deploy runs on fridays"));
    assert_eq!(tombstone(backend, ids[0]), None, "a tombstone answers its text once");
    assert_eq!(tombstone(backend, ids[2] + 1000), None, "an unknown id");
    assert!(!active(ids[0]) && active(ids[1]) && active(ids[2]));
    assert_eq!(with_text(), Some(ids[1]), "only active rows");
    tombstone(backend, ids[1]);
    assert_eq!(with_text(), None);

    let (row, _) = backend.read("reading", |tx| tx.episodic_row(ids[0], None)).unwrap().unwrap();
    assert!(row.is_deleted, "a tombstoned row stays");
    let next = insert_episode(backend, ("the deploy runs on fridays", 0.5, 400, None));
    assert!(next > ids[2], "ids are never reused: {next} after {ids:?}");
    assert_eq!(with_text(), Some(next));
}

fn episodic_eviction_order(fixture: &Fixture) {
    let backend = &*fixture.backend;
    // (text, importance, created_at); eviction goes lowest importance, then oldest, then lowest id.
    let rows: &[(&str, f64, i64)] = &[
        ("kept: important and old", 0.9, 100),
        ("second: low and new", 0.2, 500),
        ("first: low and old", 0.2, 100),
        ("third: middling, same age as the fourth", 0.5, 300),
        ("fourth: middling, inserted later", 0.5, 300),
        ("tombstoned, never evicted again", 0.0, 0),
    ];
    let ids = insert_episodes(
        backend,
        &rows.iter().map(|(text, importance, at)| (*text, *importance, *at, None)).collect::<Vec<_>>(),
    );
    tombstone(backend, ids[5]);
    // (limit, the ids in eviction order)
    let cases: &[(usize, Vec<i64>)] = &[
        (0, vec![]),
        (1, vec![ids[2]]),
        (4, vec![ids[2], ids[1], ids[3], ids[4]]),
        (10, vec![ids[2], ids[1], ids[3], ids[4], ids[0]]),
    ];
    for (limit, expected) in cases {
        let order = backend.read("ordering", |tx| tx.episodic_eviction_order(*limit)).unwrap();
        assert_eq!(&order, expected, "limit {limit}");
    }
}

fn episodic_row_and_page(fixture: &Fixture) {
    let backend = &*fixture.backend;
    let with_ref = backend
        .write("writing", |tx| {
            tx.insert_episodic(&NewEpisodicRow {
                text: "the release train leaves on tuesdays",
                tags_json: r#"["release","schedule"]"#,
                importance: 0.75,
                source: "user_explicit",
                created_at: 1_000,
                source_ref: Some("session:42"),
                scope: "global",
                vector: Some((&test_blob("model#3"), "model#3")),
            })
        })
        .unwrap();
    let (row, blob) = backend.read("reading", |tx| tx.episodic_row(with_ref, Some("model#3"))).unwrap().unwrap();
    assert_eq!(
        (row.id, row.text.as_str(), row.tags_json.as_str(), row.importance, row.created_at),
        (with_ref, "the release train leaves on tuesdays", r#"["release","schedule"]"#, 0.75, 1_000)
    );
    assert_eq!((row.source.as_str(), row.source_ref.as_deref()), ("user_explicit", Some("session:42")));
    assert_eq!((row.embedding_space.as_deref(), row.has_vector, row.is_deleted), (Some("model#3"), true, false));
    assert_eq!(row.last_accessed, None);
    assert_eq!(blob, Some(test_blob("model#3")));
    // (asked space, whether the blob comes back)
    for (space, has_blob) in [(Some("model#3"), true), (Some("other#3"), false), (None, false)] {
        let (_, blob) = backend.read("reading", |tx| tx.episodic_row(with_ref, space)).unwrap().unwrap();
        assert_eq!(blob.is_some(), has_blob, "{space:?}");
    }
    assert_eq!(backend.read("reading", |tx| tx.episodic_row(with_ref + 1000, None)).unwrap(), None);

    // Newest first: created_at descending, then id descending.
    let ids = insert_episodes(
        backend,
        &[
            ("page row created at 3000", 0.5, 3_000, None),
            ("page row created at 2000", 0.5, 2_000, None),
            ("page row also at 3000", 0.5, 3_000, None),
            ("page row tombstoned", 0.5, 4_000, None),
        ],
    );
    tombstone(backend, ids[3]);
    let newest_first = [ids[2], ids[0], ids[1], with_ref];
    // (limit, offset)
    for (limit, offset) in [(10, 0), (2, 0), (2, 1), (2, 3), (5, 4), (0, 0)] {
        let page: Vec<i64> =
            backend.read("paging", |tx| tx.episodic_page(limit, offset)).unwrap().iter().map(|row| row.id).collect();
        let expected: Vec<i64> = newest_first.iter().copied().skip(offset).take(limit).collect();
        assert_eq!(page, expected, "limit {limit} offset {offset}");
    }
}

/// Rows A (vector in s1), B (vector in s2), C (no vector), D (vector in s1, tombstoned), E (no vector).
fn spaced_rows(backend: &dyn Backend) -> [i64; 5] {
    let ids = insert_episodes(
        backend,
        &[
            ("row a has a vector in s1", 0.5, 100, Some("s1")),
            ("row b has a vector in s2", 0.5, 200, Some("s2")),
            ("row c has no vector", 0.5, 300, None),
            ("row d is tombstoned", 0.5, 400, Some("s1")),
            ("row e has no vector either", 0.5, 500, None),
        ],
    );
    tombstone(backend, ids[3]);
    [ids[0], ids[1], ids[2], ids[3], ids[4]]
}

/// (space, only, the ids whose vectors come back)
type VectorCase<'a> = (&'a str, Option<&'a [i64]>, Vec<i64>);

fn episodic_vectors_by_space(fixture: &Fixture) {
    let backend = &*fixture.backend;
    let [a, b, c, d, e] = spaced_rows(backend);
    let unknown = e + 1000;
    let cases: &[VectorCase<'_>] = &[
        ("s1", None, vec![a]),
        ("s2", None, vec![b]),
        ("s3", None, vec![]),
        ("s1", Some(&[b, d, a, c, unknown]), vec![a]),
        ("s2", Some(&[a, c]), vec![]),
        ("s1", Some(&[]), vec![]),
    ];
    for (space, only, expected) in cases {
        let vectors = backend.read("loading", |tx| tx.episodic_vectors(space, *only)).unwrap();
        let ids = sorted(vectors.iter().map(|(id, _)| *id).collect());
        assert_eq!(&ids, expected, "{space} among {only:?}");
        assert!(vectors.iter().all(|(_, blob)| *blob == test_blob(space)), "{space}: the stored blob");
        if only.is_none() {
            let vector_ids = backend.read("listing", |tx| tx.episodic_vector_ids(space)).unwrap();
            assert_eq!(&sorted(vector_ids), expected, "vector ids in {space}");
        }
    }
    // (only, the ids whose documents come back)
    let cases: &[(Option<&[i64]>, Vec<i64>)] =
        &[(None, vec![a, b, c, e]), (Some(&[c, d, unknown]), vec![c]), (Some(&[]), vec![])];
    for (only, expected) in cases {
        let documents = backend.read("loading", |tx| tx.episodic_documents(*only)).unwrap();
        assert_eq!(&sorted(documents.iter().map(|(id, _, _)| *id).collect()), expected, "{only:?}");
        assert!(documents.iter().all(|(_, text, tags)| text.starts_with("row ") && tags == r#"["test"]"#));
    }
    assert_eq!(sorted(backend.read("listing", |tx| tx.episodic_active_ids()).unwrap()), [a, b, c, e]);
    // (space, live, deleted, with vectors)
    for (space, live, deleted, with_vectors) in [(Some("s1"), 4, 1, 1), (Some("s3"), 4, 1, 0), (None, 4, 1, 0)] {
        let counts = backend.read("counting", |tx| tx.episodic_counts(space)).unwrap();
        assert_eq!((counts.live, counts.deleted, counts.with_vectors), (live, deleted, with_vectors), "{space:?}");
    }
    // (space, counted up to, count): the tombstoned row's vector never counts.
    for (space, limit, expected) in [("s1", 0, 0), ("s1", 1, 1), ("s1", 5, 1), ("s2", 5, 1), ("s3", 5, 0)] {
        let counted = backend.read("counting", |tx| tx.episodic_vectors_up_to(space, limit)).unwrap();
        assert_eq!(counted, expected, "{space} up to {limit}");
    }
}

fn episodic_missing_vectors(fixture: &Fixture) {
    let backend = &*fixture.backend;
    let [a, b, c, _d, e] = spaced_rows(backend);
    // (space, after_id, limit, the missing rows by id); with no space every
    // active row lacks a vector in it (SQLite: `embedding_space IS NOT NULL OR embedding IS NULL`).
    let cases: &[(Option<&str>, i64, usize, Vec<i64>)] = &[
        (Some("s1"), 0, 10, vec![b, c, e]),
        (Some("s1"), b, 10, vec![c, e]),
        (Some("s1"), 0, 1, vec![b]),
        (Some("s1"), e, 10, vec![]),
        (Some("s2"), 0, 10, vec![a, c, e]),
        (Some("s3"), 0, 10, vec![a, b, c, e]),
        (None, 0, 10, vec![a, b, c, e]),
        (None, a, 2, vec![b, c]),
    ];
    for (space, after_id, limit, expected) in cases {
        let missing = backend.read("finding", |tx| tx.episodic_missing_vectors(*space, *after_id, *limit)).unwrap();
        let ids: Vec<i64> = missing.iter().map(|(id, _)| *id).collect();
        assert_eq!(&ids, expected, "{space:?} after {after_id} limit {limit}");
        assert!(missing.iter().all(|(_, text)| text.starts_with("row ")));
    }
    // (space, how many active rows miss a vector in it)
    for (space, count) in [(Some("s1"), 3), (Some("s2"), 3), (Some("s3"), 4), (None, 4)] {
        assert_eq!(backend.read("counting", |tx| tx.episodic_missing_count(space)).unwrap(), count, "{space:?}");
    }
}

fn episodic_vector_stored_only_on_unchanged_rows(fixture: &Fixture) {
    let backend = &*fixture.backend;
    let [a, _b, c, d, _e] = spaced_rows(backend);
    let blob = vector_blob(&[0.0, 1.0, 0.0]);
    // (id, the text the vector was made from, space, stored)
    let cases: &[(i64, &str, &str, bool)] = &[
        (c, "row c has no vector", "s1", true),
        (c, "row c had another text", "s1", false),
        (d, "row d is tombstoned", "s1", false),
        (a, "row a has a vector in s1", "s2", true),
        (d + 1000, "row c has no vector", "s1", false),
    ];
    for (id, text, space, stored) in cases {
        let did = backend.write("storing", |tx| tx.set_episodic_vector(*id, text, &blob, space)).unwrap();
        assert_eq!(did, *stored, "{id} / {text} in {space}");
    }
    let (row, stored) = backend.read("reading", |tx| tx.episodic_row(c, Some("s1"))).unwrap().unwrap();
    assert_eq!((row.has_vector, row.embedding_space.as_deref(), stored), (true, Some("s1"), Some(blob.clone())));
    // A's vector moved to s2 with its space.
    let (row, in_s1) = backend.read("reading", |tx| tx.episodic_row(a, Some("s1"))).unwrap().unwrap();
    assert_eq!((row.embedding_space.as_deref(), in_s1), (Some("s2"), None));
    let (_, in_s2) = backend.read("reading", |tx| tx.episodic_row(a, Some("s2"))).unwrap().unwrap();
    assert_eq!(in_s2, Some(blob));
    assert_eq!(sorted(backend.read("listing", |tx| tx.episodic_vector_ids("s1")).unwrap()), [c]);
}

fn episodic_touch_and_quoting(fixture: &Fixture) {
    let backend = &*fixture.backend;
    let ids = insert_episodes(
        backend,
        &[
            ("We deploy on Friday afternoons", 0.5, 100, None),
            ("NOTE: DEPLOY ON FRIDAY, never monday", 0.5, 200, None),
            ("friday is when we deploy", 0.5, 300, None),
            ("the deploy on friday broke", 0.5, 400, None),
            ("nothing about releases", 0.5, 500, None),
        ],
    );
    tombstone(backend, ids[3]);
    backend.write("touching", |tx| tx.touch_episodic(&[(ids[0], 7_000), (ids[2], 7_000)])).unwrap();
    let touched = || -> Vec<Option<i64>> {
        ids.iter()
            .map(|id| backend.read("reading", |tx| tx.episodic_row(*id, None)).unwrap().unwrap().0.last_accessed)
            .collect()
    };
    assert_eq!(touched(), [Some(7_000), None, Some(7_000), None, None]);
    // Each row its own time in one call; a row named twice keeps the later one.
    backend.write("touching", |tx| tx.touch_episodic(&[(ids[1], 8_000), (ids[4], 9_000), (ids[1], 8_500)])).unwrap();
    assert_eq!(touched(), [Some(7_000), Some(8_500), Some(7_000), None, Some(9_000)]);

    // (needle, its words, the active rows that quote it)
    let cases: &[(&str, &[&str], Vec<i64>)] = &[
        ("deploy on friday", &["deploy", "on", "friday"], vec![ids[0], ids[1]]),
        ("friday", &["friday"], vec![ids[0], ids[1], ids[2]]),
        ("deploy on monday", &["deploy", "on", "monday"], vec![]),
    ];
    for (needle, words, expected) in cases {
        let words: Vec<String> = words.iter().map(|word| (*word).to_owned()).collect();
        let candidates = backend.read("quoting", |tx| tx.episodic_quoting(needle, &words)).unwrap();
        assert!(candidates.iter().all(|(id, _)| *id != ids[3]), "{needle}: only active rows");
        // A superset the caller confirms on the text.
        let quoting = sorted(
            candidates.iter().filter(|(_, text)| text.to_lowercase().contains(needle)).map(|(id, _)| *id).collect(),
        );
        assert_eq!(&quoting, expected, "{needle}");
    }
    let hits = backend.read("searching", |tx| tx.episodic_keyword_hits("deploy", 10)).unwrap();
    if let Some(hits) = hits {
        assert!(hits.iter().all(|(id, _)| *id != ids[3] && *id != ids[4]), "keyword hits: {hits:?}");
    }
}

fn episodic_revisions(fixture: &Fixture) {
    let backend = &*fixture.backend;
    let revisions = || {
        backend
            .read("reading", |tx| {
                let one_by_one = (tx.revision(Counter::EpisodicText)?, tx.revision(Counter::Episodic)?);
                let together = tx.revisions(&[Counter::EpisodicText, Counter::Semantic, Counter::Episodic])?;
                assert_eq!(together.len(), 3);
                assert_eq!((together[0], together[2]), one_by_one, "read together or one by one");
                assert_eq!(together[1], tx.revision(Counter::Semantic)?);
                Ok(one_by_one)
            })
            .unwrap()
    };
    let (text, vectors) = revisions();
    let id = insert_episode(backend, ("the cache is warmed at boot", 0.5, 100, None));
    let other = insert_episode(backend, ("the cache is cleared at night", 0.5, 200, None));
    // (step, EpisodicText moved by, Episodic moved by)
    let steps: &[(&str, i64, i64)] = &[
        ("two inserts", 2, 0),
        ("a tombstone of an active row", 3, 0),
        ("a tombstone of a tombstoned row", 3, 0),
        ("a vector, a touch", 3, 0),
        ("an explicit bump", 3, 1),
    ];
    for (index, (step, text_moved, vectors_moved)) in steps.iter().enumerate() {
        match index {
            1 | 2 => {
                tombstone(backend, id);
            }
            3 => {
                let blob = test_blob("s1");
                backend
                    .write("storing", |tx| tx.set_episodic_vector(other, "the cache is cleared at night", &blob, "s1"))
                    .unwrap();
                backend.write("touching", |tx| tx.touch_episodic(&[(id, 300), (other, 300)])).unwrap();
            }
            4 => {
                let bumped = backend.write("bumping", |tx| tx.bump_revision(Counter::Episodic)).unwrap();
                assert_eq!(bumped, vectors + 1, "a bump answers the new value");
            }
            _ => {}
        }
        assert_eq!(revisions(), (text + text_moved, vectors + vectors_moved), "after {step}");
    }
}

fn failed_episodic_write_leaves_nothing(fixture: &Fixture) {
    let backend = &*fixture.backend;
    let kept = insert_episode(backend, ("a row written before the failure", 0.5, 100, None));
    let state = || {
        backend
            .read("reading", |tx| {
                Ok((
                    tx.episodic_active_ids()?,
                    tx.episodic_counts(None)?,
                    tx.revision(Counter::EpisodicText)?,
                    tx.revision(Counter::Episodic)?,
                ))
            })
            .unwrap()
    };
    let before = state();
    let mut inserted = None;
    let failed: Result<()> = backend.write("a write that fails halfway", |tx| {
        let blob = test_blob("s1");
        inserted = Some(tx.insert_episodic(&NewEpisodicRow {
            text: "a row that must not stay",
            tags_json: "[]",
            importance: 0.5,
            source: "consolidation",
            created_at: 200,
            source_ref: None,
            scope: "global",
            vector: Some((&blob, "s1")),
        })?);
        tx.bump_revision(Counter::Episodic)?;
        tx.tombstone_episodic(kept)?;
        Err(MemoryError::InvalidConfig("refused after the write".to_owned()))
    });
    assert!(matches!(failed, Err(MemoryError::InvalidConfig(_))), "{failed:?}");
    assert_eq!(state(), before);
    let inserted = inserted.expect("the body ran");
    assert_eq!(backend.read("reading", |tx| tx.episodic_row(inserted, None)).unwrap(), None);
    assert_eq!(backend.read("finding", |tx| tx.episodic_with_text("a row that must not stay")).unwrap(), None);
    assert!(backend.read("checking", |tx| tx.episodic_is_active(kept)).unwrap());
}

fn message(seq: i64, role: &str, content: &str, tool_calls_json: Option<&str>) -> TranscriptRow {
    TranscriptRow {
        seq,
        created_at: 1_000 + seq,
        role: role.to_owned(),
        content: content.to_owned(),
        tool_calls_json: tool_calls_json.map(str::to_owned),
    }
}

fn session_of(backend: &dyn Backend, key: &str) -> Option<SessionRow> {
    backend.read("reading a session", |tx| tx.session(key)).unwrap()
}

fn transcripts_append_read_and_delete(fixture: &Fixture) {
    let backend = &*fixture.backend;
    assert_eq!(session_of(backend, "chat:1"), None);
    backend.write("ensuring", |tx| tx.ensure_session("chat:1", 100, "global")).unwrap();
    let fresh = SessionRow { last_activity: 100, scope: "global".to_owned(), ..SessionRow::default() };
    assert_eq!(session_of(backend, "chat:1"), Some(fresh.clone()));
    backend.write("ensuring", |tx| tx.ensure_session("chat:1", 900, "global")).unwrap();
    assert_eq!(session_of(backend, "chat:1"), Some(fresh), "ensuring again changes nothing");

    let messages: Vec<TranscriptRow> = (0..5)
        .map(|seq| {
            let tools = (seq == 1).then_some(r#"[{"name":"search"}]"#);
            message(seq, if seq % 2 == 0 { "user" } else { "assistant" }, &format!("message {seq}"), tools)
        })
        .collect();
    backend
        .write("appending", |tx| {
            tx.ensure_session("chat:2", 100, "global")?;
            tx.insert_transcript("chat:2", &message(0, "user", "another session", None))?;
            tx.advance_session("chat:2", 1, 100)?;
            for row in &messages {
                tx.insert_transcript("chat:1", row)?;
            }
            tx.advance_session("chat:1", 5, 150)
        })
        .unwrap();
    // (next_seq, at, the last activity afterwards): it never goes back.
    for (next_seq, at, last_activity) in [(5, 120, 150), (5, 150, 150), (6, 300, 300)] {
        backend.write("advancing", |tx| tx.advance_session("chat:1", next_seq, at)).unwrap();
        let session = session_of(backend, "chat:1").unwrap();
        assert_eq!((session.next_seq, session.last_activity), (next_seq, last_activity), "advance to {at}");
    }
    assert_eq!(session_of(backend, "chat:1").unwrap().stored, 5);

    // (from, to, the seqs read)
    let cases: &[(i64, i64, &[i64])] =
        &[(0, 5, &[0, 1, 2, 3, 4]), (1, 3, &[1, 2]), (3, 100, &[3, 4]), (4, 2, &[]), (5, 9, &[]), (2, 2, &[])];
    for (from, to, expected) in cases {
        let rows = backend.read("reading", |tx| tx.transcript_rows("chat:1", *from, *to)).unwrap();
        let seqs: Vec<i64> = rows.iter().map(|row| row.seq).collect();
        assert_eq!(&seqs, expected, "[{from}, {to})");
        for row in &rows {
            assert_eq!(row, &messages[row.seq as usize]);
        }
    }

    let duplicate = backend.write("appending", |tx| tx.insert_transcript("chat:1", &message(2, "user", "again", None)));
    match duplicate {
        Err(MemoryError::Storage { source, .. }) => assert_eq!(source.kind(), StorageErrorKind::Constraint),
        other => panic!("a second message at one seq is refused, got {other:?}"),
    }
    // (delete below, how many went, the seqs left)
    let cases: &[(i64, usize, &[i64])] = &[(2, 2, &[2, 3, 4]), (2, 0, &[2, 3, 4]), (0, 0, &[2, 3, 4]), (10, 3, &[])];
    for (below, removed, left) in cases {
        assert_eq!(backend.write("deleting", |tx| tx.delete_transcript_below("chat:1", *below)).unwrap(), *removed);
        let seqs: Vec<i64> = backend
            .read("reading", |tx| tx.transcript_rows("chat:1", 0, 100))
            .unwrap()
            .iter()
            .map(|row| row.seq)
            .collect();
        assert_eq!(&seqs, left, "below {below}");
        assert_eq!(session_of(backend, "chat:1").unwrap().stored, left.len() as i64);
    }
    let other: Vec<String> = backend
        .read("reading", |tx| tx.transcript_rows("chat:2", 0, 100))
        .unwrap()
        .into_iter()
        .map(|row| row.content)
        .collect();
    assert_eq!(other, ["another session"], "another session's messages stay");
}

fn idle_sessions_least_recent_first(fixture: &Fixture) {
    let backend = &*fixture.backend;
    // (session, last activity, next_seq, history marker)
    let sessions: &[(&str, i64, i64, i64)] = &[
        ("pending-300", 300, 2, 0),
        ("pending-100", 100, 3, 1),
        ("consolidated-200", 200, 2, 2),
        ("pending-500", 500, 1, 0),
        ("empty-50", 50, 0, 0),
    ];
    backend
        .write("seeding", |tx| {
            for (key, at, next_seq, history) in sessions {
                tx.ensure_session(key, *at, "global")?;
                tx.advance_session(key, *next_seq, *at)?;
                if *history > 0 {
                    assert!(tx.move_marker(key, MarkerColumn::History, 0, *history)?);
                }
            }
            Ok(())
        })
        .unwrap();
    // (idle before, the sessions listed)
    let cases: &[(i64, &[&str])] = &[
        (50, &[]),
        (101, &["pending-100"]),
        (300, &["pending-100"]),
        (301, &["pending-100", "pending-300"]),
        (10_000, &["pending-100", "pending-300", "pending-500"]),
    ];
    for (before, expected) in cases {
        assert_eq!(&backend.read("listing", |tx| tx.idle_sessions(*before)).unwrap(), expected, "before {before}");
    }
}

/// A claim as stored: (owner, until).
type Claim = (Option<i64>, Option<i64>);

/// (session, marker, from, to, moved, history and preferences afterwards)
type MarkerMove<'a> = (&'a str, MarkerColumn, i64, i64, bool, (i64, i64));

fn claims_and_markers(fixture: &Fixture) {
    let backend = &*fixture.backend;
    backend.write("ensuring", |tx| tx.ensure_session("chat:1", 100, "global")).unwrap();
    let claim = || {
        let session = session_of(backend, "chat:1").unwrap();
        (session.claim_owner, session.claim_until)
    };
    // (step, the claim afterwards)
    let steps: &[(&str, Claim)] = &[
        ("owner 7 claims", (Some(7), Some(1_000))),
        ("owner 8 releases", (Some(7), Some(1_000))),
        ("owner 7 releases", (None, None)),
        ("owner 8 claims", (Some(8), Some(2_000))),
        ("the claim is cleared", (None, None)),
        ("owner 7 releases nothing", (None, None)),
    ];
    for (index, (step, expected)) in steps.iter().enumerate() {
        backend
            .write("claiming", |tx| match index {
                0 => tx.set_claim("chat:1", Some((7, 1_000))),
                1 => tx.release_claim("chat:1", 8),
                2 | 5 => tx.release_claim("chat:1", 7),
                3 => tx.set_claim("chat:1", Some((8, 2_000))),
                _ => tx.set_claim("chat:1", None),
            })
            .unwrap();
        assert_eq!(claim(), *expected, "{step}");
    }

    let moves: &[MarkerMove<'_>] = &[
        ("chat:1", MarkerColumn::History, 0, 3, true, (3, 0)),
        ("chat:1", MarkerColumn::History, 0, 5, false, (3, 0)),
        ("chat:1", MarkerColumn::Preferences, 0, 2, true, (3, 2)),
        ("chat:1", MarkerColumn::Preferences, 3, 4, false, (3, 2)),
        ("chat:1", MarkerColumn::History, 3, 6, true, (6, 2)),
        ("chat:unknown", MarkerColumn::History, 0, 1, false, (6, 2)),
    ];
    for (session, marker, from, to, moved, (history, preferences)) in moves {
        let did = backend.write("moving", |tx| tx.move_marker(session, *marker, *from, *to)).unwrap();
        assert_eq!(did, *moved, "{session} {marker:?} {from} -> {to}");
        let state = session_of(backend, "chat:1").unwrap();
        assert_eq!((state.history_marker, state.preferences_marker), (*history, *preferences));
    }
    assert_eq!(session_of(backend, "chat:unknown"), None);
}

fn ledger_keeps_the_first_record(fixture: &Fixture) {
    let backend = &*fixture.backend;
    // (source, path, item hash, landed as, outcome, lessons written afterwards)
    let records: &[(&str, &str, &str, &str, &str, i64)] = &[
        ("claude", "CLAUDE.md", "h1", "lesson", "skipped", 0),
        ("claude", "CLAUDE.md", "h1", "lesson", "written", 0),
        ("claude", "CLAUDE.md", "h2", "lesson", "written", 1),
        ("claude", "notes.md", "h1", "semantic", "written", 1),
        ("claude", "notes.md", "h3", "lesson", "duplicate", 1),
        ("hermes", "CLAUDE.md", "h1", "lesson", "written", 2),
        ("hermes", "CLAUDE.md", "h1", "semantic", "written", 2),
    ];
    for (index, (source, path, item_hash, landed_as, outcome, lessons)) in records.iter().enumerate() {
        backend
            .write("recording", |tx| {
                tx.record_ledger(&LedgerEntry {
                    source,
                    path,
                    item_hash,
                    landed_as,
                    outcome,
                    target: Some("lesson.abc"),
                    recorded_at: index as i64,
                })
            })
            .unwrap();
        assert_eq!(backend.read("counting", |tx| tx.ledger_lessons_written()).unwrap(), *lessons, "record {index}");
    }
    // (source, its items)
    let cases: &[(&str, &[(&str, &str)])] = &[
        ("claude", &[("CLAUDE.md", "h1"), ("CLAUDE.md", "h2"), ("notes.md", "h1"), ("notes.md", "h3")]),
        ("hermes", &[("CLAUDE.md", "h1")]),
        ("openclaw", &[]),
    ];
    for (source, expected) in cases {
        let mut items = backend.read("reading", |tx| tx.ledger_items(source)).unwrap();
        items.sort();
        let items: Vec<(&str, &str)> = items.iter().map(|(path, hash)| (path.as_str(), hash.as_str())).collect();
        assert_eq!(&items, expected, "{source}");
    }
}

/// (name, value, what both settings read afterwards)
type SettingStep<'a> = (&'a str, &'a str, (Option<&'a str>, Option<&'a str>));

fn settings_get_and_set(fixture: &Fixture) {
    let backend = &*fixture.backend;
    let setting = |name| backend.read("reading", |tx| tx.setting(name)).unwrap();
    assert_eq!(setting("embedding_space"), None);
    let steps: &[SettingStep<'_>] = &[
        ("embedding_space", "model#384", (Some("model#384"), None)),
        ("embedding_space", "other#768", (Some("other#768"), None)),
        ("import_cursor", "", (Some("other#768"), Some(""))),
    ];
    for (name, value, (space, cursor)) in steps {
        backend.write("setting", |tx| tx.set_setting(name, value)).unwrap();
        assert_eq!(
            (setting("embedding_space").as_deref(), setting("import_cursor").as_deref()),
            (*space, *cursor),
            "after {name} = {value}"
        );
    }
}

fn evidence_follows_its_row(fixture: &Fixture) {
    use super::{EvidenceLayer, EvidenceRow};
    let backend = &*fixture.backend;
    let evidence = EvidenceRow { session_key: "chat-1".into(), first_seq: 2, last_seq: 4, quote: "uses helix".into() };
    let write_with = |value: &str, source: &Source, evidence: Option<&EvidenceRow>| {
        let value_text = serde_json::to_string(value).unwrap();
        backend
            .write("writing", |tx| {
                apply_write(
                    tx,
                    &PreparedWrite {
                        key: "pref.editor",
                        value_text: &value_text,
                        confidence: 0.9,
                        source,
                        category: None,
                        vector: None,
                        evidence,
                    },
                )
            })
            .unwrap()
    };
    let stored = || backend.read("reading", |tx| tx.evidence(EvidenceLayer::Semantic, "pref.editor")).unwrap();
    write_with("helix", &Source::Consolidation, Some(&evidence));
    assert_eq!(stored(), Some(evidence.clone()));
    // The episodic layer is apart from the semantic one.
    backend.write("evidence", |tx| tx.set_evidence(EvidenceLayer::Episodic, "7", Some(&evidence))).unwrap();
    let listed = backend.read("listing", |tx| tx.layer_evidence(EvidenceLayer::Semantic)).unwrap();
    assert_eq!(listed, vec![("pref.editor".to_owned(), evidence.clone())]);
    // A write without evidence (a person's) clears it; a delete does too.
    write_with("vim", &Source::UserExplicit, None);
    assert_eq!(stored(), None);
    write_with("emacs", &Source::UserExplicit, Some(&evidence));
    assert_eq!(stored(), Some(evidence.clone()));
    backend.write("deleting", |tx| apply_delete(tx, "pref.editor", &Source::UserExplicit, None)).unwrap();
    assert_eq!(stored(), None);
    let episodic = backend.read("reading", |tx| tx.evidence(EvidenceLayer::Episodic, "7")).unwrap();
    assert_eq!(episodic, Some(evidence));
}

/// PostgreSQL answers keyword searches from its term table with the scores
/// the in-memory index gives the same active rows: same stems, same
/// lengths, same BM25; tombstoned rows are left out.
#[test]
fn postgres_keyword_hits_score_as_the_in_memory_index() {
    use crate::bm25::{self, Bm25Index};
    use crate::constants::FTS_MAX_QUERY_TERMS;
    use crate::episodic::keyword::document;
    use crate::keywords::{OnlyStopwords, fts_query};

    let Some(fixture) = postgres() else { return };
    let backend = &*fixture.backend;
    assert!(backend.searches_keywords());
    const WORDS: &[&str] = &[
        "deploy",
        "deploying",
        "deployed",
        "deployment",
        "server",
        "servers",
        "staging",
        "stage",
        "release",
        "releases",
        "garden",
        "gardening",
        "frost",
        "tomato",
        "tomatoes",
        "editor",
        "editing",
        "cluster",
        "clusters",
        "backup",
        "backups",
        "nightly",
        "weekly",
        "the",
        "and",
        "on",
    ];
    let mut state: u64 = 7;
    let mut next = |below: u64| {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) % below
    };
    let texts: Vec<String> = (0..120)
        .map(|_| {
            let length = 3 + next(14);
            (0..length).map(|_| WORDS[next(WORDS.len() as u64) as usize]).collect::<Vec<_>>().join(" ")
        })
        .collect();
    let ids: Vec<i64> = texts.iter().map(|text| insert_episode(backend, (text, 0.5, 100, None))).collect();
    for id in ids.iter().step_by(7) {
        tombstone(backend, *id);
    }
    let active: Vec<(u64, String)> = ids
        .iter()
        .zip(&texts)
        .enumerate()
        .filter(|(n, _)| n % 7 != 0)
        .map(|(_, (id, text))| (*id as u64, document(text, r#"["test"]"#)))
        .collect();
    let index = Bm25Index::build(active.iter().map(|(id, text)| (*id, text.as_str())));

    for query in ["deploying servers", "garden frost tomatoes", "the weekly backups of the staging cluster", "editor"] {
        let fts = fts_query(query, FTS_MAX_QUERY_TERMS, OnlyStopwords::MatchNothing).unwrap();
        let hits = backend.read("searching", |tx| tx.episodic_keyword_hits(&fts, 10)).unwrap().unwrap();
        let everything: HashMap<u64, f64> =
            index.search(&bm25::query_terms(query, FTS_MAX_QUERY_TERMS), active.len()).into_iter().collect();
        let mut expected: Vec<f64> = everything.values().copied().collect();
        expected.sort_by(|a, b| b.total_cmp(a));
        expected.truncate(10);
        assert_eq!(hits.len(), expected.len(), "{query}: {hits:?}");
        for ((id, score), best) in hits.iter().zip(&expected) {
            let indexed = everything.get(&(*id as u64)).unwrap_or_else(|| panic!("{query}: {id} is no match"));
            assert!((score - indexed).abs() < 1e-4 * indexed, "{query}: {id} scores {score}, the index {indexed}");
            assert!((score - best).abs() < 1e-4 * best, "{query}: {score} where the index ranks {best}");
        }
    }
}
