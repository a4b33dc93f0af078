//! Frontmatter edits: byte preservation, refusals, atomicity.

mod common;

use cairn_skills::{Change, FieldUpdate, SkillsError};
use common::Fixture;

/// Frontmatters with block scalars, comments, lists, nested maps, unknown
/// keys, CRLF endings and no trailing newline. None declares
/// `inject_on_trigger`, the default state.
const CORPUS: &[&str] = &[
    "---\nname: plain\ndescription: Plain skill\n---\nBody\n",
    "---\n# leading comment\nname: folded\ndescription: >\n  Folded text that\n  spans lines\n\n  and a paragraph.\nlicense: MIT # trailing\n---\nBody\n",
    "---\nname: literal\ndescription: |\n  Documents the flag:\n  inject_on_trigger: false\n    indented more\nalways: false\n---\n# Body\n",
    "---\nname: lists\ntriggers:\n- deploy\n- '!staging'\n\n# comment between keys\nallowed-tools: Bash(git:*) Read\n---\nBody\n",
    "---\nname: nested\nmetadata:\n  author: example-org\n  version: \"1.0\"\n  deep:\n    a: [1, 2]\nx-unknown: {a: 1, b: [x, y]}\n---\nBody\n",
    "---\r\nname: crlf\r\ndescription: Windows endings\r\nowner: someone\r\n---\r\nBody\r\n",
    "---\nname: no-newline\ndescription: \"quoted: value\"\n---",
    "---\nname: anchors\nbase: &b {x: 1}\nderived: *b\ntags: [a, b]\n---\nBody\n",
];

#[test]
fn toggling_inject_on_trigger_twice_restores_exact_bytes() {
    let fixture = Fixture::new();
    for (index, original) in CORPUS.iter().enumerate() {
        let name = format!("corpus-{index}");
        let path = fixture.put(&name, original);
        assert!(fixture.catalog.set_inject_on_trigger(&name, false).unwrap(), "{name}: first toggle changed nothing");
        let off = std::fs::read_to_string(&path).unwrap();
        assert!(!fixture.catalog.get(&name).unwrap().meta.inject_on_trigger, "{name}: not off after toggle:\n{off}");
        // Every original frontmatter line is still there, in order.
        let kept: Vec<&str> =
            off.split_inclusive('\n').filter(|line| !line.starts_with("inject_on_trigger:")).collect();
        assert_eq!(kept.concat(), *original, "{name}: other lines changed");
        assert!(fixture.catalog.set_inject_on_trigger(&name, true).unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), original.as_bytes(), "{name}: bytes differ after round trip");
        assert!(fixture.catalog.get(&name).unwrap().meta.inject_on_trigger);
    }
}

#[test]
fn setting_the_current_value_writes_nothing() {
    let fixture = Fixture::new();
    let original = "---\nname: a\ndescription: d\n---\nBody\n";
    let path = fixture.put("a", original);
    assert!(!fixture.catalog.set_inject_on_trigger("a", true).unwrap());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), original);
}

#[test]
fn existing_key_is_replaced_in_place_and_indented_lookalikes_are_untouched() {
    let fixture = Fixture::new();
    let original = "---\nname: a\ndescription: |\n  inject_on_trigger: false\ninject_on_trigger: no\n# keep me\nlicense: MIT\n---\nBody\n";
    let path = fixture.put("a", original);
    fixture.catalog.set_inject_on_trigger("a", false).unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "---\nname: a\ndescription: |\n  inject_on_trigger: false\ninject_on_trigger: false\n# keep me\nlicense: MIT\n---\nBody\n"
    );
    fixture.catalog.set_inject_on_trigger("a", true).unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "---\nname: a\ndescription: |\n  inject_on_trigger: false\n# keep me\nlicense: MIT\n---\nBody\n"
    );
}

#[test]
fn key_under_metadata_is_edited_where_it_is() {
    let fixture = Fixture::new();
    let original = "---\nname: a\nmetadata:\n  author: me\n  inject_on_trigger: \"false\"\n  other: x\n---\nBody\n";
    let path = fixture.put("a", original);
    assert!(!fixture.catalog.get("a").unwrap().meta.inject_on_trigger);
    fixture.catalog.set_inject_on_trigger("a", true).unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "---\nname: a\nmetadata:\n  author: me\n  other: x\n---\nBody\n"
    );
    assert!(fixture.catalog.get("a").unwrap().meta.inject_on_trigger);
}

#[test]
fn field_update_leaves_unmodelled_lines_byte_identical() {
    let fixture = Fixture::new();
    let original = CORPUS[3].replace("name: lists\n", "name: lists\ndescription: Old\n");
    let path = fixture.put("lists", &original);
    let update = FieldUpdate {
        description: Change::Set("New: with a colon".to_owned()),
        triggers: Change::Set(vec!["ship it".to_owned(), "!dry run".to_owned()]),
        always: Change::Set(false),
        pinned: Change::Remove,
        ..FieldUpdate::default()
    };
    assert!(fixture.catalog.update_fields("lists", &update).unwrap());
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        text,
        "---\nname: lists\ndescription: \"New: with a colon\"\ntriggers: [\"ship it\",\"!dry run\"]\n\n# comment between keys\nallowed-tools: Bash(git:*) Read\nalways: false\n---\nBody\n"
    );
    let skill = fixture.catalog.get("lists").unwrap();
    assert_eq!(skill.meta.triggers, ["ship it", "!dry run"]);
    assert_eq!(skill.meta.description.as_deref(), Some("New: with a colon"));
}

fn assert_unchanged(path: &std::path::Path, original: &str) {
    assert_eq!(std::fs::read_to_string(path).unwrap(), original, "a refused edit changed the file");
}

#[test]
fn edits_refuse_skills_without_or_with_broken_frontmatter() {
    let fixture = Fixture::new();
    let bare = fixture.put("bare", "# No frontmatter\nJust text.\n");
    assert!(matches!(fixture.catalog.set_inject_on_trigger("bare", false), Err(SkillsError::NoFrontmatter { .. })));
    assert_unchanged(&bare, "# No frontmatter\nJust text.\n");

    let broken_text = "---\nname: [unclosed\n---\nBody\n";
    let broken = fixture.put("broken", broken_text);
    assert!(matches!(
        fixture.catalog.set_inject_on_trigger("broken", false),
        Err(SkillsError::MalformedFrontmatter { .. })
    ));
    assert_unchanged(&broken, broken_text);
    assert!(fixture.catalog.get("broken").unwrap().warning.is_some(), "broken frontmatter still loads, with a warning");
}

#[test]
fn edits_that_cannot_be_expressed_line_by_line_are_refused() {
    let fixture = Fixture::new();
    let text = "---\nname: a\nmetadata: {inject_on_trigger: \"false\"}\n---\nBody\n";
    let path = fixture.put("a", text);
    assert!(matches!(fixture.catalog.set_inject_on_trigger("a", true), Err(SkillsError::EditNotApplied { .. })));
    assert_unchanged(&path, text);
}

#[test]
fn edits_refuse_names_that_are_missing_or_invalid() {
    let fixture = Fixture::new();
    assert!(matches!(fixture.catalog.set_inject_on_trigger("ghost", false), Err(SkillsError::NotFound { .. })));
    assert!(matches!(fixture.catalog.set_inject_on_trigger("../x", false), Err(SkillsError::InvalidName { .. })));
}

#[test]
fn every_outcome_is_audited() {
    let fixture = Fixture::new();
    fixture.put("a", "---\nname: a\n---\nBody\n");
    fixture.catalog.set_inject_on_trigger("a", false).unwrap();
    let _ = fixture.catalog.set_inject_on_trigger("ghost", false);
    let events = fixture.audit.take();
    assert_eq!(events.len(), 2);
    assert!(events[0].ok);
    assert_eq!(events[0].skills, ["a"]);
    assert!(!events[1].ok);
    assert!(events[1].detail.contains("no skill named"), "{}", events[1].detail);
}
