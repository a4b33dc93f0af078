//! Tables for the tool questions: grants, auto-approve, settings aliases,
//! the sub-agent allowlist and the zero-tool truth table.

use crate::{AgentSpec, ToolsSettingsGroup};

fn spec(json: &str) -> AgentSpec {
    AgentSpec::from_json_str(json).unwrap()
}

#[test]
fn is_toolless_truth_table() {
    let base = r#""tools":[],"includeMcpJson":false"#;
    let rows: &[(&str, bool)] = &[
        (base, true),
        (r#""tools":[],"useLegacyMcpJson":false"#, true),
        (
            &format!(
                r#"{base},"allowedTools":[],"mcpServers":{{}},"hooks":{{}},"permissions":{{}},"toolsSettings":{{}},"includePowers":false"#
            ),
            true,
        ),
        (r#""includeMcpJson":false"#, false),
        (r#""tools":null,"includeMcpJson":false"#, false),
        (r#""tools":["fs_read"],"includeMcpJson":false"#, false),
        (r#""tools":[]"#, false),
        (r#""tools":[],"includeMcpJson":true"#, false),
        (r#""tools":[],"includeMcpJson":"false""#, false),
        (r#""tools":[],"includeMcpJson":false,"useLegacyMcpJson":false"#, false),
        (&format!(r#"{base},"allowedTools":["fs_read"]"#), false),
        (&format!(r#"{base},"mcpServers":{{"git":{{"command":"git-mcp"}}}}"#), false),
        (&format!(r#"{base},"hooks":{{"stop":[{{"command":"x"}}]}}"#), false),
        (&format!(r#"{base},"permissions":{{"rules":[]}}"#), false),
        (&format!(r#"{base},"toolsSettings":{{"shell":{{}}}}"#), false),
        (&format!(r#"{base},"includePowers":true"#), false),
        (&format!(r#"{base},"mcpServers":null"#), false),
    ];
    for (fields, expected) in rows {
        let json = format!(r#"{{"name":"t",{fields}}}"#);
        assert_eq!(spec(&json).is_toolless(), *expected, "{json}");
    }
}

#[test]
fn granted_tools_follow_tools_minus_excluded_tools() {
    let grants =
        spec(r#"{"tools":["read","@git","@docs/search","@fs/read_*","web"],"excludedTools":["@git/git_push"]}"#)
            .granted_tools();
    assert!(grants.grants_builtin("fs_read") && grants.grants_builtin("read"));
    assert!(grants.grants_id("read_file") && grants.grants_id("list_directory"), "fs_read family");
    assert!(grants.grants_builtin("web_fetch") && grants.grants_builtin("web_search"), "the web tag");
    assert!(!grants.grants_builtin("fs_write") && !grants.grants_id("str_replace"));
    assert!(grants.grants_mcp("git", "git_status") && !grants.grants_mcp("git", "git_push"));
    assert!(grants.grants_mcp("docs", "search") && !grants.grants_mcp("docs", "fetch"));
    assert!(grants.grants_mcp("fs", "read_file") && !grants.grants_mcp("fs", "write_file"));
    assert!(grants.mounts_server("docs") && !grants.mounts_server("gitlab"));

    let everything = spec(r#"{"tools":["*"],"excludedTools":["fs_write","tool_search","@git"]}"#).granted_tools();
    assert!(everything.grants_builtin("execute_bash") && everything.grants_mcp("docs", "x"));
    assert!(!everything.grants_builtin("write") && !everything.grants_id("str_replace"));
    assert!(!everything.grants_id("delete_file"), "excluding fs_write also excludes delete_file");
    assert!(!everything.grants_id("tool_search"), "a grant of * then an exclusion grants no loader");
    assert!(!everything.grants_mcp("git", "git_status") && !everything.mounts_server("git"));

    let builtin = spec(r#"{"tools":["@builtin"]}"#).granted_tools();
    assert!(builtin.grants_builtin("grep") && !builtin.grants_builtin("switch_to_execution"));
    assert!(!builtin.grants_mcp("git", "x"));
    assert!(spec(r#"{"tools":[]}"#).granted_tools().is_empty());
    assert!(spec(r#"{"tools":"fs_read"}"#).granted_tools().is_empty(), "malformed grants nothing");
    assert!(spec(r#"{"tools":["*"],"excludedTools":["*"]}"#).granted_tools().is_empty());
}

#[test]
fn auto_approve_matches_like_the_classic_checker() {
    let approve = spec(
        r#"{"allowedTools":["@git","@docs/","@fs/*","@web/fetch","@gh/list_*","*read*","shell","@builtin/grep","@*-mcp"]}"#,
    )
    .auto_approve();
    assert!(approve.approves_mcp("git", "anything") && approve.approves_whole_server("git"));
    assert!(approve.approves_mcp("docs", "x") && approve.approves_whole_server("docs"));
    assert!(approve.approves_mcp("fs", "x") && approve.approves_whole_server("fs"));
    assert!(approve.approves_mcp("web", "fetch") && !approve.approves_mcp("web", "search"));
    assert!(approve.approves_mcp("gh", "list_prs") && !approve.approves_mcp("gh", "merge"));
    assert!(approve.approves_mcp("aws-mcp", "anything"), "a server glob tried against @server");
    assert!(approve.approves_builtin("fs_read"), "*read* matches the native name");
    assert!(!approve.approves_mcp("reader", "read_file"), "*read* never matches an MCP tool");
    assert!(approve.approves_builtin("execute_bash") && approve.approves_builtin("grep"));
    assert!(!approve.approves_builtin("fs_write"));
    let wildcards: Vec<_> = approve.wildcard_entries().map(|entry| entry.written.as_str()).collect();
    assert_eq!(wildcards, ["@fs/*", "@gh/list_*", "*read*", "@*-mcp"]);

    let all = spec(r#"{"allowedTools":["@builtin/*"]}"#).auto_approve();
    assert!(all.approves_builtin("fs_write") && !all.approves_mcp("git", "x"));
    let star = spec(r#"{"allowedTools":["*"]}"#).auto_approve();
    assert!(star.approves_builtin("fs_write") && !star.approves_mcp("git", "x"));
}

#[test]
fn tools_settings_first_spelling_present_wins() {
    let settings = spec(
        r#"{"toolsSettings":{"use_subagent":{"availableAgents":["a"]},"agentCrew":{"availableAgents":["b"]},"executeCmd":{"x":1},"fsWrite":{"y":2}}}"#,
    );
    let subagent = settings.tools_setting(ToolsSettingsGroup::Subagent).unwrap();
    assert_eq!(subagent.key, "agentCrew");
    assert_eq!(settings.tools_setting(ToolsSettingsGroup::Shell).unwrap().key, "executeCmd");
    assert_eq!(settings.tools_setting(ToolsSettingsGroup::FsWrite).unwrap().key, "fsWrite");
    assert!(settings.tools_setting(ToolsSettingsGroup::FsRead).is_none());
    let allowlist = settings.subagent_allowlist().unwrap();
    assert!(allowlist.allows("b") && !allowlist.allows("a"));
}

#[test]
fn subagent_allowlist_globs_are_anchored() {
    let allowlist = spec(r#"{"toolsSettings":{"subagent":{"availableAgents":["reviewer","docs-*","a.b"]}}}"#)
        .subagent_allowlist()
        .unwrap();
    assert!(allowlist.allows("reviewer") && allowlist.allows("docs-writer") && allowlist.allows("docs-"));
    assert!(!allowlist.allows("my-reviewer") && !allowlist.allows("xdocs-writer"));
    assert!(allowlist.allows("a.b") && !allowlist.allows("axb"), "only * is a wildcard");
    assert!(spec(r#"{"toolsSettings":{"subagent":{"trustedAgents":["x"]}}}"#).subagent_allowlist().is_none());
    let empty = spec(r#"{"toolsSettings":{"subagent":{"availableAgents":[]}}}"#).subagent_allowlist().unwrap();
    assert!(!empty.allows("anyone"), "an empty list allows nobody");
}
