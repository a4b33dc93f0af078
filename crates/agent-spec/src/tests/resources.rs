//! Resource rules: `skill://` glob anchoring and `file://` steering
//! admission, on a fake home and project.

use std::fs;

use expect_test::{Expect, expect};

use super::scrub;
use crate::{AgentSpec, ResolveContext, skill_globs, steering_files};

struct World {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    home: std::path::PathBuf,
    project: std::path::PathBuf,
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let home = root.join("home");
    let project = root.join("project");
    let files = [
        (home.join(".kiro/steering/global.md"), "global"),
        (project.join(".kiro/steering/style.md"), "style"),
        (project.join(".kiro/steering/nested/deep.md"), "deep"),
        (project.join(".kiro/steering/notes.txt"), "not markdown"),
        (project.join("AGENTS.md"), "agents"),
        (project.join("README.md"), "readme"),
        (project.join("docs/guide.md"), "guide"),
        (project.join("docs/.env.md"), "SECRET=1"),
        (root.join("outside.md"), "outside"),
        (home.join(".ssh/notes.md"), "ssh notes"),
        (home.join("shared/team.md"), "team"),
    ];
    for (path, text) in files {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(root.join("outside.md"), project.join("docs/linked.md")).unwrap();
        std::os::unix::fs::symlink(home.join(".ssh"), project.join("docs/keys")).unwrap();
    }
    World { _dir: dir, root, home, project }
}

fn spec_in(world: &World, resources: &[&str]) -> AgentSpec {
    let json = serde_json::json!({ "name": "r", "resources": resources });
    AgentSpec::from_json_str(&json.to_string()).unwrap().with_path(world.project.join(".kiro/agents/r.json"))
}

fn check_steering(resources: &[&str], with_project: bool, defaults: bool, expect: Expect) {
    let world = world();
    let mut context = ResolveContext::new(Some(world.home.clone())).with_default_resources(defaults);
    if with_project {
        context = context.with_project_dir(&world.project);
    }
    let steering = steering_files(&spec_in(&world, resources), &context);
    let rendered = format!("{:#?}", steering);
    expect.assert_eq(&scrub(&rendered, &world.root, "<root>"));
}

#[test]
fn skill_globs_anchor_at_home_absolute_project_or_three_levels_up() {
    let world = world();
    let spec = spec_in(
        &world,
        &[
            "skill://~/skills/*/SKILL.md",
            "skill:///opt/skills/**/SKILL.md",
            "skill://.kiro/skills/*/SKILL.md",
            "skill:///C:/skills/x/SKILL.md",
            "file://README.md",
        ],
    );
    let with_project = ResolveContext::new(Some(world.home.clone())).with_project_dir(world.root.join("session"));
    let without_project = ResolveContext::new(Some(world.home.clone()));
    let rendered = format!("{:#?}\n{:#?}", skill_globs(&spec, &with_project), skill_globs(&spec, &without_project));
    expect![[r#"
        [
            "<root>/home/skills/*/SKILL.md",
            "/opt/skills/**/SKILL.md",
            "<root>/session/.kiro/skills/*/SKILL.md",
            "C:/skills/x/SKILL.md",
        ]
        [
            "<root>/home/skills/*/SKILL.md",
            "/opt/skills/**/SKILL.md",
            "<root>/project/.kiro/skills/*/SKILL.md",
            "C:/skills/x/SKILL.md",
        ]"#]]
    .assert_eq(&scrub(&rendered, &world.root, "<root>"));
    let unanchored = AgentSpec::from_json_str(r#"{"resources":["skill://skills/x.md","skill://~/y.md"]}"#).unwrap();
    assert!(skill_globs(&unanchored, &ResolveContext::new(None)).is_empty(), "nothing to anchor at");
}

#[test]
fn steering_defaults_and_relative_entries_anchor_at_the_project() {
    check_steering(
        &["file://README.md", "file://docs/**/*.md"],
        true,
        true,
        expect![[r#"
        Steering {
            files: [
                "<root>/project/README.md",
                "<root>/project/docs/guide.md",
                "<root>/home/.kiro/steering/global.md",
                "<root>/project/.kiro/steering/nested/deep.md",
                "<root>/project/.kiro/steering/style.md",
                "<root>/project/AGENTS.md",
            ],
            notices: [
                "file://docs/**/*.md: <root>/project/docs/.env.md is a sensitive location, skipped",
                "file://docs/**/*.md: <root>/project/docs/keys/notes.md resolves outside <root>/project, skipped",
                "file://docs/**/*.md: <root>/project/docs/linked.md resolves outside <root>/project, skipped",
            ],
        }"#]],
    );
}

#[test]
fn steering_rejects_non_markdown_escapes_and_counts_nothing_twice() {
    check_steering(
        &["file://.kiro/steering/*", "file://../outside.md", "file://AGENTS.md", "file://missing/*.md"],
        true,
        false,
        expect![[r#"
        Steering {
            files: [
                "<root>/project/.kiro/steering/style.md",
                "<root>/project/AGENTS.md",
            ],
            notices: [
                "file://.kiro/steering/*: <root>/project/.kiro/steering/notes.txt is not a .md file, skipped",
                "file://../outside.md: leaves its anchor <root>/project, skipped",
                "file://missing/*.md: matched no file",
            ],
        }"#]],
    );
}

#[test]
fn steering_home_and_absolute_entries() {
    let world = world();
    let absolute = format!("file://{}/shared/*.md", world.home.display());
    let context = ResolveContext::new(Some(world.home.clone())).with_default_resources(false);
    let spec = spec_in(&world, &["file://~/shared/team.md", &absolute, "file://~/.ssh/notes.md"]);
    let rendered = format!("{:#?}", steering_files(&spec, &context));
    expect![[r#"
        Steering {
            files: [
                "<root>/home/shared/team.md",
            ],
            notices: [
                "file://~/.ssh/notes.md: <root>/home/.ssh/notes.md is a sensitive location, skipped",
            ],
        }"#]]
    .assert_eq(&scrub(&rendered, &world.root, "<root>"));
}

#[test]
fn steering_without_a_project_anchors_relative_entries_at_home() {
    check_steering(
        &["file://shared/*.md"],
        false,
        true,
        expect![[r#"
        Steering {
            files: [
                "<root>/home/shared/team.md",
                "<root>/home/.kiro/steering/global.md",
            ],
            notices: [],
        }"#]],
    );
}
