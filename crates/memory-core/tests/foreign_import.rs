//! Foreign-agent import (Claude Code, Hermes, OpenClaw) from fixture homes
//! shaped like each source's documented layout (`tests/data/foreign/home`):
//! every entry's outcome is compared with the expected report beside it
//! (re-bless with `UPDATE_EXPECT=1`), and a second apply changes nothing.

use std::path::{Path, PathBuf};

use cairn_memory_core::{
    ForeignReport, ForeignRoots, ForeignSource, ItemOutcome, MemoryAuditAction, MemoryConfig, MemoryDb, NewEpisode,
    Source, apply_foreign, scan_foreign,
};
use expect_test::{ExpectFile, expect_file};
use serde_json::json;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/foreign/home");

/// A copy of the fixture home, plus what git cannot carry well: a
/// symlinked rules file and a symlinked daily log pointing outside.
struct Fixture {
    _dir: tempfile::TempDir,
    user_home: PathBuf,
    cairn_home: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let user_home = dir.path().join("home");
        cairn_files::copy_dir_atomic(Path::new(FIXTURE), &user_home).unwrap();
        let outside = dir.path().join("outside.md");
        std::fs::write(&outside, "- A secret plan that lives outside the workspace.\n").unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(user_home.join(".claude/CLAUDE.md"), user_home.join(".claude/rules/linked.md"))
                .unwrap();
            std::os::unix::fs::symlink(&outside, user_home.join(".openclaw/workspace/memory/2026-03-06.md")).unwrap();
        }
        let cairn_home = dir.path().join("cairn");
        Fixture { _dir: dir, user_home, cairn_home }
    }

    fn roots(&self) -> ForeignRoots {
        let mut roots = ForeignRoots::under_user_home(&self.user_home);
        roots.projects.push(self.user_home.join("src/shop"));
        roots
    }

    fn open(&self) -> MemoryDb {
        MemoryDb::open_in_home(&self.cairn_home, MemoryConfig::default()).unwrap()
    }
}

/// One line per entry and per diagnostic, paths relative to the fixture home.
fn render(report: &ForeignReport, home: &Path) -> String {
    let home = format!("{}/", home.display());
    let mut out = format!(
        "dry_run={} files_read={} counts={}\n",
        report.dry_run,
        report.files_read,
        serde_json::to_string(&report.counts).unwrap()
    );
    for item in &report.items {
        let outcome = serde_json::to_value(item.outcome).unwrap();
        let key = item.key.as_deref().map(|key| format!(" {key}")).unwrap_or_default();
        let code = item.code.as_deref().map(|code| format!(" ({code})")).unwrap_or_default();
        out.push_str(&format!(
            "{} {} [{}] -> {}{key}: {}{code} | {}\n",
            item.source.as_str(),
            item.path.replace(&home, ""),
            item.locator,
            item.lands_as,
            outcome.as_str().unwrap(),
            item.preview
        ));
    }
    for diagnostic in &report.diagnostics {
        out.push_str(&format!(
            "! {} {} {}: {}\n",
            diagnostic.source.as_str(),
            diagnostic.path.replace(&home, ""),
            diagnostic.code,
            diagnostic.message
        ));
    }
    out
}

fn check(report: &ForeignReport, home: &Path, expect: ExpectFile) {
    expect.assert_eq(&render(report, home));
}

#[test]
fn every_entry_of_the_fixture_homes_gets_its_documented_outcome() {
    let fixture = Fixture::new();
    let db = fixture.open();
    // Native memory that must win: a user-explicit fact the foreign files contradict.
    db.write_semantic("user.name", &json!("Ada Lovelace"), 1.0, Source::UserExplicit).unwrap();

    let scan = scan_foreign(&db, &fixture.roots(), &ForeignSource::ALL).unwrap();
    check(&scan, &fixture.user_home, expect_file!["data/foreign/expected_scan.txt"]);
    assert_eq!(db.stats().unwrap().episodic_live, 0, "a scan writes nothing");

    let applied = apply_foreign(&db, &fixture.roots(), &ForeignSource::ALL, None).unwrap();
    check(&applied, &fixture.user_home, expect_file!["data/foreign/expected_apply.txt"]);

    // The writers did the work: native memory kept, audit source `import`,
    // no vectors yet (embedding deferred), no Markdown files written.
    assert_eq!(db.get_semantic("user.name").unwrap().unwrap().value, json!("Ada Lovelace"));
    assert_eq!(db.get_semantic("user.timezone").unwrap().unwrap().value, json!("Europe/Berlin"));
    let stats = db.stats().unwrap();
    assert_eq!(stats.episodic_live as usize, applied.counts.episodic);
    assert!(db.list_episodic(100, 0).unwrap().iter().all(|row| !row.has_vector && row.source == "import"));
    let events = db.audit(10_000).unwrap();
    assert!(
        events
            .iter()
            .any(|event| event.action == MemoryAuditAction::InjectionBlocked
                && event.source.as_deref() == Some("import"))
    );
    assert!(!events.iter().any(|event| event.action == MemoryAuditAction::Deleted), "an import never deletes");
    assert!(!fixture.cairn_home.join("memory/preferences.md").exists());
    assert!(!fixture.cairn_home.join("memory/projects.md").exists());
    let audit_text = serde_json::to_string(&events).unwrap();
    assert!(!audit_text.contains("ghp_A1b2C3d4"), "a credential never reaches the audit trail");
    assert!(!audit_text.contains("must never be read"), "transcripts are never read");

    // The daily log's day (and heading time) is the row's creation time.
    let rows = db.list_episodic(100, 0).unwrap();
    let coupon = rows.iter().find(|row| row.text.starts_with("Shipped the new coupon parser")).unwrap();
    assert_eq!(coupon.created_at, 1_772_615_700_000); // 2026-03-04T09:15:00Z

    // A second apply changes nothing.
    let events_before = db.audit(10_000).unwrap().len();
    let again = apply_foreign(&db, &fixture.roots(), &ForeignSource::ALL, None).unwrap();
    assert_eq!((again.counts.lessons, again.counts.semantic, again.counts.episodic), (0, 0, 0));
    assert_eq!(again.counts.exists + again.counts.refused + again.counts.store_full + again.counts.lesson_cap, 0);
    assert_eq!(
        again.counts.already_imported,
        applied.counts.lessons
            + applied.counts.semantic
            + applied.counts.episodic
            + applied.counts.exists
            + applied.counts.refused
    );
    assert_eq!(db.audit(10_000).unwrap().len(), events_before, "nothing new in the audit trail");
    assert_eq!(db.stats().unwrap(), stats);
}

#[test]
fn only_the_chosen_sources_are_read() {
    let fixture = Fixture::new();
    let db = fixture.open();
    let report = scan_foreign(&db, &fixture.roots(), &[ForeignSource::Hermes]).unwrap();
    assert!(report.items.iter().all(|item| item.source == ForeignSource::Hermes));
    assert_eq!(report.sources, vec![ForeignSource::Hermes]);
    assert!("claude".parse::<ForeignSource>().is_err());
    assert_eq!("openclaw".parse::<ForeignSource>().unwrap(), ForeignSource::Openclaw);
}

#[test]
fn hermes_scans_at_most_fifty_profiles_and_reports_the_overflow() {
    let dir = tempfile::tempdir().unwrap();
    let hermes = dir.path().join(".hermes");
    for index in 0..51 {
        let memories = hermes.join(format!("profiles/p{index:02}/memories"));
        std::fs::create_dir_all(&memories).unwrap();
        std::fs::write(memories.join("MEMORY.md"), format!("Profile number {index:02} keeps this note.\n")).unwrap();
    }
    let db = MemoryDb::open_in_home(&dir.path().join("cairn"), MemoryConfig::default()).unwrap();
    let roots = ForeignRoots { hermes_home: Some(hermes), ..ForeignRoots::default() };
    let report = scan_foreign(&db, &roots, &[ForeignSource::Hermes]).unwrap();
    assert_eq!(report.items.len(), 50);
    let codes: Vec<&str> = report.diagnostics.iter().map(|diagnostic| diagnostic.code.as_str()).collect();
    assert_eq!(codes, vec!["profiles/profile_count_limit"]);
}

#[test]
fn an_unreadable_profiles_directory_is_a_diagnostic_not_an_abort() {
    let dir = tempfile::tempdir().unwrap();
    let hermes = dir.path().join(".hermes");
    std::fs::create_dir_all(hermes.join("memories")).unwrap();
    std::fs::write(hermes.join("memories/MEMORY.md"), "The main home still imports.\n").unwrap();
    std::fs::write(hermes.join("profiles"), "not a directory").unwrap();
    let db = MemoryDb::open_in_home(&dir.path().join("cairn"), MemoryConfig::default()).unwrap();
    let roots = ForeignRoots { hermes_home: Some(hermes), ..ForeignRoots::default() };
    let report = apply_foreign(&db, &roots, &[ForeignSource::Hermes], None).unwrap();
    assert_eq!(report.counts.episodic, 1);
    assert_eq!(report.diagnostics.len(), 1);
    assert_eq!(report.diagnostics[0].code, "profiles/read_failed");
}

#[test]
fn foreign_imports_add_at_most_fifty_lessons_ever() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    // Rules that share no topic (nor text once digits are normalised away),
    // so the lesson writer's dedup keeps them apart.
    let tag = |index: u8| format!("{}{}", char::from(b'a' + index / 26), char::from(b'a' + index % 26));
    let rules: String =
        (0..60u8).map(|index| format!("- Keep alpha{0} bravo{0} charlie{0} delta{0}.\n", tag(index))).collect();
    std::fs::write(project.join("CLAUDE.md"), rules).unwrap();
    let db = MemoryDb::open_in_home(&dir.path().join("cairn"), MemoryConfig::default()).unwrap();
    let roots = ForeignRoots { projects: vec![project.clone()], ..ForeignRoots::default() };

    let scan = scan_foreign(&db, &roots, &[ForeignSource::ClaudeCode]).unwrap();
    assert_eq!((scan.counts.lessons, scan.counts.lesson_cap), (50, 10));
    let first = apply_foreign(&db, &roots, &[ForeignSource::ClaudeCode], None).unwrap();
    // The writer's own dedup may find a few of them the same topic; the rest wait.
    assert_eq!(first.counts.lessons, 50);
    assert_eq!(first.counts.lesson_cap + first.counts.exists, 10, "{:?}", first.counts);
    assert_eq!(db.get_lessons(1_000).unwrap().len(), 50);
    let second = apply_foreign(&db, &roots, &[ForeignSource::ClaudeCode], None).unwrap();
    assert_eq!(second.counts.lessons, 0);
    assert_eq!(second.counts.lesson_cap, first.counts.lesson_cap);
    assert_eq!(second.counts.already_imported, 50 + first.counts.exists);
    // Another source's lessons meet the same ceiling.
    std::fs::write(project.join("AGENTS.md"), "Always write the changelog entry first.\n").unwrap();
    let third = apply_foreign(&db, &roots, &[ForeignSource::ClaudeCode], None).unwrap();
    assert_eq!(third.counts.lessons, 0);
    assert_eq!(db.get_lessons(1_000).unwrap().len(), 50);
}

#[test]
fn a_scan_refuses_every_entry_the_apply_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(workspace.join("memory")).unwrap();
    // Thirty zero-width spaces and two letters: two visible characters.
    let invisible = format!("- {}ok\n", "\u{200b}".repeat(30));
    std::fs::write(
        workspace.join("memory/2026-01-02.md"),
        format!("- The release train leaves on Thursdays.\n{invisible}"),
    )
    .unwrap();
    let db = MemoryDb::open_in_home(&dir.path().join("cairn"), MemoryConfig::default()).unwrap();
    let roots = ForeignRoots { openclaw_workspace: Some(workspace), ..ForeignRoots::default() };
    let outcomes =
        |report: &ForeignReport| report.items.iter().map(|item| (item.outcome, item.code.clone())).collect::<Vec<_>>();
    let expected = [(ItemOutcome::Offered, None), (ItemOutcome::Refused, Some("text_length".to_owned()))];
    let scan = scan_foreign(&db, &roots, &[ForeignSource::Openclaw]).unwrap();
    assert_eq!(outcomes(&scan), expected, "{scan:#?}");
    let applied = apply_foreign(&db, &roots, &[ForeignSource::Openclaw], None).unwrap();
    assert_eq!(outcomes(&applied)[1], expected[1], "{applied:#?}");
    assert_eq!(applied.items[0].outcome, ItemOutcome::Written);
}

#[test]
fn a_full_store_refuses_imports_without_evicting_and_they_wait_for_room() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(workspace.join("memory")).unwrap();
    std::fs::write(workspace.join("memory/2026-01-02.md"), "- An imported day entry waiting for room.\n").unwrap();
    let config = MemoryConfig { episodic_cap: 2, ..MemoryConfig::default() };
    let db = MemoryDb::open_in_home(&dir.path().join("cairn"), config).unwrap();
    for text in ["Native row one, never evicted.", "Native row two, never evicted."] {
        db.write_episodic(&NewEpisode::new(text).source(Source::UserExplicit)).unwrap();
    }
    let roots = ForeignRoots { openclaw_workspace: Some(workspace), ..ForeignRoots::default() };
    let report = apply_foreign(&db, &roots, &[ForeignSource::Openclaw], None).unwrap();
    assert_eq!(report.items[0].outcome, ItemOutcome::StoreFull);
    assert_eq!(db.stats().unwrap().episodic_live, 2);
    db.delete_episodic(db.list_episodic(1, 0).unwrap()[0].id).unwrap();
    let report = apply_foreign(&db, &roots, &[ForeignSource::Openclaw], None).unwrap();
    assert_eq!(report.items[0].outcome, ItemOutcome::Written, "a full store is not recorded in the ledger");
}

#[test]
fn progress_is_reported_per_entry() {
    let fixture = Fixture::new();
    let db = fixture.open();
    let calls = std::cell::RefCell::new(Vec::new());
    let progress = |done: usize, total: usize| calls.borrow_mut().push((done, total));
    let report = apply_foreign(&db, &fixture.roots(), &[ForeignSource::Openclaw], Some(&progress)).unwrap();
    let calls = calls.into_inner();
    assert_eq!(calls.len(), report.items.len());
    assert_eq!(calls.last(), Some(&(report.items.len(), report.items.len())));
}
