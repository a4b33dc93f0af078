//! Scopes and forgetting through the store's API, on every backend: what a
//! project reads, what a forget removes and counts, and that the forgotten
//! stays forgotten whichever write path brings it back.

use serde_json::json;

use crate::store::db_tests::{fresh_schema, postgres_url};
use crate::{
    ForgetRequest, MemoryConfig, MemoryDb, MemoryError, MemoryFiles, NewEpisode, Rejected, Scope, ScopeFilter, Source,
    export_memory,
};

fn stores() -> Vec<(&'static str, MemoryDb, tempfile::TempDir)> {
    let mut stores = Vec::new();
    let dir = tempfile::tempdir().unwrap();
    stores.push(("memory", MemoryDb::open_in_memory(MemoryConfig::default()).unwrap(), dir));
    let dir = tempfile::tempdir().unwrap();
    stores.push(("sqlite", MemoryDb::open_in_home(dir.path(), MemoryConfig::default()).unwrap(), dir));
    if let Some(url) = postgres_url() {
        let dir = tempfile::tempdir().unwrap();
        let db = MemoryDb::open_postgres_schema(&url, &fresh_schema(), dir.path(), MemoryConfig::default()).unwrap();
        stores.push(("postgres", db, dir));
    }
    stores
}

fn project(name: &str) -> Scope {
    Scope::Project(format!("{name}-00000000"))
}

fn episode(db: &MemoryDb, text: &str, scope: &Scope) -> i64 {
    let outcome = db.write_episodic(&NewEpisode::new(text).source(Source::UserExplicit).scope(scope.clone())).unwrap();
    match outcome {
        crate::EpisodicOutcome::Inserted { id, .. } => id,
        other => panic!("{text}: {other:?}"),
    }
}

fn found(db: &MemoryDb, query: &str, scopes: ScopeFilter) -> Vec<String> {
    let hits = db.search_episodic(&crate::EpisodicQuery::new(query).limit(20).scopes(scopes)).unwrap();
    let mut texts: Vec<String> = hits.into_iter().map(|hit| hit.text).collect();
    texts.sort();
    texts
}

#[test]
fn a_project_reads_its_rows_and_the_global_ones_only() {
    let (a, b) = (project("alpha"), project("beta"));
    for (name, db, _dir) in stores() {
        episode(&db, "deploy notes: the alpha service deploys with make ship", &a);
        episode(&db, "deploy notes: the beta service deploys with cargo dist", &b);
        episode(&db, "deploy notes: the user prefers deploys on Tuesdays", &Scope::Global);
        for (fact_scope, value) in [(&a, "make ship"), (&b, "cargo dist")] {
            db.write_semantic_in(fact_scope, "project.deploy_cmd", &json!(value), 1.0, Source::UserExplicit).unwrap();
        }
        db.write_semantic("pref.deploy_day", &json!("Tuesday deploys"), 1.0, Source::UserExplicit).unwrap();

        let from_a = ScopeFilter::visible_from(Some(&a));
        assert_eq!(
            found(&db, "deploy notes", from_a.clone()),
            [
                "deploy notes: the alpha service deploys with make ship",
                "deploy notes: the user prefers deploys on Tuesdays"
            ],
            "{name}"
        );
        assert_eq!(found(&db, "deploy notes", ScopeFilter::All).len(), 3, "{name}");
        assert_eq!(found(&db, "deploy notes", ScopeFilter::Visible(None)).len(), 1, "{name}");

        let fact = db.find_semantic(&from_a, "project.deploy_cmd").unwrap().unwrap();
        assert_eq!((fact.value, fact.scope), (json!("make ship"), a.clone()), "{name}");
        let block = db.semantic_context_in("deploy", 2_000, &from_a).unwrap();
        assert!(block.contains("project.deploy_cmd: make ship"), "{name}: {block}");
        assert!(!block.contains("cargo dist"), "{name}: {block}");
        assert!(block.contains("Tuesday deploys"), "{name}: {block}");
        let hits = db.search_semantic_in("deploy", 10, &ScopeFilter::visible_from(Some(&b))).unwrap();
        assert!(hits.iter().all(|hit| hit.scope != a), "{name}: {hits:?}");
        assert_eq!(db.list_semantic_in("project.", &ScopeFilter::All).unwrap().len(), 2, "{name}");
    }
}

#[test]
fn an_invalid_scope_is_refused_and_nothing_is_written() {
    for (name, db, _dir) in stores() {
        let error = db
            .write_semantic_in(&Scope::Project("x@y".into()), "project.a", &json!(1), 1.0, Source::UserExplicit)
            .unwrap_err();
        assert!(matches!(error, MemoryError::Rejected(Rejected::InvalidScope(_))), "{name}: {error}");
        assert!(db.list_semantic("").unwrap().is_empty(), "{name}");
    }
}

#[test]
fn a_forget_removes_what_its_dry_run_listed_and_the_forgotten_stays_forgotten() {
    let secret = "The staging database lives on host orca-7 behind the office VPN";
    for (name, db, dir) in stores() {
        let a = project("alpha");
        let kept = episode(&db, "The production database is managed by the platform team", &a);
        episode(&db, secret, &a);
        db.write_semantic_in(&a, "project.staging_host", &json!(secret), 1.0, Source::UserExplicit).unwrap();
        db.append_transcript_in(&a, "chat:1", &[crate::TranscriptMessage::new("user", secret)], 1_000).unwrap();
        db.append_transcript_in(&a, "chat:1", &[crate::TranscriptMessage::new("user", "unrelated")], 1_001).unwrap();

        let request = ForgetRequest { query: Some("orca-7 behind the office".into()), ..ForgetRequest::default() };
        let preview = db.forget(&ForgetRequest { dry_run: true, ..request.clone() }).unwrap();
        assert_eq!(
            (preview.counts.episodic, preview.counts.facts, preview.counts.transcripts),
            (1, 1, 1),
            "{name}: {preview:?}"
        );
        assert_eq!(db.list_semantic("").unwrap().len(), 1, "{name}: a dry run changes nothing");
        let done = db.forget(&request).unwrap();
        assert_eq!(done.counts, preview.counts, "{name}");
        assert_eq!(done.items, preview.items, "{name}");
        assert!(found(&db, "orca-7 staging", ScopeFilter::All).is_empty(), "{name}");
        assert!(db.get_episodic(kept).unwrap().is_some(), "{name}");
        assert_eq!(db.transcript("chat:1").unwrap().len(), 1, "{name}");

        // Every write path refuses it back, in any scope, and says so.
        let again = db.write_episodic(&NewEpisode::new(secret).source(Source::UserExplicit)).unwrap_err();
        assert!(matches!(again, MemoryError::Rejected(Rejected::Forgotten { .. })), "{name}: {again}");
        let longer = format!("Reminder: {secret}, as discussed.");
        let again = db.write_semantic("pref.note", &json!(longer), 1.0, Source::UserExplicit).unwrap_err();
        assert!(matches!(again, MemoryError::Rejected(Rejected::Forgotten { .. })), "{name}: {again}");
        let again = db.write_lesson(secret, None, crate::LessonCategory::Knowledge, Source::UserExplicit).unwrap_err();
        assert!(matches!(again, MemoryError::Rejected(Rejected::Forgotten { .. })), "{name}: {again}");
        // What is merely near it is not refused.
        episode(&db, "The staging database moved to a new host last week", &a);

        let files = MemoryFiles::open(dir.path()).unwrap();
        let document = export_memory(&db, &files).unwrap();
        let text = serde_json::to_string(&document).unwrap();
        assert!(!text.contains("orca-7"), "{name}: the export holds no forgotten text");
    }
}

#[test]
fn a_forget_that_selects_nothing_is_refused() {
    for (name, db, _dir) in stores() {
        episode(&db, "a row that must survive an empty forget", &Scope::Global);
        let error = db.forget(&ForgetRequest::default()).unwrap_err();
        assert!(matches!(error, MemoryError::Rejected(Rejected::NothingSelected)), "{name}: {error}");
        assert_eq!(db.list_episodic(10, 0).unwrap().len(), 1, "{name}");
    }
}

#[test]
fn forgetting_a_project_leaves_the_others_and_global() {
    for (name, db, _dir) in stores() {
        let (a, b) = (project("alpha"), project("beta"));
        episode(&db, "alpha uses postgres sixteen for its tests", &a);
        episode(&db, "beta uses sqlite for its tests and nothing else", &b);
        episode(&db, "the user writes tests before code", &Scope::Global);
        let report =
            db.forget(&ForgetRequest { scopes: ScopeFilter::Only(a.clone()), ..ForgetRequest::default() }).unwrap();
        assert_eq!(report.counts.episodic, 1, "{name}");
        let left: Vec<Scope> = db.list_episodic(10, 0).unwrap().into_iter().map(|row| row.scope).collect();
        assert!(left.contains(&b) && left.contains(&Scope::Global) && !left.contains(&a), "{name}: {left:?}");
    }
}

#[test]
fn other_projects_rows_do_not_crowd_a_projects_row_out_of_its_context() {
    let (a, b) = (project("alpha"), project("beta"));
    for (name, db, _dir) in stores() {
        for index in 0..12 {
            episode(
                &db,
                &format!("release checklist step {index}: tag the beta release and publish the beta notes"),
                &b,
            );
        }
        // Three of the query's five words: admitted by keyword only when it ranks among the top three.
        episode(&db, "the alpha release checklist says to tag it from the main branch only", &a);
        let query = crate::EpisodicQuery::new("release checklist tag publish notes")
            .limit(8)
            .relevance_filter(true)
            .scopes(ScopeFilter::visible_from(Some(&a)));
        let hits = db.search_episodic(&query).unwrap();
        let texts: Vec<&str> = hits.iter().map(|hit| hit.text.as_str()).collect();
        assert_eq!(texts, ["the alpha release checklist says to tag it from the main branch only"], "{name}");
    }
}

#[test]
fn a_projects_history_entries_are_shown_to_that_project_and_forgotten_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let files = MemoryFiles::open(dir.path()).unwrap();
    let (a, b) = (project("alpha"), project("beta"));
    files.append_history_in(&a, "Alpha moved its staging cluster to the new rack").unwrap();
    files.append_history_in(&b, "Beta rewrote its billing export").unwrap();
    files.append_history("The user switched editors").unwrap();
    let seen = |scopes: ScopeFilter| files.recent_history_in(14, &scopes).unwrap().text.clone();
    let from_a = seen(ScopeFilter::visible_from(Some(&a)));
    assert!(from_a.contains("Alpha moved") && from_a.contains("switched editors"), "{from_a}");
    assert!(!from_a.contains("Beta rewrote") && !from_a.contains("cairn-scope"), "{from_a}");
    assert!(!seen(ScopeFilter::Visible(None)).contains("Alpha moved"));
    assert!(seen(ScopeFilter::All).contains("Beta rewrote"));

    let dropped = files.forget_history(None, None, None, &ScopeFilter::Only(a.clone()), false).unwrap();
    assert_eq!(dropped.len(), 1, "{dropped:?}");
    assert_eq!(dropped[0].1, a.as_str());
    let left = seen(ScopeFilter::All);
    assert!(
        !left.contains("Alpha moved") && left.contains("Beta rewrote") && left.contains("switched editors"),
        "{left}"
    );
}
