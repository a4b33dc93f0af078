//! Every fixture under `test_data/specs/` against its `.expect` sibling: the
//! typed view with its coercions, every diagnostic, and the kiro-cli verdict.

use std::fmt::Write as _;
use std::path::Path;

use cairn_guard::SensitivePaths;
use expect_test::expect_file;

use super::test_data;
use crate::{AgentSpec, CheckReport, SpecHookEvent, ToolsSettingsGroup};

fn render(path: &Path) -> String {
    let file_name = path.file_name().unwrap().to_string_lossy().into_owned();
    let spec = match AgentSpec::read(path, &SensitivePaths::default()) {
        Ok(spec) => spec,
        Err(error) => {
            let report = CheckReport::for_error(Path::new(&file_name), &error);
            return format!(
                "unreadable: {}\nok: {}\nkiro_cli_rejects: {}\n",
                report.errors.join("; "),
                report.ok,
                report.kiro_cli_rejects
            );
        }
    };
    let mut out = String::new();
    let w = &mut out;
    writeln!(w, "format: {:?}", spec.format()).unwrap();
    if spec.format() == crate::SpecFormat::Markdown {
        writeln!(w, "fields: {}", serde_json::Value::Object(spec.fields().clone())).unwrap();
    }
    writeln!(w, "name: {:?}", spec.name()).unwrap();
    writeln!(w, "description: {:?}", spec.description()).unwrap();
    writeln!(w, "model: {:?}", spec.model()).unwrap();
    match spec.welcome_message() {
        Some(message) if message.chars().count() > 60 => {
            let tail: String = message.chars().rev().take(4).collect::<Vec<_>>().into_iter().rev().collect();
            writeln!(w, "welcome: {} chars, ends {tail:?}", message.chars().count()).unwrap();
        }
        other => writeln!(w, "welcome: {other:?}").unwrap(),
    }
    writeln!(w, "prompt: {:?}", spec.prompt()).unwrap();
    writeln!(w, "tools: {:?}", spec.tools()).unwrap();
    writeln!(w, "granted: {}", serde_json::to_string(&spec.granted_tools().summary()).unwrap()).unwrap();
    let approve: Vec<_> = spec.auto_approve().entries().cloned().collect();
    writeln!(w, "auto_approve: {}", serde_json::to_string(&approve).unwrap()).unwrap();
    writeln!(w, "include_mcp_json: {:?}", spec.include_mcp_json().map_err(|error| error.to_string())).unwrap();
    let hooks = spec.hooks();
    for event in SpecHookEvent::ALL {
        for entry in hooks.entries(event) {
            writeln!(w, "hook {}: {}", event.as_str(), serde_json::to_string(entry).unwrap()).unwrap();
        }
    }
    for server in spec.mcp_servers() {
        writeln!(w, "mcp {server:?}").unwrap();
    }
    writeln!(w, "resources: {}", serde_json::to_string(&spec.resources()).unwrap()).unwrap();
    for group in ToolsSettingsGroup::ALL {
        if let Some(setting) = spec.tools_setting(group) {
            writeln!(w, "settings {}: {} = {}", group.canonical(), setting.key, setting.value).unwrap();
        }
    }
    if let Some(allowlist) = spec.subagent_allowlist() {
        writeln!(w, "subagents: {:?}", allowlist.patterns()).unwrap();
    }
    writeln!(w, "toolless: {}", spec.is_toolless()).unwrap();
    let report = CheckReport::for_spec(Path::new(&file_name), &spec);
    writeln!(w, "ok: {}\nkiro_cli_rejects: {}", report.ok, report.kiro_cli_rejects).unwrap();
    for diagnostic in &report.diagnostics {
        let rejects = if diagnostic.kiro_cli_rejects { " [kiro-cli rejects]" } else { "" };
        writeln!(w, "{:?} {} {}{rejects}", diagnostic.severity, diagnostic.code, diagnostic).unwrap();
    }
    out
}

#[test]
fn every_spec_fixture_matches_its_expectation() {
    let dir = test_data("specs");
    let mut fixtures: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json" || ext == "md"))
        .collect();
    fixtures.sort();
    assert!(fixtures.len() > 40, "fixtures missing from {}", dir.display());
    for fixture in fixtures {
        let expect_path = fixture.with_extension(format!("{}.expect", fixture.extension().unwrap().to_string_lossy()));
        expect_file![expect_path].assert_eq(&render(&fixture));
    }
}

#[test]
fn unknown_keys_survive_a_round_trip() {
    let spec = AgentSpec::from_json_str(r#"{"name":"x","x-custom":{"keep":[1,2]},"tools":[]}"#).unwrap();
    let again = AgentSpec::from_json_str(&spec.to_json().to_string()).unwrap();
    assert_eq!(again.fields().get("x-custom"), spec.fields().get("x-custom"));
    assert!(again.same_content(&spec));
}

#[test]
fn markdown_body_becomes_the_prompt_in_the_json_view() {
    let spec = AgentSpec::from_markdown_str("---\nname: a\nprompt: ignored\n---\nBody text\n").unwrap();
    assert_eq!(spec.to_json()["prompt"], "Body text\n");
}

#[test]
fn mcp_secrets_are_not_in_debug_output() {
    let spec = AgentSpec::from_json_str(
        r#"{"name":"x","mcpServers":{"a":{"command":"x","env":{"TOKEN":"ghp_topsecret"}},"b":{"url":"https://b","headers":{"Authorization":"Bearer hunter2"}}}}"#,
    )
    .unwrap();
    let debug = format!("{:?}", spec.mcp_servers());
    assert!(debug.contains("TOKEN") && debug.contains("Authorization"), "{debug}");
    assert!(!debug.contains("ghp_topsecret") && !debug.contains("hunter2"), "{debug}");
}
