//! SkillCatalog: roots and precedence, CRUD with its refusals, path safety, the
//! file-list cache, builtin seeding, listing, concurrency.

mod common;

use std::sync::Arc;

use cairn_skills::{SkillSource, SkillsError, constants::ITER_CACHE_TTL_MS};
use common::{Fixture, put, skill};

#[test]
fn project_wins_then_home_then_builtin_then_extra_and_nested_names_are_paths() {
    let project = tempfile::tempdir().unwrap();
    let builtin = tempfile::tempdir().unwrap();
    let extra = tempfile::tempdir().unwrap();
    let fixture = Fixture::with(|config| {
        config.project_dir = Some(project.path().to_path_buf());
        config.builtin_dir = Some(builtin.path().to_path_buf());
        config.extra_paths = vec![extra.path().to_path_buf()];
    });
    put(&project.path().join("skills"), "shared", &skill("shared", "from project", "", "P"));
    fixture.put("shared", &skill("shared", "from home", "", "H"));
    fixture.put("utils/tiny-url", &skill("tiny-url", "shortens", "", "T"));
    put(builtin.path(), "bundled", &skill("bundled", "from builtin", "", "B"));
    put(extra.path(), "bundled", &skill("bundled", "from extra", "", "E"));
    put(extra.path(), "outside", &skill("outside", "extra only", "", "X"));
    fixture.catalog.invalidate();

    let rows = fixture.catalog.list_skills();
    let view: Vec<(&str, &str, SkillSource, bool)> =
        rows.iter().map(|row| (row.name.as_str(), row.description.as_str(), row.source, row.owned)).collect();
    assert_eq!(
        view,
        [
            ("bundled", "from builtin", SkillSource::Builtin, false),
            ("outside", "extra only", SkillSource::Extra, false),
            ("shared", "from project", SkillSource::Project, false),
            ("utils/tiny-url", "shortens", SkillSource::Home, true),
        ]
    );
}

#[test]
fn broken_or_missing_frontmatter_loads_with_a_warning() {
    let fixture = Fixture::new();
    fixture.put("plain", "# Just markdown\n");
    fixture.put("broken", "---\nname: [x\n---\nbody\n");
    fixture.put("unclosed", "---\nname: x\n");
    let rows = fixture.catalog.list_skills();
    assert_eq!(rows.len(), 3);
    for row in &rows {
        assert!(row.warning.is_some(), "{} has no warning", row.name);
    }
    assert_eq!(fixture.catalog.get("plain").unwrap().body(), "# Just markdown\n");
}

#[test]
fn create_sanitises_writes_atomically_and_invalidates_the_cache() {
    let fixture = Fixture::new();
    assert!(fixture.catalog.list_skills().is_empty());
    let name = fixture.catalog.create("Utils/Tiny URL", &skill("tiny-url", "short links", "", "Body")).unwrap();
    assert_eq!(name, "utils/tiny-url");
    assert!(fixture.skills_dir().join("utils/tiny-url/SKILL.md").is_file());
    assert_eq!(fixture.catalog.list_skills().len(), 1, "the cache was not invalidated by the write");
    let leftovers: Vec<_> = std::fs::read_dir(fixture.skills_dir().join("utils"))
        .unwrap()
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(".cairn"))
        .collect();
    assert!(leftovers.is_empty(), "staging files left behind");
}

#[test]
fn create_refusals_leave_nothing_behind() {
    let fixture = Fixture::new();
    fixture.catalog.create("a", &skill("a", "d", "", "x")).unwrap();
    type Expect = fn(&SkillsError) -> bool;
    let cases: Vec<(&str, String, Expect)> = vec![
        ("a", skill("a", "d", "", "y"), |e| matches!(e, SkillsError::AlreadyExists { .. })),
        ("!!!", skill("x", "d", "", "y"), |e| matches!(e, SkillsError::InvalidName { .. })),
        ("big", "x".repeat(300 * 1024), |e| matches!(e, SkillsError::TooLarge { .. })),
        ("secret", skill("s", "d", "", "token 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"), |e| {
            matches!(e, SkillsError::Credentials { .. })
        }),
        ("bad-yaml", "---\nname: [x\n---\nbody".to_owned(), |e| matches!(e, SkillsError::MalformedFrontmatter { .. })),
        ("unclosed", "---\nname: x\n".to_owned(), |e| matches!(e, SkillsError::MalformedFrontmatter { .. })),
    ];
    for (name, content, expected) in cases {
        let error = fixture.catalog.create(name, &content).unwrap_err();
        assert!(expected(&error), "{name}: unexpected {error:?}");
    }
    assert_eq!(std::fs::read_to_string(fixture.skills_dir().join("a/SKILL.md")).unwrap(), skill("a", "d", "", "x"));
    let names: Vec<String> = std::fs::read_dir(fixture.skills_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["a"]);
}

#[test]
fn update_and_delete() {
    let fixture = Fixture::new();
    fixture.catalog.create("a", &skill("a", "one", "", "x")).unwrap();
    std::fs::create_dir_all(fixture.skills_dir().join("a/scripts")).unwrap();
    std::fs::write(fixture.skills_dir().join("a/scripts/run.sh"), "echo hi").unwrap();
    fixture.catalog.update("a", &skill("a", "two", "", "y")).unwrap();
    assert_eq!(fixture.catalog.get("a").unwrap().description(), "two");
    let error = fixture.catalog.update("a", "---\nname: [\n---\n").unwrap_err();
    assert!(matches!(error, SkillsError::MalformedFrontmatter { .. }));
    assert_eq!(fixture.catalog.get("a").unwrap().description(), "two", "a refused update changed the skill");
    assert!(matches!(fixture.catalog.update("nope", "x"), Err(SkillsError::NotFound { .. })));
    fixture.catalog.delete("a").unwrap();
    assert!(!fixture.skills_dir().join("a").exists());
    assert!(fixture.catalog.get("a").is_none());
    assert!(matches!(fixture.catalog.delete("a"), Err(SkillsError::NotFound { .. })));
}

#[test]
fn traversal_names_are_refused_everywhere() {
    let fixture = Fixture::new();
    let outside = fixture.home.path().join("victim");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("SKILL.md"), "keep").unwrap();
    for name in ["../victim", "a/../../victim", "/etc", "a\\..\\b", "", "./a"] {
        assert!(matches!(fixture.catalog.delete(name), Err(SkillsError::InvalidName { .. })), "delete {name:?}");
        assert!(matches!(fixture.catalog.update(name, "x"), Err(SkillsError::InvalidName { .. })), "update {name:?}");
        assert!(
            matches!(fixture.catalog.set_inject_on_trigger(name, false), Err(SkillsError::InvalidName { .. })),
            "set {name:?}"
        );
    }
    assert_eq!(std::fs::read_to_string(outside.join("SKILL.md")).unwrap(), "keep");
}

#[cfg(unix)]
#[test]
fn symlinked_owned_root_is_refused() {
    let fixture = Fixture::new();
    let elsewhere = tempfile::tempdir().unwrap();
    put(elsewhere.path(), "a", &skill("a", "d", "", "x"));
    std::os::unix::fs::symlink(elsewhere.path(), fixture.skills_dir()).unwrap();
    fixture.catalog.invalidate();
    assert!(matches!(fixture.catalog.create("b", "x"), Err(SkillsError::Symlink { .. })));
    assert!(matches!(fixture.catalog.delete("a"), Err(SkillsError::Symlink { .. })));
    assert!(matches!(fixture.catalog.set_inject_on_trigger("a", false), Err(SkillsError::Symlink { .. })));
    assert!(elsewhere.path().join("a/SKILL.md").is_file());
    assert!(!elsewhere.path().join("b").exists());
}

#[cfg(unix)]
#[test]
fn skill_files_resolving_outside_the_owned_directory_are_refused() {
    let fixture = Fixture::new();
    let elsewhere = tempfile::tempdir().unwrap();
    let foreign = put(elsewhere.path(), "foreign", &skill("foreign", "d", "", "x"));
    let original = std::fs::read_to_string(&foreign).unwrap();

    // A skill directory that is a link to a foreign directory.
    std::fs::create_dir_all(fixture.skills_dir()).unwrap();
    std::os::unix::fs::symlink(elsewhere.path().join("foreign"), fixture.skills_dir().join("linked")).unwrap();
    // A real directory whose SKILL.md is a link to a foreign file.
    std::fs::create_dir_all(fixture.skills_dir().join("filelink")).unwrap();
    std::os::unix::fs::symlink(&foreign, fixture.skills_dir().join("filelink/SKILL.md")).unwrap();
    // A nested name whose parent is a link.
    std::os::unix::fs::symlink(elsewhere.path(), fixture.skills_dir().join("parent")).unwrap();
    fixture.catalog.invalidate();

    // Neither is a skill of this root: both resolve outside it.
    let listed: Vec<String> = fixture.catalog.list_skills().into_iter().map(|row| row.name).collect();
    assert!(!listed.contains(&"linked".to_owned()) && !listed.contains(&"filelink".to_owned()), "{listed:?}");
    assert!(fixture.catalog.get("linked").is_none() && fixture.catalog.get("filelink").is_none());

    assert!(matches!(fixture.catalog.set_inject_on_trigger("linked", false), Err(SkillsError::NotFound { .. })));
    assert!(matches!(fixture.catalog.delete("linked"), Err(SkillsError::Symlink { .. })));
    assert!(matches!(fixture.catalog.set_inject_on_trigger("filelink", false), Err(SkillsError::NotFound { .. })));
    assert!(fixture.catalog.update("filelink", "x").is_err());
    assert!(matches!(fixture.catalog.create("parent/new", "x"), Err(SkillsError::Symlink { .. })));
    assert_eq!(std::fs::read_to_string(&foreign).unwrap(), original);
    assert!(!elsewhere.path().join("new").exists());
}

#[test]
fn skills_from_other_roots_are_not_editable() {
    let project = tempfile::tempdir().unwrap();
    let fixture = Fixture::with(|config| config.project_dir = Some(project.path().to_path_buf()));
    let path = put(&project.path().join("skills"), "p", &skill("p", "d", "", "x"));
    // Same name in the home, shadowed by the project copy.
    fixture.put("p", &skill("p", "home", "", "y"));
    assert!(matches!(fixture.catalog.set_inject_on_trigger("p", false), Err(SkillsError::NotOwned { .. })));
    assert_eq!(std::fs::read_to_string(path).unwrap(), skill("p", "d", "", "x"));
}

#[test]
fn file_list_is_cached_for_the_ttl() {
    let fixture = Fixture::new();
    fixture.put("a", &skill("a", "d", "", "x"));
    assert_eq!(fixture.catalog.list_skills().len(), 1);
    common::put(&fixture.skills_dir(), "b", &skill("b", "d", "", "x"));
    assert_eq!(fixture.catalog.list_skills().len(), 1, "an external change shows only after the TTL");
    fixture.clock.advance_millis(ITER_CACHE_TTL_MS);
    assert_eq!(fixture.catalog.list_skills().len(), 2);
}

#[test]
fn builtins_are_copied_once_without_overwriting_edits() {
    let builtin = tempfile::tempdir().unwrap();
    put(builtin.path(), "helper", &skill("helper", "bundled", "", "v1"));
    std::fs::create_dir_all(builtin.path().join("helper/scripts")).unwrap();
    std::fs::write(builtin.path().join("helper/scripts/run.py"), "print(1)").unwrap();
    put(builtin.path(), "kept", &skill("kept", "bundled", "", "v1"));
    let fixture = Fixture::with(|config| config.builtin_dir = Some(builtin.path().to_path_buf()));
    fixture.put("kept", &skill("kept", "user edit", "", "mine"));

    let report = fixture.catalog.seed_builtins().unwrap();
    assert_eq!(report.copied, ["helper"]);
    assert_eq!(report.skipped, ["kept"]);
    assert_eq!(std::fs::read_to_string(fixture.skills_dir().join("helper/scripts/run.py")).unwrap(), "print(1)");
    assert_eq!(fixture.catalog.get("kept").unwrap().description(), "user edit");
    assert_eq!(fixture.catalog.get("helper").unwrap().source, SkillSource::Home);

    // The user deletes the copy: the next seeding does not bring it back,
    // and the bundle does not resurface it in listings.
    fixture.catalog.delete("helper").unwrap();
    let again = fixture.catalog.seed_builtins().unwrap();
    assert!(again.copied.is_empty());
    assert!(fixture.catalog.get("helper").is_none());
}

#[test]
fn deliveries_are_none_until_tracked() {
    let fixture = Fixture::new();
    fixture.put("a", &skill("a", "d", "triggers: alpha\n", "x"));
    fixture.put("b", &skill("b", "d", "triggers: beta\ninject_on_trigger: false\n", "x"));
    let matched = fixture.catalog.match_message("alpha beta");
    let rows = fixture.catalog.list_skills();
    assert_eq!(rows[0].deliveries, Some(0), "matched, but not yet reported as reaching a prompt");
    fixture.catalog.record_delivered(matched.bodies.iter().map(|body| body.name.as_str()));
    let rows = fixture.catalog.list_skills();
    assert_eq!(rows[0].deliveries, Some(1));
    assert_eq!(rows[1].deliveries, Some(0), "a pointer-only match is tracked but delivers nothing");
    assert!(!rows[1].inject_on_trigger);
    assert_eq!(rows[0].size_bytes, std::fs::metadata(&rows[0].path).unwrap().len());
}

#[test]
fn many_threads_matching_listing_and_writing_keep_the_catalog_consistent() {
    let fixture = Arc::new(Fixture::new());
    for index in 0..20 {
        fixture.put(&format!("base-{index}"), &skill(&format!("base-{index}"), "d", "triggers: shared\n", "x"));
    }
    let threads: Vec<_> = (0..8)
        .map(|thread| {
            let fixture = fixture.clone();
            std::thread::spawn(move || {
                for round in 0..25 {
                    if thread % 2 == 0 {
                        let name = format!("t{thread}-{round}");
                        fixture.catalog.create(&name, &skill(&name, "d", "triggers: private\n", "x")).unwrap();
                        if round % 3 == 0 {
                            fixture.catalog.set_inject_on_trigger(&name, false).unwrap();
                        }
                    } else {
                        let found = fixture.catalog.match_message("shared");
                        assert_eq!(found.bodies.len(), 3);
                        assert!(fixture.catalog.list_skills().len() >= 20);
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let rows = fixture.catalog.list_skills();
    assert_eq!(rows.len(), 20 + 4 * 25);
    let pointers = rows.iter().filter(|row| !row.inject_on_trigger).count();
    assert_eq!(pointers, 4 * 9);
    let hits: u64 = (0..20).filter_map(|i| fixture.catalog.ledger().get(&format!("base-{i}"))).map(|e| e.hits).sum();
    assert_eq!(hits, 4 * 25 * 3, "every match was counted exactly once");
}
