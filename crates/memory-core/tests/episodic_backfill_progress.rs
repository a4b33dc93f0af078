//! `MemoryDb::backfill_progress`: what a running episodic backfill reports
//! while it embeds, what it leaves when done, and that a second backfill
//! started meanwhile embeds nothing.

use std::sync::Arc;

use cairn_embedder::HashEmbedder;
use cairn_memory_core::{BackfillProgress, BackfillStep, MemoryConfig, MemoryDb, NewEpisode};

fn store_with_deferred_rows(rows: usize) -> (tempfile::TempDir, MemoryDb) {
    let home = tempfile::tempdir().unwrap();
    let db = MemoryDb::open_in_home(home.path(), MemoryConfig::default())
        .unwrap()
        .with_embedder(Arc::new(HashEmbedder::new(64)));
    for index in 0..rows {
        db.write_episodic(
            &NewEpisode::new(format!("deferred row {index} about the kite festival")).defer_embedding(true),
        )
        .unwrap();
    }
    (home, db)
}

#[test]
fn a_backfill_reports_its_rows_while_it_runs_and_its_result_after() {
    let (_home, db) = store_with_deferred_rows(70);
    assert_eq!(db.backfill_progress(), BackfillProgress::default(), "nothing ran yet");
    assert_eq!(db.backfill_progress().step, BackfillStep::Idle);

    let seen = std::sync::Mutex::new(Vec::new());
    let second = std::sync::Mutex::new(None);
    let report = db
        .backfill_missing_embeddings(Some(&|done, total| {
            let progress = db.backfill_progress();
            seen.lock().unwrap().push((progress.step, progress.run, progress.done, progress.total, done, total));
            // A second backfill while this one runs leaves the rows to it.
            second.lock().unwrap().get_or_insert_with(|| db.backfill_missing_embeddings(None).unwrap());
        }))
        .unwrap();
    assert_eq!((report.embedded, report.remaining), (70, 0));
    let seen = seen.into_inner().unwrap();
    assert_eq!(
        seen,
        vec![
            (BackfillStep::Running, 1, 32, 70, 32, 70),
            (BackfillStep::Running, 1, 64, 70, 64, 70),
            (BackfillStep::Running, 1, 70, 70, 70, 70),
        ],
        "one entry per batch of 32, the status and the callback agreeing"
    );
    let second = second.into_inner().unwrap().unwrap();
    assert_eq!((second.embedded, second.remaining), (0, 38), "the running backfill owns the rows");
    assert_eq!(
        db.backfill_progress(),
        BackfillProgress { step: BackfillStep::Done, run: 1, done: 70, total: 70, remaining: 0, error: None }
    );

    // A backfill with nothing to embed leaves the last result as it was.
    assert_eq!(db.backfill_missing_embeddings(None).unwrap().embedded, 0);
    assert_eq!(db.backfill_progress().run, 1);

    // The next one with rows is run 2, counted from its own start.
    db.write_episodic(&NewEpisode::new("one more deferred row about kites").defer_embedding(true)).unwrap();
    assert_eq!(db.backfill_missing_embeddings(None).unwrap().embedded, 1);
    assert_eq!(
        db.backfill_progress(),
        BackfillProgress { step: BackfillStep::Done, run: 2, done: 1, total: 1, remaining: 0, error: None }
    );
}

#[test]
fn rows_written_while_a_backfill_runs_are_counted_in_its_total() {
    let (_home, db) = store_with_deferred_rows(40);
    let seen = std::sync::Mutex::new(Vec::new());
    let report = db
        .backfill_missing_embeddings(Some(&|done, _| {
            if done == 32 {
                for index in 0..20 {
                    db.write_episodic(
                        &NewEpisode::new(format!("late row {index} about the kite festival")).defer_embedding(true),
                    )
                    .unwrap();
                }
            }
            let progress = db.backfill_progress();
            seen.lock().unwrap().push((progress.done, progress.total));
        }))
        .unwrap();
    assert_eq!((report.embedded, report.remaining), (60, 0));
    // The 20 late rows are embedded by the same run, and its total grows to say so.
    assert_eq!(seen.into_inner().unwrap(), vec![(32, 40), (60, 60)]);
    let progress = db.backfill_progress();
    assert_eq!((progress.step, progress.done, progress.total, progress.remaining), (BackfillStep::Done, 60, 60, 0));
}
