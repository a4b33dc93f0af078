//! The Agent Skills conformance cases and real SKILL.md files from
//! `../shared/evaldata/skills-dev` (read in place, never copied).

mod common;

use std::path::Path;

use cairn_skills::{SkillCatalog, SkillSource, SkillsConfig, lint_skill_dir, parse_frontmatter, read_properties};
use regex::RegexBuilder;
use serde_json::Value;

#[test]
fn every_real_skill_loads_with_its_metadata() {
    let Some(dev) = common::skills_dev() else { return };
    let mut config = SkillsConfig::new(tempfile::tempdir().unwrap().keep());
    config.extra_paths = vec![dev.clone()];
    config.persist_usage = false;
    let catalog = SkillCatalog::open(config);
    let listing = catalog.list_skills();
    let names: Vec<&str> = listing.iter().map(|row| row.name.as_str()).collect();
    for expected in ["brand-guidelines", "skill-creator", "webapp-testing"] {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }
    for row in &listing {
        assert_eq!(row.source, SkillSource::Extra);
        assert!(!row.owned, "extra paths are never owned");
        assert!(row.warning.is_none(), "{}: {:?}", row.name, row.warning);
        assert!(!row.description.is_empty(), "{} has no description", row.name);
        assert!(row.inject_on_trigger);
        assert_eq!(row.deliveries, None);
        let skill = catalog.get(&row.name).unwrap();
        assert_eq!(skill.meta.name.as_deref(), Some(row.name.as_str()));
        assert!(!skill.body().trim().is_empty());
        let report = lint_skill_dir(&row.dir);
        assert!(report.is_valid_agent_skill(), "{}: {:?}", row.name, report.findings);
    }
    // Search finds them by description.
    let hits = catalog.search("playwright", 5);
    assert_eq!(hits.first().map(|hit| hit.name.as_str()), Some("webapp-testing"));
}

fn outcome(kind: &str, dir: &Path, text: &str) -> Result<(), String> {
    match kind {
        "validate" => {
            let report = lint_skill_dir(dir);
            if report.is_valid_agent_skill() {
                Ok(())
            } else {
                Err(report.findings.iter().map(|finding| finding.message.clone()).collect::<Vec<_>>().join("; "))
            }
        }
        "read_properties" => read_properties(dir).map(|_| ()).map_err(|finding| finding.message),
        "parse_frontmatter" => parse_frontmatter(text).map(|_| ()).map_err(|error| error.to_string()),
        other => panic!("unknown conformance kind {other}"),
    }
}

#[test]
fn conformance_cases_match_expected_outcomes() {
    let Some(dev) = common::skills_dev() else { return };
    let data = std::fs::read_to_string(dev.join("conformance.jsonl")).unwrap();
    let mut checked = 0;
    for line in data.lines().filter(|line| !line.trim().is_empty()) {
        let case: Value = serde_json::from_str(line).unwrap();
        let id = case["id"].as_str().unwrap();
        let kind = case["kind"].as_str().unwrap();
        let text = case["skill_md"].as_str().unwrap();
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join(case["dir_name"].as_str().unwrap_or("skill"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(case["file_name"].as_str().unwrap_or("SKILL.md")), text).unwrap();

        let result = outcome(kind, &dir, text);
        match case["expect"].as_str().unwrap() {
            "valid" => assert!(result.is_ok(), "{id}: expected valid, got {result:?}"),
            "invalid" => {
                let message = result.expect_err(&format!("{id}: expected invalid"));
                for needle in case["error_contains"].as_array().unwrap() {
                    let needle = needle.as_str().unwrap();
                    assert!(
                        message.to_lowercase().contains(&needle.to_lowercase()),
                        "{id}: {message:?} lacks {needle:?}"
                    );
                }
                for pattern in case["error_regex"].as_array().unwrap() {
                    let regex = RegexBuilder::new(pattern.as_str().unwrap()).case_insensitive(true).build().unwrap();
                    assert!(regex.is_match(&message), "{id}: {message:?} does not match {regex}");
                }
            }
            other => panic!("{id}: unknown expectation {other}"),
        }
        checked += 1;
    }
    assert!(checked >= 9, "only {checked} conformance cases read");
}
