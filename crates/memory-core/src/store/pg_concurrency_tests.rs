//! Writers in parallel on one PostgreSQL store: two handles on one schema
//! stand for two gateways. A write holds only the locks its invariants
//! need, so a write held open on one key leaves every other key free, and
//! writers racing on one key, one lesson topic or near-duplicate episodes
//! end where a serial replay of what they were told ends.

use std::sync::Arc;
use std::sync::mpsc;

use super::db_tests::{fresh_schema, postgres_url};
use crate::semantic::{PreparedWrite, apply_write};
use crate::{EpisodicOutcome, LessonCategory, MemoryConfig, MemoryDb, NewEpisode, Source, WriteOutcome};

/// Two handles on one fresh schema, and what keeps their homes alive.
struct TwoGateways {
    a: Arc<MemoryDb>,
    b: Arc<MemoryDb>,
    url: String,
    schema: String,
    _homes: [tempfile::TempDir; 2],
}

fn two_gateways() -> Option<TwoGateways> {
    let url = postgres_url()?;
    let schema = fresh_schema();
    let homes = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let open = |home: &tempfile::TempDir| {
        let db = MemoryDb::open_postgres_schema(&url, &schema, home.path(), MemoryConfig::default()).unwrap();
        Arc::new(db.with_embedder(Arc::new(cairn_embedder::HashEmbedder::new(64))))
    };
    let (a, b) = (open(&homes[0]), open(&homes[1]));
    Some(TwoGateways { a, b, url, schema, _homes: homes })
}

/// Sessions waiting for a lock held by the session that holds the
/// semantic lock of `key` in `schema` (other tests share the server).
fn waiting_behind(url: &str, schema: &str, key: &str) -> i64 {
    let (class, object) = super::postgres::lock_id(schema, "semantic", key);
    let as_oid = |half: i32| i64::from(u32::from_ne_bytes(half.to_ne_bytes()));
    let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
    client
        .query_one(
            "SELECT count(*) FROM pg_stat_activity w, pg_locks h
             WHERE h.locktype = 'advisory' AND h.granted AND h.objsubid = 2
               AND h.classid::int8 = $1 AND h.objid::int8 = $2 AND h.pid = ANY(pg_blocking_pids(w.pid))",
            &[&as_oid(class), &as_oid(object)],
        )
        .unwrap()
        .get(0)
}

/// Runs `write` on a thread while `held` stays open, and answers its
/// result; fails as soon as the write waits for a lock instead.
fn completes_while_held<T: Send + 'static>(gateways: &TwoGateways, write: impl FnOnce() -> T + Send + 'static) -> T {
    let writer = std::thread::spawn(write);
    while !writer.is_finished() {
        let waiting = waiting_behind(&gateways.url, &gateways.schema, HELD);
        assert_eq!(waiting, 0, "the write waits for a lock the held transaction has");
        std::thread::yield_now();
    }
    writer.join().unwrap()
}

/// A write transaction of gateway A stopped halfway through a write of
/// `user.held` (row read under its lock, new value written, event logged,
/// no commit yet) until the returned sender is dropped; `done` answers its
/// outcome once committed.
fn hold_write(db: Arc<MemoryDb>, key: &'static str) -> (mpsc::Sender<()>, std::thread::JoinHandle<WriteOutcome>) {
    let (held_tx, held_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        db.rows()
            .write("holding a write open", |tx| {
                let source = Source::UserExplicit;
                let outcome = apply_write(
                    tx,
                    &PreparedWrite {
                        key,
                        value_text: "\"from the held transaction\"",
                        confidence: 1.0,
                        source: &source,
                        category: None,
                        vector: None,
                        evidence: None,
                    },
                )?;
                // A read sends the queued row and event: the transaction now
                // holds them on the server, as a slow commit would.
                tx.event_count()?;
                held_tx.send(()).unwrap();
                // Until the test lets go.
                let _ = release_rx.recv();
                Ok(outcome)
            })
            .unwrap()
    });
    held_rx.recv().unwrap();
    (release_tx, holder)
}

/// The key the held transaction writes.
const HELD: &str = "user.held";

#[test]
fn a_write_held_open_on_one_key_leaves_other_keys_free_on_every_gateway() {
    let Some(gateways) = two_gateways() else { return };
    let (release, holder) = hold_write(Arc::clone(&gateways.a), HELD);

    // Other keys, from the other gateway and from the same one; a lesson; an episode.
    let b = Arc::clone(&gateways.b);
    let outcome = completes_while_held(&gateways, move || {
        b.write_semantic("user.other", &serde_json::json!("b"), 1.0, Source::UserExplicit).unwrap()
    });
    assert!(matches!(outcome, WriteOutcome::Created { .. }), "{outcome:?}");
    let a = Arc::clone(&gateways.a);
    let outcome = completes_while_held(&gateways, move || {
        a.write_semantic("pref.editor", &serde_json::json!("helix"), 1.0, Source::UserExplicit).unwrap()
    });
    assert!(matches!(outcome, WriteOutcome::Created { .. }), "{outcome:?}");
    let b = Arc::clone(&gateways.b);
    let lesson = completes_while_held(&gateways, move || {
        b.write_lesson("run the tests before a commit", None, LessonCategory::Tool, Source::UserExplicit).unwrap()
    });
    assert!(matches!(lesson.outcome, WriteOutcome::Created { .. }), "{lesson:?}");
    let b = Arc::clone(&gateways.b);
    let episode = completes_while_held(&gateways, move || {
        b.write_episodic(&NewEpisode::new("The staging database moved to a new host")).unwrap()
    });
    assert!(matches!(episode, EpisodicOutcome::Inserted { .. }), "{episode:?}");

    // The same key waits, then sees the held write committed and applies the ladder to it.
    let b = Arc::clone(&gateways.b);
    let same_key = std::thread::spawn(move || {
        b.write_semantic("user.held", &serde_json::json!("later"), 0.85, Source::Consolidation).unwrap()
    });
    while waiting_behind(&gateways.url, &gateways.schema, HELD) == 0 {
        assert!(!same_key.is_finished(), "a write of the held key went through");
        std::thread::yield_now();
    }
    drop(release);
    assert!(matches!(holder.join().unwrap(), WriteOutcome::Created { .. }));
    let outcome = same_key.join().unwrap();
    assert!(matches!(outcome, WriteOutcome::Skipped { .. }), "the ladder saw the committed value: {outcome:?}");
    let stored = gateways.a.get_semantic("user.held").unwrap().unwrap();
    assert_eq!(stored.value, serde_json::json!("from the held transaction"));
}

/// Sessions waiting for a lock held by the session that holds the
/// semantic lock of `key`, counted until one waits or `waiter` ends.
fn waits_behind(gateways: &TwoGateways, key: &str, waiter: &std::thread::JoinHandle<Vec<String>>) -> bool {
    loop {
        if waiting_behind(&gateways.url, &gateways.schema, key) > 0 {
            return true;
        }
        if waiter.is_finished() {
            return false;
        }
        std::thread::yield_now();
    }
}

#[test]
fn a_whole_store_operation_waits_for_a_write_held_on_any_connection_of_any_gateway() {
    let Some(gateways) = two_gateways() else { return };
    // Two writes held open on gateway A take two of its connections; the
    // first is let go, so the store is held by A's second connection alone.
    let (release_first, first) = hold_write(Arc::clone(&gateways.a), "user.first");
    let (release_second, second) = hold_write(Arc::clone(&gateways.a), "user.second");
    drop(release_first);
    assert!(matches!(first.join().unwrap(), WriteOutcome::Created { .. }));
    let b = Arc::clone(&gateways.b);
    let whole_store = std::thread::spawn(move || {
        let mut keys = Vec::new();
        b.rows()
            .write("reading every fact under the store lock", |tx| {
                keys = tx.semantic_heads()?.into_iter().map(|head| head.key).collect();
                Ok(())
            })
            .unwrap();
        keys
    });
    assert!(
        waits_behind(&gateways, "user.second", &whole_store),
        "a whole-store operation went through while a write was held"
    );
    drop(release_second);
    assert!(matches!(second.join().unwrap(), WriteOutcome::Created { .. }));
    let mut keys = whole_store.join().unwrap();
    keys.sort();
    assert_eq!(keys, ["user.first", "user.second"], "it read the store once the held write committed");
}

/// Every event of `key`, oldest first: the order writers of one key
/// committed in (they hold its lock from their read to their commit).
fn events_of(db: &MemoryDb, key: &str) -> Vec<super::StoredEvent> {
    let mut events = db.rows().read("reading the audit trail", |tx| tx.newest_events(usize::MAX)).unwrap();
    events.retain(|event| event.key.as_deref() == Some(key));
    events.reverse();
    events
}

#[test]
fn racing_writers_of_one_key_end_as_their_serial_replay() {
    let Some(gateways) = two_gateways() else { return };
    const WRITES: usize = 40;
    let key = "user.status";
    let writers: Vec<_> = [(Arc::clone(&gateways.a), "a"), (Arc::clone(&gateways.b), "b")]
        .into_iter()
        .map(|(db, name)| {
            std::thread::spawn(move || {
                (0..WRITES)
                    .map(|n| {
                        // The user outranks consolidation on the ladder: a mix of updates and skips.
                        let (source, confidence) = if (n + usize::from(name == "b")) % 3 == 0 {
                            (Source::Consolidation, 0.85)
                        } else {
                            (Source::UserExplicit, 1.0)
                        };
                        let value = format!("{name}{n}");
                        let outcome = db.write_semantic(key, &serde_json::json!(value), confidence, source).unwrap();
                        (value, outcome)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let acknowledged: Vec<(String, WriteOutcome)> =
        writers.into_iter().flat_map(|writer| writer.join().unwrap()).collect();

    // Replay every attempt, in commit order, on a fresh store by itself.
    let events = events_of(&gateways.a, key);
    assert_eq!(events.len(), 2 * WRITES, "one event per acknowledged write");
    let replay = MemoryDb::open_in_memory(MemoryConfig::default()).unwrap();
    for event in &events {
        let source = match event.source.as_deref() {
            Some("user_explicit") => Source::UserExplicit,
            _ => Source::Consolidation,
        };
        let attempted = event.new_value.as_deref().unwrap();
        let outcome = replay.write_semantic_json(key, attempted, event.confidence.unwrap(), source).unwrap();
        let action = match outcome {
            WriteOutcome::Created { .. } => "created",
            WriteOutcome::Updated { .. } => "updated",
            WriteOutcome::Skipped { .. } => "conflict_skip",
            WriteOutcome::Unchanged { .. } => "unchanged",
        };
        assert_eq!(action, event.action, "replaying {attempted}");
        // Each writer was told what the replay decides.
        let value: String = serde_json::from_str(attempted).unwrap();
        let told = &acknowledged.iter().find(|(sent, _)| *sent == value).unwrap().1;
        assert_eq!(std::mem::discriminant(told), std::mem::discriminant(&outcome), "{value}");
    }
    let stored = gateways.b.get_semantic(key).unwrap().unwrap();
    let replayed = replay.get_semantic(key).unwrap().unwrap();
    assert_eq!((stored.value, stored.confidence), (replayed.value, replayed.confidence));
}

#[test]
fn racing_writers_of_one_lesson_topic_keep_one_lesson_per_topic() {
    let Some(gateways) = two_gateways() else { return };
    let topics = ["run cargo fmt before every commit", "never force-push to main", "use ripgrep to search code"];
    let writers: Vec<_> = [(Arc::clone(&gateways.a), "."), (Arc::clone(&gateways.b), "!")]
        .into_iter()
        .map(|(db, ending)| {
            std::thread::spawn(move || {
                (0..5)
                    .flat_map(|round| topics.map(|topic| (round, topic)))
                    .map(|(round, topic)| {
                        // The same rule, worded a little differently by each writer and round.
                        let rule = format!("{topic}{}", ending.repeat(round % 2 + 1));
                        db.write_lesson(&rule, None, LessonCategory::Tool, Source::UserExplicit).unwrap()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let outcomes: Vec<_> = writers.into_iter().flat_map(|writer| writer.join().unwrap()).collect();
    let lessons = gateways.a.get_lessons(100).unwrap();
    assert_eq!(lessons.len(), topics.len(), "one live lesson per topic: {lessons:?}");
    // Nothing acknowledged is lost: each written lesson is live, or a later write replaced it.
    let replaced: Vec<&str> =
        outcomes.iter().flat_map(|outcome| outcome.replaced.iter().map(|old| old.key.as_str())).collect();
    for outcome in &outcomes {
        if let WriteOutcome::Created { key } | WriteOutcome::Updated { key } = &outcome.outcome {
            let live = lessons.iter().any(|lesson| &lesson.key == key);
            assert!(live || replaced.contains(&key.as_str()), "{key} was acknowledged, then lost");
        }
    }
}

#[test]
fn racing_writers_of_near_duplicate_episodes_store_each_once() {
    let Some(gateways) = two_gateways() else { return };
    const EPISODES: usize = 15;
    let writers: Vec<_> = [(Arc::clone(&gateways.a), false), (Arc::clone(&gateways.b), true)]
        .into_iter()
        .map(|(db, second)| {
            std::thread::spawn(move || {
                (0..EPISODES)
                    .map(|n| {
                        // The second writer's text is a near duplicate of the first's (cosine above 0.88).
                        let extra = if second { format!(" w{n}f") } else { String::new() };
                        let text = format!("w{n}a w{n}b w{n}c w{n}d w{n}e{extra}");
                        db.write_episodic(&NewEpisode::new(text)).unwrap()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let outcomes: Vec<_> = writers.into_iter().flat_map(|writer| writer.join().unwrap()).collect();
    let inserted: Vec<i64> = outcomes
        .iter()
        .filter_map(|outcome| match outcome {
            EpisodicOutcome::Inserted { id, .. } => Some(*id),
            _ => None,
        })
        .collect();
    // A serial replay stores each text once and answers every second writer with the first's row.
    assert_eq!(inserted.len(), EPISODES, "{outcomes:?}");
    for outcome in &outcomes {
        match outcome {
            EpisodicOutcome::Inserted { evicted, .. } => assert!(evicted.is_empty()),
            EpisodicOutcome::Duplicate { of, .. } => assert!(inserted.contains(of), "{outcome:?}"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(gateways.b.stats().unwrap().episodic_live, EPISODES as i64);
}

#[test]
fn a_value_forgotten_on_one_gateway_is_refused_on_the_other_at_once() {
    let Some(gateways) = two_gateways() else { return };
    let (a, b) = (&gateways.a, &gateways.b);
    // B has read the (empty) forgotten items and keeps that copy.
    b.write_semantic("user.other", &serde_json::json!("warm"), 1.0, Source::UserExplicit).unwrap();
    a.write_semantic("user.color", &serde_json::json!("teal"), 1.0, Source::UserExplicit).unwrap();
    let report = a
        .forget(&crate::ForgetRequest { keys: vec!["user.color".to_owned()], ..crate::ForgetRequest::default() })
        .unwrap();
    assert_eq!(report.counts.facts, 1);

    // No notification needs to arrive first: the write reads the table's state under its lock.
    let error = b.write_semantic("user.color", &serde_json::json!("teal"), 1.0, Source::UserExplicit).unwrap_err();
    assert!(matches!(error, crate::MemoryError::Rejected(crate::Rejected::Forgotten { .. })), "{error}");
    assert_eq!(b.get_semantic("user.color").unwrap(), None);
    // Its refusal is in the audit trail, and other values still go in.
    let newest = b.audit(1).unwrap();
    assert_eq!(newest[0].action, crate::MemoryAuditAction::Rejected, "{newest:?}");
    b.write_semantic("user.color", &serde_json::json!("green"), 1.0, Source::UserExplicit).unwrap();
}

#[test]
fn a_queued_statement_the_server_refuses_fails_the_whole_transaction() {
    let Some(gateways) = two_gateways() else { return };
    let db = &gateways.a;
    db.write_semantic("user.shell", &serde_json::json!("fish"), 1.0, Source::UserExplicit).unwrap();
    let events = db.audit(1000).unwrap().len();
    // The new value and its event wait in the queue; then a row PostgreSQL
    // refuses (text with a NUL byte) is queued behind them.
    let failed = db.rows().write("a write the server refuses at commit", |tx| {
        apply_write(
            tx,
            &PreparedWrite {
                key: "user.shell",
                value_text: "\"zsh\"",
                confidence: 1.0,
                source: &Source::UserExplicit,
                category: None,
                vector: None,
                evidence: None,
            },
        )?;
        tx.record_forgotten(&crate::store::ForgottenRow {
            kind: "fact\0".to_owned(),
            scope: "global".to_owned(),
            key: None,
            fingerprint: "0".repeat(64),
            shingles: Vec::new(),
            at: 0,
        })
    });
    let error = failed.unwrap_err();
    assert!(matches!(error, crate::MemoryError::Storage { operation: "recording a forgotten item", .. }), "{error}");
    assert_eq!(db.get_semantic("user.shell").unwrap().unwrap().value, serde_json::json!("fish"));
    assert_eq!(db.audit(1000).unwrap().len(), events);
    // The connection is fit for the next transaction.
    db.write_semantic("user.shell", &serde_json::json!("nu"), 1.0, Source::UserExplicit).unwrap();
    assert_eq!(db.get_semantic("user.shell").unwrap().unwrap().value, serde_json::json!("nu"));
}
