//! Discovery fixtures under `test_data/discovery/<case>/` (a `user/`
//! directory, an optional `project/`, optional `pins.json`, and `queries`)
//! against `<case>.expect`; and the metadata-keyed cache.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use cairn_guard::SensitivePaths;
use expect_test::expect_file;

use super::{scrub, test_data};
use crate::{AgentCatalog, AgentDirs, CatalogCache, Pins};

fn render(case: &Path) -> String {
    let mut dirs = AgentDirs::user(case.join("user"));
    if case.join("project").is_dir() {
        dirs = dirs.with_project(case.join("project"));
    }
    let pins: Pins = std::fs::read_to_string(case.join("pins.json"))
        .map(|text| serde_json::from_str(&text).unwrap())
        .unwrap_or_default();
    let catalog = AgentCatalog::load(&dirs, &SensitivePaths::default()).unwrap();
    let mut out = String::new();
    for note in catalog.notes() {
        writeln!(out, "note: {note}").unwrap();
    }
    for (path, error) in catalog.unreadable() {
        writeln!(out, "unreadable: {}: {error}", path.display()).unwrap();
    }
    for entry in catalog.list(&pins) {
        writeln!(out, "list: {}", serde_json::to_string(&entry).unwrap()).unwrap();
    }
    let queries = std::fs::read_to_string(case.join("queries")).unwrap();
    for name in queries.lines().filter(|line| !line.is_empty()) {
        match catalog.resolve(name, &pins) {
            Ok(resolved) => {
                writeln!(out, "resolve {name}: {} ({:?})", resolved.path.display(), resolved.scope).unwrap();
                for warning in &resolved.warnings {
                    writeln!(out, "  warning: {warning}").unwrap();
                }
            }
            Err(error) => writeln!(out, "resolve {name}: error: {error}").unwrap(),
        }
    }
    scrub(&out, case, "<case>")
}

#[test]
fn every_discovery_fixture_matches_its_expectation() {
    let root = test_data("discovery");
    let mut cases: Vec<_> =
        std::fs::read_dir(&root).unwrap().map(|entry| entry.unwrap().path()).filter(|path| path.is_dir()).collect();
    cases.sort();
    assert!(cases.len() >= 7);
    for case in cases {
        let expect_path = case.with_extension("expect");
        expect_file![expect_path].assert_eq(&render(&case));
    }
}

#[test]
fn cache_serves_an_unchanged_directory_and_reparses_only_changed_files() {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(agents.join("a.json"), r#"{"name":"a","prompt":"one"}"#).unwrap();
    std::fs::write(agents.join("b.json"), r#"{"name":"b"}"#).unwrap();
    let mut cache = CatalogCache::new(AgentDirs::user(&agents), SensitivePaths::default());
    let first = cache.catalog().unwrap();
    let second = cache.catalog().unwrap();
    assert!(Arc::ptr_eq(&first, &second), "an unchanged directory is served from the cache");

    // A rewrite with a different size changes the metadata key.
    std::fs::write(agents.join("a.json"), r#"{"name":"a","prompt":"two, longer"}"#).unwrap();
    let third = cache.catalog().unwrap();
    assert!(!Arc::ptr_eq(&second, &third));
    let prompt = third.resolve("a", &Pins::new()).unwrap().spec.prompt().map(|p| p.text.to_owned());
    assert_eq!(prompt.as_deref(), Some("two, longer"));
    let file_b =
        |catalog: &AgentCatalog| catalog.files().find(|file| file.path.ends_with("b.json")).map(std::ptr::from_ref);
    assert_eq!(file_b(&second), file_b(&third), "the unchanged file is not re-parsed");

    std::fs::remove_file(agents.join("b.json")).unwrap();
    let fourth = cache.catalog().unwrap();
    assert!(fourth.resolve("b", &Pins::new()).is_err(), "a removed file is gone");
    std::fs::write(agents.join("c.md"), "---\nname: c\n---\nbody\n").unwrap();
    assert!(cache.catalog().unwrap().resolve("c", &Pins::new()).is_ok(), "an added file appears");
}

#[test]
fn missing_directories_are_empty_and_pins_must_be_bare_file_names() {
    let dir = tempfile::tempdir().unwrap();
    let dirs = AgentDirs::user(dir.path().join("absent")).with_project(dir.path().join("project"));
    let catalog = AgentCatalog::load(&dirs, &SensitivePaths::default()).unwrap();
    assert!(catalog.names().is_empty());
    let error = catalog.resolve("x", &Pins::new()).unwrap_err().to_string();
    assert!(error.starts_with("no agent named `x` in "), "{error}");
    assert!(crate::validate_pin("reviewer.json").is_ok() && crate::validate_pin("reviewer.md").is_ok());
    for bad in ["../reviewer.json", "dir/reviewer.json", "reviewer.txt", "reviewer", ".json", ""] {
        let error = crate::validate_pin(bad).unwrap_err().to_string();
        assert!(error.contains("bare spec file name"), "{bad}: {error}");
    }
}

#[cfg(unix)]
#[test]
fn an_unlistable_agents_directory_is_an_error() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("agents");
    std::fs::create_dir(&agents).unwrap();
    std::fs::set_permissions(&agents, std::fs::Permissions::from_mode(0o000)).unwrap();
    let listable = std::fs::read_dir(&agents).is_ok(); // root can list anyway
    let result = AgentCatalog::load(&AgentDirs::user(&agents), &SensitivePaths::default());
    std::fs::set_permissions(&agents, std::fs::Permissions::from_mode(0o755)).unwrap();
    if listable {
        assert!(result.is_ok());
    } else {
        let error = result.unwrap_err().to_string();
        assert!(error.starts_with("cannot list agents directory"), "{error}");
    }
}
