//! Agent-scoped context: a custom agent's catalog is its `skill://`
//! mapping, its messages run no skill triggers, and a backend that does
//! not read steering gets none.

use std::path::Path;
use std::sync::Arc;

use cairn_agent_spec::projection::AgentBackend;
use cairn_agent_spec::{AgentCatalog, AgentDirs, Pins, ResolveContext};
use cairn_context::{AgentContext, ContextBuilder, MessageRequest, SectionName, SessionRequest};
use cairn_skills::{SkillCatalog, SkillsConfig};

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

struct Fixture {
    _dir: tempfile::TempDir,
    builder: ContextBuilder,
    agents: AgentCatalog,
    context: ResolveContext,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let skills = dir.path().join("skills");
    for name in ["alpha", "beta", "gamma"] {
        write(
            &skills.join(name).join("SKILL.md"),
            &format!("---\nname: {name}\ndescription: the {name} skill\ntriggers: {name}\n---\nUse {name}.\n"),
        );
    }
    let mut config = SkillsConfig::new(dir.path());
    config.persist_usage = false;
    let builder = ContextBuilder::new().with_skills(Arc::new(SkillCatalog::open(config)));
    let agents_dir = dir.path().join("agents");
    let alpha = skills.join("alpha/SKILL.md");
    write(
        &agents_dir.join("mapped.json"),
        &serde_json::json!({
            "name": "mapped", "prompt": "Mapped.", "tools": [],
            "resources": [format!("skill://{}", alpha.display()), format!("file://{}", dir.path().join("STEER.md").display())],
        })
        .to_string(),
    );
    write(&dir.path().join("STEER.md"), "Steer carefully.\n");
    write(&agents_dir.join("unmapped.json"), r#"{"name": "unmapped", "prompt": "Bare.", "tools": []}"#);
    let agents = AgentCatalog::load(&AgentDirs::user(&agents_dir), &Default::default()).unwrap();
    let context = ResolveContext::new(Some(dir.path().to_owned()));
    Fixture { _dir: dir, builder, agents, context }
}

fn skills_text(builder: &ContextBuilder, agent: Option<&AgentContext>) -> String {
    let built = builder.build_session_context(&SessionRequest { agent, ..Default::default() });
    assert!(built.section(SectionName::Skills).is_some() || agent.is_some());
    built.text
}

#[test]
fn a_custom_agent_carries_only_its_mapped_skills() {
    let fixture = fixture();
    let everyone = skills_text(&fixture.builder, None);
    for name in ["alpha", "beta", "gamma"] {
        assert!(everyone.contains(&format!("- {name}: the {name} skill")), "{everyone}");
    }
    let mapped = AgentContext::resolve(&fixture.agents, "mapped", &Pins::default(), &fixture.context).unwrap();
    let text = skills_text(&fixture.builder, Some(&mapped));
    assert!(text.contains("- alpha: the alpha skill"), "{text}");
    assert!(!text.contains("beta") && !text.contains("gamma"), "{text}");

    let unmapped = AgentContext::resolve(&fixture.agents, "unmapped", &Pins::default(), &fixture.context).unwrap();
    let text = skills_text(&fixture.builder, Some(&unmapped));
    for name in ["alpha", "beta", "gamma"] {
        assert!(!text.contains(&format!("- {name}:")), "an unmapped custom agent gets no skills: {text}");
    }
}

#[test]
fn triggers_run_only_on_messages_that_are_not_a_custom_agents() {
    let fixture = fixture();
    let default =
        fixture.builder.build_message(&MessageRequest { message: "beta", preview: true, ..Default::default() });
    assert!(default.section(SectionName::TriggeredSkills).is_some(), "{}", default.text);
    let mapped = AgentContext::resolve(&fixture.agents, "mapped", &Pins::default(), &fixture.context).unwrap();
    let custom = fixture.builder.build_message(&MessageRequest {
        message: "alpha",
        preview: true,
        agent: Some(&mapped),
        ..Default::default()
    });
    assert!(custom.section(SectionName::TriggeredSkills).is_none(), "{}", custom.text);
}

#[test]
fn steering_reaches_only_backends_that_read_it_and_the_rest_get_a_notice() {
    let fixture = fixture();
    let pins = Pins::default();
    let on_claude =
        AgentContext::resolve_for_backend(&fixture.agents, "mapped", &pins, &fixture.context, AgentBackend::Claude)
            .unwrap();
    let built =
        fixture.builder.build_session_context(&SessionRequest { agent: Some(&on_claude), ..Default::default() });
    assert!(built.text.contains("Steer carefully."), "{}", built.text);

    let on_goose =
        AgentContext::resolve_for_backend(&fixture.agents, "mapped", &pins, &fixture.context, AgentBackend::Goose)
            .unwrap();
    let built = fixture.builder.build_session_context(&SessionRequest { agent: Some(&on_goose), ..Default::default() });
    assert!(!built.text.contains("Steer carefully."), "{}", built.text);
    assert!(
        built.notices.iter().any(|notice| notice.starts_with("resources: steering") && notice.contains("goose")),
        "{:?}",
        built.notices
    );
}
