//! [`MemoryDb`] itself on every backend: the same public calls, the same
//! answers, whether the rows are in SQLite, in memory or in PostgreSQL.

use std::sync::Arc;

use cairn_embedder::HashEmbedder;
use serde_json::json;

use crate::{
    EpisodicOutcome, EpisodicQuery, LessonCategory, MemoryConfig, MemoryDb, NewEpisode, RetrievalMode, Source,
    TranscriptMessage, WriteOutcome,
};

/// A store and what keeps it alive.
struct Opened {
    db: MemoryDb,
    _home: tempfile::TempDir,
}

fn config() -> MemoryConfig {
    MemoryConfig { episodic_cap: 5, ..MemoryConfig::default() }
}

fn on_sqlite() -> Opened {
    let home = tempfile::tempdir().unwrap();
    let db = MemoryDb::open_in_home(home.path(), config()).unwrap();
    Opened { db, _home: home }
}

fn on_memory() -> Opened {
    Opened { db: MemoryDb::open_in_memory(config()).unwrap(), _home: tempfile::tempdir().unwrap() }
}

/// The test server, from `CAIRN_TEST_POSTGRES_URL`; under `CI=true` a
/// missing server fails the test.
pub(crate) fn postgres_url() -> Option<String> {
    match std::env::var("CAIRN_TEST_POSTGRES_URL") {
        Ok(url) => Some(url),
        Err(_) => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CAIRN_TEST_POSTGRES_URL is not set: .ci/run starts a throwaway PostgreSQL cluster and sets it"
            );
            eprintln!("skipping: CAIRN_TEST_POSTGRES_URL is not set");
            None
        }
    }
}

/// A schema no other test uses: the tests share one server and run in parallel.
pub(crate) fn fresh_schema() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("cairn_db{}_{n}_{}", std::process::id(), crate::clock::now_ms() % 1_000_000)
}

fn on_postgres() -> Option<Opened> {
    let url = postgres_url()?;
    let home = tempfile::tempdir().unwrap();
    let db = MemoryDb::open_postgres_schema(&url, &fresh_schema(), home.path(), config()).unwrap();
    Some(Opened { db, _home: home })
}

macro_rules! db_suite {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(#[test] fn $case() { super::$case(super::on_sqlite().db) })*
        }
        mod memory {
            $(#[test] fn $case() { super::$case(super::on_memory().db) })*
        }
        mod postgres {
            $(#[test] fn $case() { if let Some(opened) = super::on_postgres() { super::$case(opened.db) } })*
        }
    };
}

db_suite!(
    facts_and_their_context,
    lessons_render_newest_first,
    episodic_rows_are_found_by_keywords_and_vectors,
    the_episodic_cap_evicts_and_preservation_refuses,
    superseded_values_retire_quoting_rows,
    transcripts_number_and_claim,
    backfill_fills_the_missing_vectors,
    statistics_count_every_layer,
);

fn facts_and_their_context(db: MemoryDb) {
    let written = db.write_semantic("pref.editor", &json!("helix"), 0.9, Source::Consolidation).unwrap();
    assert!(matches!(written, WriteOutcome::Created { .. }));
    db.write_semantic("project.lang", &json!("rust"), 1.0, Source::UserExplicit).unwrap();
    assert_eq!(db.get_semantic("pref.editor").unwrap().unwrap().value, json!("helix"));
    let keys: Vec<String> = db.list_semantic("").unwrap().into_iter().map(|entry| entry.key).collect();
    assert_eq!(keys, ["pref.editor", "project.lang"]);
    let context = db.semantic_context("which editor", 1_000).unwrap();
    assert_eq!(context, "[Semantic Memory]\npref.editor: helix\nproject.lang: rust");
    let error = db.write_semantic("pref.theme", &json!("dark"), 0.5, Source::Consolidation).unwrap_err();
    assert_eq!(error.rejection().map(|rejected| rejected.code()), Some("low_confidence"));
    let events = db.audit(10).unwrap();
    let actions: Vec<&str> = events.iter().map(|event| event.action.as_str()).collect();
    assert_eq!(actions, ["rejected", "created", "created"]);
}

fn lessons_render_newest_first(db: MemoryDb) {
    db.write_lesson("run cargo fmt before committing", None, LessonCategory::Tool, Source::UserExplicit).unwrap();
    let duplicate = db.write_lesson("cargo fmt", None, LessonCategory::Tool, Source::UserExplicit).unwrap();
    assert!(matches!(duplicate.outcome, WriteOutcome::Skipped { .. }));
    let lessons = db.get_lessons(10).unwrap();
    assert_eq!(lessons.len(), 1);
    assert!(db.lessons_context().unwrap().contains("run cargo fmt before committing"));
}

fn with_vectors(db: MemoryDb) -> MemoryDb {
    db.with_embedder(Arc::new(HashEmbedder::new(64)))
}

fn inserted(outcome: EpisodicOutcome) -> i64 {
    match outcome {
        EpisodicOutcome::Inserted { id, .. } => id,
        other => panic!("expected an insert, got {other:?}"),
    }
}

fn episodic_rows_are_found_by_keywords_and_vectors(db: MemoryDb) {
    let db = with_vectors(db);
    let hike = inserted(db.write_episodic(&NewEpisode::new("We hiked the ridge trail above the lake")).unwrap());
    let flight = inserted(db.write_episodic(&NewEpisode::new("Booked the flights to Porto for October")).unwrap());
    assert!(flight > hike, "ids grow");
    let again = db.write_episodic(&NewEpisode::new("We hiked the ridge trail above the lake")).unwrap();
    assert!(matches!(again, EpisodicOutcome::Duplicate { of, .. } if of == hike), "{again:?}");
    let keyword = db.search_episodic(&EpisodicQuery::new("porto flights").mode(RetrievalMode::Keyword)).unwrap();
    assert_eq!(keyword.iter().map(|hit| hit.id).collect::<Vec<_>>(), [flight]);
    let vector = db
        .search_episodic(&EpisodicQuery::new("We hiked the ridge trail above the lake").mode(RetrievalMode::PureVector))
        .unwrap();
    assert_eq!(vector.first().map(|hit| hit.id), Some(hike));
    assert_eq!(db.delete_episodic(hike).unwrap(), crate::DeleteOutcome::Deleted);
    assert!(db.get_episodic(hike).unwrap().is_none());
    let after = db
        .search_episodic(&EpisodicQuery::new("We hiked the ridge trail above the lake").mode(RetrievalMode::Hybrid))
        .unwrap();
    assert!(after.iter().all(|hit| hit.id != hike), "{after:?}");
    let listed: Vec<i64> = db.list_episodic(10, 0).unwrap().into_iter().map(|row| row.id).collect();
    assert_eq!(listed, [flight]);
}

fn the_episodic_cap_evicts_and_preservation_refuses(db: MemoryDb) {
    let mut ids = Vec::new();
    for (index, importance) in [0.9, 0.1, 0.8, 0.7, 0.6].into_iter().enumerate() {
        let text = format!("Episode number {index} about topic {}", ["alpha", "beta", "gamma", "delta", "eps"][index]);
        ids.push(inserted(db.write_episodic(&NewEpisode::new(text).importance(importance)).unwrap()));
    }
    let sixth = db.write_episodic(&NewEpisode::new("A sixth episode about the zeta release")).unwrap();
    let EpisodicOutcome::Inserted { evicted, .. } = sixth else { panic!("{sixth:?}") };
    assert_eq!(evicted, [ids[1]], "the lowest importance goes first");
    let refused = db.write_episodic(&NewEpisode::new("A seventh episode, kept out").preserve(true)).unwrap();
    assert!(matches!(refused, EpisodicOutcome::StoreFull { cap: 5 }), "{refused:?}");
    assert_eq!(db.stats().unwrap().episodic_live, 5);
}

fn superseded_values_retire_quoting_rows(db: MemoryDb) {
    db.write_semantic("user.city", &json!("Lisbon"), 1.0, Source::UserExplicit).unwrap();
    let quoting = inserted(db.write_episodic(&NewEpisode::new("Moved to Lisbon in the spring")).unwrap());
    let other = inserted(db.write_episodic(&NewEpisode::new("Lisboans love the tram rides")).unwrap());
    db.write_semantic("user.city", &json!("Porto"), 1.0, Source::UserExplicit).unwrap();
    assert!(db.get_episodic(quoting).unwrap().is_none(), "the row quoting the old value retires");
    assert!(db.get_episodic(other).unwrap().is_some(), "a longer word is not a quote");
}

fn transcripts_number_and_claim(db: MemoryDb) {
    let message = |text: &str| TranscriptMessage { role: "user".into(), content: text.into(), tool_calls: Vec::new() };
    let first = db.append_transcript_at("s1", &[message("hello"), message("deploy on friday")], 1_000).unwrap();
    assert_eq!((first.first_seq, first.next_seq), (0, 2));
    let second = db.append_transcript_at("s1", &[message("token sk-abc123def456ghi789jkl")], 500).unwrap();
    assert_eq!((second.first_seq, second.next_seq), (2, 3));
    let state = db.transcript_state("s1").unwrap().unwrap();
    assert_eq!((state.next_seq, state.stored, state.last_activity_ms), (3, 3, 1_000), "activity never goes back");
    let tail: Vec<u64> = db.transcript_tail("s1", 2).unwrap().into_iter().map(|row| row.seq).collect();
    assert_eq!(tail, [1, 2]);
    assert_eq!(db.idle_sessions(2_000).unwrap(), ["s1"]);
    assert!(db.idle_sessions(1_000).unwrap().is_empty());
    let claim = db.claim_transcript("s1", crate::transcript::Marker::History, 7, 60_000).unwrap().unwrap();
    assert_eq!((claim.start, claim.end, claim.messages.len()), (0, 3, 3));
    assert!(db.claim_transcript("s1", crate::transcript::Marker::History, 8, 60_000).unwrap().is_none());
    db.finish_claim("s1", 7, &[(crate::transcript::Marker::History, 0, 3)], &[], 2_000).unwrap();
    assert_eq!(db.transcript_state("s1").unwrap().unwrap().history_marker, 3);
    assert!(db.idle_sessions(5_000).unwrap().is_empty(), "nothing left to consolidate");
}

fn backfill_fills_the_missing_vectors(db: MemoryDb) {
    for text in ["The garden needs water on Mondays", "Call the plumber about the kitchen sink"] {
        db.write_episodic(&NewEpisode::new(text)).unwrap();
    }
    let db = with_vectors(db);
    let report = db.backfill_missing_embeddings(None).unwrap();
    assert_eq!((report.embedded, report.remaining), (2, 0));
    let status = db.build_episodic_index().unwrap();
    assert_eq!((status.index_len, status.active_with_vectors, status.active), (2, 2, 2));
    assert!(db.recorded_episodic_space().unwrap().is_some());
}

fn statistics_count_every_layer(db: MemoryDb) {
    db.write_semantic("pref.a", &json!(1), 1.0, Source::UserExplicit).unwrap();
    db.write_semantic("pref.b", &json!(2), 1.0, Source::UserExplicit).unwrap();
    db.delete_semantic("pref.b", Source::UserExplicit).unwrap();
    db.write_lesson("never push on friday", None, LessonCategory::Preference, Source::UserExplicit).unwrap();
    let id = inserted(db.write_episodic(&NewEpisode::new("A row that will be deleted soon")).unwrap());
    db.write_episodic(&NewEpisode::new("A row that stays in the store")).unwrap();
    db.delete_episodic(id).unwrap();
    let stats = db.stats().unwrap();
    assert_eq!(
        (stats.semantic_live, stats.semantic_deleted, stats.lessons, stats.episodic_live, stats.episodic_deleted),
        (2, 1, 1, 1, 1)
    );
    assert_eq!(stats.audit_events, 7);
}

/// Two handles on one fresh PostgreSQL schema, standing for two processes,
/// and the homes that keep them; `None` (outside CI) without a server.
fn two_processes() -> Option<(MemoryDb, MemoryDb, [tempfile::TempDir; 2])> {
    let url = postgres_url()?;
    let schema = fresh_schema();
    let homes = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let open = |home: &tempfile::TempDir| MemoryDb::open_postgres_schema(&url, &schema, home.path(), config()).unwrap();
    Some((open(&homes[0]), open(&homes[1]), homes))
}

#[test]
fn a_second_process_on_postgresql_hears_of_a_change_and_catches_up_before_it_reads() {
    let Some((a, b, _homes)) = two_processes() else { return };
    let (a, b) = (with_vectors(a), with_vectors(b));
    assert_eq!(b.build_episodic_index().unwrap().index_len, 0);
    // The listener counts one change when it starts listening (what changed before it is unknown).
    let patience = std::time::Duration::from_secs(30);
    let listening = b.wait_for_change(0, patience);
    assert!(listening > 0, "the listener never started");
    let seen = b.wait_for_change(listening, std::time::Duration::ZERO);
    a.write_episodic(&NewEpisode::new("The release train leaves on Thursday")).unwrap();
    let heard = b.wait_for_change(seen, patience);
    assert!(heard > seen, "no notification reached the second process");
    assert_eq!(b.episodic_index_status().unwrap().index_len, 0, "nothing has read the store yet");
    b.catch_up().unwrap();
    assert_eq!(b.episodic_index_status().unwrap().index_len, 1, "the vector index caught up without a search");
    // A semantic write bumps its revision with the commit; it is announced after the commit too.
    let seen = b.wait_for_change(heard, std::time::Duration::ZERO);
    a.write_semantic("user.city", &json!("Lisbon"), 1.0, Source::UserExplicit).unwrap();
    assert!(b.wait_for_change(seen, patience) > seen, "no notification of the semantic write");
    assert_eq!(b.get_semantic("user.city").unwrap().unwrap().value, json!("Lisbon"));
}

/// Another process that commits more often than the listener's poll still
/// gets its changes heard one by one, while it goes on writing, not once
/// it stops.
#[test]
fn a_process_on_postgresql_hears_changes_while_another_writes_without_a_pause() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let Some((a, b, _homes)) = two_processes() else { return };
    let listening = b.wait_for_change(0, std::time::Duration::from_secs(30));
    assert!(listening > 0, "the listener never started");
    let (stop, writing) = (AtomicBool::new(false), AtomicBool::new(true));
    std::thread::scope(|scope| {
        scope.spawn(|| {
            // A commit every 100 ms for at most 20 s: never a quiet spell of the listener's 500 ms poll.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
                a.write_semantic(&format!("user.stream_{n}"), &json!(n), 1.0, Source::UserExplicit).unwrap();
                n += 1;
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            writing.store(false, Ordering::SeqCst);
        });
        let mut seen = b.wait_for_change(listening, std::time::Duration::ZERO);
        let mut heard_while_writing = 0;
        for _ in 0..3 {
            let heard = b.wait_for_change(seen, std::time::Duration::from_secs(5));
            heard_while_writing += usize::from(heard > seen && writing.load(Ordering::SeqCst));
            seen = heard;
        }
        stop.store(true, Ordering::SeqCst);
        assert_eq!(heard_while_writing, 3, "changes were heard only once the writes paused");
    });
}

/// A gateway's own commits are no news to it: its catch-up thread wakes
/// only for what other processes wrote.
#[test]
fn a_process_on_postgresql_does_not_hear_its_own_announcements() {
    let Some((a, b, _homes)) = two_processes() else { return };
    let patience = std::time::Duration::from_secs(30);
    let listening = a.wait_for_change(0, patience);
    assert!(listening > 0, "the listener never started");
    let seen = a.wait_for_change(listening, std::time::Duration::ZERO);
    a.write_semantic("user.city", &json!("Lisbon"), 1.0, Source::UserExplicit).unwrap();
    a.write_episodic(&NewEpisode::new("The release train leaves on Thursday")).unwrap();
    // Announcements go out within a few hundredths of a second; two seconds is ample.
    assert_eq!(a.wait_for_change(seen, std::time::Duration::from_secs(2)), seen, "a heard its own writes");
    b.write_semantic("user.city", &json!("Porto"), 1.0, Source::UserExplicit).unwrap();
    assert!(a.wait_for_change(seen, patience) > seen, "a did not hear the other process's write");
}

/// Two handles on one store (two gateways, as far as the store can tell),
/// each writing from its own thread: the active-row cap and the
/// preservation-mode capacity check are decided inside the write
/// transaction, so neither writer can push the store past its cap.
fn the_episodic_cap_holds_under_two_writers(handles: [MemoryDb; 2]) {
    const PER_WRITER: usize = 30;
    let handles = handles.map(Arc::new);
    let burst = |cap: usize, preserve: bool, tag: &'static str| -> Vec<EpisodicOutcome> {
        let writers: Vec<_> = handles
            .iter()
            .enumerate()
            .map(|(writer, db)| {
                let db = Arc::clone(db);
                std::thread::spawn(move || {
                    (0..PER_WRITER)
                        .map(|n| {
                            let episode =
                                NewEpisode::new(format!("{tag} writer {writer} wrote episode {n}")).preserve(preserve);
                            db.write_episodic_capped(&episode, cap).unwrap()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        writers.into_iter().flat_map(|writer| writer.join().unwrap()).collect()
    };

    let cap = 7;
    let outcomes = burst(cap, false, "evicting");
    let mut evicted: Vec<i64> = outcomes
        .iter()
        .flat_map(|outcome| match outcome {
            EpisodicOutcome::Inserted { evicted, .. } => evicted.clone(),
            other => panic!("every distinct row is inserted: {other:?}"),
        })
        .collect();
    evicted.sort_unstable();
    let before = evicted.len();
    evicted.dedup();
    assert_eq!(before, evicted.len(), "a row was evicted twice");
    assert_eq!(evicted.len(), 2 * PER_WRITER - cap, "every insertion past the cap evicted exactly one row");
    for db in &handles {
        assert_eq!(db.stats().unwrap().episodic_live, cap as i64);
    }

    let cap = 2 * cap + 20;
    let outcomes = burst(cap, true, "preserving");
    let inserted = outcomes.iter().filter(|outcome| matches!(outcome, EpisodicOutcome::Inserted { .. })).count();
    let refused = outcomes.iter().filter(|outcome| matches!(outcome, EpisodicOutcome::StoreFull { .. })).count();
    assert_eq!((inserted, refused), (cap - 7, 2 * PER_WRITER - (cap - 7)), "{outcomes:?}");
    assert!(outcomes.iter().all(|outcome| match outcome {
        EpisodicOutcome::Inserted { evicted, .. } => evicted.is_empty(),
        _ => true,
    }));
    for db in &handles {
        assert_eq!(db.stats().unwrap().episodic_live, cap as i64);
    }
}

#[test]
fn the_episodic_cap_holds_under_two_writers_on_sqlite() {
    let home = tempfile::tempdir().unwrap();
    let open = || MemoryDb::open_in_home(home.path(), config()).unwrap();
    the_episodic_cap_holds_under_two_writers([open(), open()]);
}

#[test]
fn the_episodic_cap_holds_under_two_writers_on_postgresql() {
    let Some((a, b, _homes)) = two_processes() else { return };
    the_episodic_cap_holds_under_two_writers([a, b]);
}

/// The revision of the semantic snapshot this process holds, if any.
fn held_snapshot_revision(db: &MemoryDb) -> Option<i64> {
    db.snapshot.current.lock().as_ref().map(|snapshot| snapshot.revision)
}

#[test]
fn a_catch_up_keeps_the_semantic_snapshot_current_once_a_search_has_built_it() {
    let Opened { db, _home } = on_sqlite();
    db.write_semantic("user.city", &json!("Lisbon"), 1.0, Source::UserExplicit).unwrap();
    db.catch_up().unwrap();
    assert_eq!(held_snapshot_revision(&db), None, "no search asked for a snapshot");
    assert_eq!(db.search_semantic("city", 5).unwrap().len(), 1);
    let built = held_snapshot_revision(&db).expect("the search built the snapshot");
    db.write_semantic("user.editor", &json!("helix"), 1.0, Source::UserExplicit).unwrap();
    assert_eq!(held_snapshot_revision(&db), Some(built), "a write leaves the snapshot to the next reader");
    db.catch_up().unwrap();
    let caught_up = held_snapshot_revision(&db).unwrap();
    assert!(caught_up > built, "the catch-up brought the snapshot to the new revision");
    assert_eq!(db.search_semantic("editor", 5).unwrap().len(), 1);
    assert_eq!(held_snapshot_revision(&db), Some(caught_up), "the search found it current");
}
