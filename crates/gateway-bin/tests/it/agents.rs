//! `cairn agent list | show | pin | check | project | export` and the
//! projection route.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::cairn;

fn spec_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../agent-spec/test_data/specs").join(name)
}

fn check_reports(files: &[PathBuf]) -> (bool, Vec<Value>) {
    let output = cairn().args(["agent", "check"]).args(files).output().unwrap();
    let reports =
        String::from_utf8(output.stdout).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    (output.status.success(), reports)
}

/// Two skills that trigger on "ship" (`deploy-web`, `deploy-db`) and two
/// custom agents in `<home>/agents`: `web`, whose `skill://` resource maps
/// `deploy-web` only, and `bare`, which maps none. Returns the agents dir.
pub(crate) fn seed_scoped_agents(home: &Path) -> PathBuf {
    let skills = home.join("skills");
    for name in ["deploy-web", "deploy-db"] {
        std::fs::create_dir_all(skills.join(name)).unwrap();
        std::fs::write(
            skills.join(name).join("SKILL.md"),
            format!("---\nname: {name}\ndescription: Ship {name}\ntriggers: ship\n---\nRun the {name} playbook.\n"),
        )
        .unwrap();
    }
    let agents = home.join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    let web = serde_json::json!({"name": "web", "prompt": "Ship the web tier.",
        "resources": [format!("skill://{}/deploy-web/SKILL.md", skills.display())]});
    let bare = serde_json::json!({"name": "bare", "prompt": "No skills.", "resources": ["file://README.md"]});
    for spec in [&web, &bare] {
        std::fs::write(agents.join(format!("{}.json", spec["name"].as_str().unwrap())), spec.to_string()).unwrap();
    }
    agents
}

#[test]
fn check_agrees_with_the_strict_loader_on_the_example_agents() {
    // (fixture, Cairn can use it, kiro-cli's strict loader drops it)
    let cases = [
        ("kiro-dev-shape.json", true, false),
        ("builder-shape.json", true, false),
        ("generator-default-shape.json", true, false),
        ("architect-shape.md", true, false),
        ("hooks-claude-nested.json", false, true),
        ("hooks-object-form.json", false, true),
        ("missing-name.json", true, true),
        ("cairn-only-keys.json", true, true),
        ("unknown-key.json", true, true),
        ("resources.json", false, true),
        ("include-both-spellings.json", false, true),
        ("invalid-json.json", false, true),
        ("yaml-alias.md", false, true),
    ];
    for (fixture, ok, rejects) in cases {
        let (_, reports) = check_reports(&[spec_fixture(fixture)]);
        let report = &reports[0];
        assert_eq!(report["ok"], ok, "{fixture}: {report}");
        assert_eq!(report["kiro_cli_rejects"], rejects, "{fixture}: {report}");
        for key in ["file", "name", "errors", "warnings", "notices"] {
            assert!(report.get(key).is_some(), "{fixture} lacks {key}");
        }
        if rejects {
            let explained = report["errors"]
                .as_array()
                .unwrap()
                .iter()
                .chain(report["warnings"].as_array().unwrap())
                .chain(report["notices"].as_array().unwrap())
                .any(|message| message.as_str().unwrap().contains("kiro-cli") || !ok);
            assert!(explained, "{fixture}: the rejection is explained: {report}");
        }
    }
    let nested = &check_reports(&[spec_fixture("hooks-claude-nested.json")]).1[0];
    let message = nested["errors"][0].as_str().unwrap();
    assert!(message.contains("Claude Code's nested") && message.contains("`command`"), "{message}");
}

#[test]
fn check_prints_one_line_per_file_and_fails_when_any_file_fails() {
    let (success, reports) = check_reports(&[spec_fixture("builder-shape.json"), spec_fixture("kiro-dev-shape.json")]);
    assert!(success);
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[1]["name"], "kiro-dev");
    let (success, reports) = check_reports(&[spec_fixture("builder-shape.json"), spec_fixture("hooks-list.json")]);
    assert!(!success);
    assert_eq!(reports[1]["ok"], false);
    let (success, reports) = check_reports(&[PathBuf::from("/nonexistent/agent.json")]);
    assert!(!success);
    assert!(reports[0]["errors"][0].as_str().unwrap().contains("cannot read agent spec"), "{}", reports[0]);
}

struct Setup {
    _dir: tempfile::TempDir,
    home: PathBuf,
    agents: PathBuf,
    data_home: PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let agents = home.join(".kiro/agents");
    std::fs::create_dir_all(agents.join("prompts")).unwrap();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    let data_home = dir.path().join("cairn");
    Setup { home, agents, data_home, _dir: dir }
}

impl Setup {
    fn run(&self, args: &[&str]) -> std::process::Output {
        cairn().env("HOME", &self.home).env("CAIRN_HOME", &self.data_home).arg("agent").args(args).output().unwrap()
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.agents.join(name), text).unwrap();
    }
}

#[test]
fn ambiguous_names_are_refused_until_pinned() {
    let setup = setup();
    setup.write("a-dup.json", r#"{"name":"dup","prompt":"first"}"#);
    setup.write("b-dup.json", r#"{"name":"dup","prompt":"second"}"#);
    let list = setup.run(&["list"]);
    let text = String::from_utf8(list.stdout).unwrap();
    assert!(text.contains("dup\terror\tagent `dup` is declared by 2 files"), "{text}");

    let show = setup.run(&["show", "dup"]);
    assert!(!show.status.success());
    let stderr = String::from_utf8(show.stderr).unwrap();
    assert!(stderr.contains("`cairn agent pin dup a-dup.json` or `cairn agent pin dup b-dup.json`"), "{stderr}");

    let refused = setup.run(&["pin", "dup", "c-dup.json"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8(refused.stderr).unwrap().contains("does not declare agent `dup`"));
    let invalid = setup.run(&["pin", "dup", "../b-dup.json"]);
    assert!(!invalid.status.success());

    let pinned = setup.run(&["pin", "dup", "b-dup.json"]);
    assert!(pinned.status.success(), "{}", String::from_utf8_lossy(&pinned.stderr));
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(setup.data_home.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["agent"]["spec_pins"]["dup"], "b-dup.json");

    let show = setup.run(&["show", "dup", "--json"]);
    assert!(show.status.success());
    let view: Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(view["prompt"]["text"], "second");
    assert!(view["file"].as_str().unwrap().ends_with("b-dup.json"));
}

#[test]
fn show_resolves_prompt_skills_steering_and_tools() {
    let setup = setup();
    std::fs::write(setup.agents.join("prompts/reviewer.md"), "Review carefully.\n").unwrap();
    let project = setup.home.join("work/app");
    std::fs::create_dir_all(project.join(".kiro/steering")).unwrap();
    std::fs::write(project.join(".kiro/steering/style.md"), "style").unwrap();
    std::fs::write(project.join("AGENTS.md"), "agents").unwrap();
    setup.write(
        "reviewer.json",
        r#"{"name":"reviewer","prompt":"file://prompts/reviewer.md","tools":["read","@git"],"excludedTools":["@git/git_push"],
            "allowedTools":["@git/git_status"],"resources":["skill://.kiro/skills/*/SKILL.md","file://AGENTS.md"]}"#,
    );
    let show = setup.run(&["show", "reviewer", "--json", "--project", project.to_str().unwrap()]);
    assert!(show.status.success(), "{}", String::from_utf8_lossy(&show.stderr));
    let view: Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(view["prompt"]["text"], "Review carefully.\n");
    assert_eq!(view["skill_globs"][0], format!("{}/.kiro/skills/*/SKILL.md", project.display()));
    let steering: Vec<&str> =
        view["steering"]["files"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(steering.iter().any(|file| file.ends_with("AGENTS.md")), "{steering:?}");
    assert!(steering.iter().any(|file| file.ends_with("style.md")), "{steering:?}");
    assert!(view["granted_tools"]["builtins"]["fs_read"].is_array());
    assert_eq!(view["granted_tools"]["servers"][0], "git");
    assert_eq!(view["is_toolless"], false);

    let text = setup.run(&["show", "reviewer", "--project", project.to_str().unwrap()]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("prompt: 18 chars") && text.contains("name: reviewer"), "{text}");
}

#[cfg(unix)]
#[test]
fn show_refuses_a_prompt_linked_into_ssh() {
    let setup = setup();
    std::fs::write(setup.home.join(".ssh/id_ed25519"), "-----BEGIN OPENSSH PRIVATE KEY-----\n").unwrap();
    std::os::unix::fs::symlink(setup.home.join(".ssh/id_ed25519"), setup.agents.join("prompts/p.md")).unwrap();
    setup.write("leaky.json", r#"{"name":"leaky","prompt":"file://prompts/p.md","tools":[]}"#);
    let show = setup.run(&["show", "leaky", "--json"]);
    assert!(show.status.success());
    let view: Value = serde_json::from_slice(&show.stdout).unwrap();
    assert!(view["prompt"]["text"].is_null());
    let refused = view["prompt"]["refused"].as_str().unwrap();
    assert!(refused.contains("sensitive location"), "{refused}");
    assert!(!String::from_utf8_lossy(&show.stdout).contains("BEGIN OPENSSH"));
}

#[test]
fn list_reports_project_shadowing_and_unreadable_files() {
    let setup = setup();
    setup.write("coder.json", r#"{"name":"coder","tools":[]}"#);
    setup.write("broken.json", "{ not json");
    let project = setup.home.join("checkout");
    std::fs::create_dir_all(project.join(".kiro/agents")).unwrap();
    std::fs::write(project.join(".kiro/agents/coder.md"), "---\nname: coder\n---\nProject coder.\n").unwrap();
    let list = setup.run(&["list", "--json", "--project", project.to_str().unwrap()]);
    assert!(list.status.success());
    let report: Value = serde_json::from_slice(&list.stdout).unwrap();
    let coder = &report["agents"][0];
    assert_eq!(coder["scope"], "project");
    assert!(coder["warnings"][0].as_str().unwrap().contains("shadows"), "{coder}");
    assert!(report["unreadable"][0]["error"].as_str().unwrap().contains("invalid JSON"), "{report}");
}

fn projection_fixture(case: &str) -> String {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../agent-spec/test_data/projection").join(case).join("spec.json");
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn project_prints_every_concern_and_refuses_an_unknown_backend() {
    let setup = setup();
    setup.write("oncall.json", &projection_fixture("kiro-cli-oncall"));
    let output = setup.run(&["project", "oncall", "--backend", "claude", "--json"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let projection: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(projection["backend"], "claude");
    assert_eq!(projection["concerns"].as_array().unwrap().len(), 16);
    assert_eq!(projection["mcp_servers"][0]["name"], "builder-mcp");
    assert_eq!(projection["settings"]["model"], "claude-opus-4.7");

    let text = setup.run(&["project", "oncall", "--backend", "kiro-cli"]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("backend: kiro-cli (native)"), "{text}");
    assert!(text.contains("set hooks") || text.contains("hooks"), "{text}");

    let unknown = setup.run(&["project", "oncall", "--backend", "copilot"]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8(unknown.stderr).unwrap().contains("unknown backend `copilot`"));
    let missing = setup.run(&["project", "nobody", "--backend", "kas"]);
    assert!(!missing.status.success());
}

#[test]
fn export_to_claude_code_merges_and_never_clobbers() {
    let setup = setup();
    setup.write("narrowed.json", &projection_fixture("disabled-tools"));
    let target = setup.home.join("checkout");
    std::fs::create_dir_all(target.join(".claude")).unwrap();
    std::fs::write(
        target.join(".mcp.json"),
        r#"{"mcpServers":{"plain":{"type":"stdio","command":"my-own-plain"}},"other":1}"#,
    )
    .unwrap();
    std::fs::write(
        target.join(".claude/settings.local.json"),
        r#"{"permissions":{"defaultMode":"plan","deny":["Bash(rm *)"]},"theme":"dark"}"#,
    )
    .unwrap();
    let dir = target.to_str().unwrap();

    let dry = setup.run(&["export", "narrowed", "--to", "claude-code", "--dir", dir, "--dry-run"]);
    assert!(dry.status.success(), "{}", String::from_utf8_lossy(&dry.stderr));
    let diff = String::from_utf8(dry.stdout).unwrap();
    assert!(diff.contains("+    \"cairn\""), "{diff}");
    let untouched = std::fs::read_to_string(target.join(".mcp.json")).unwrap();
    assert!(!untouched.contains("cairn"), "a dry run writes nothing");

    let done = setup.run(&["export", "narrowed", "--to", "claude-code", "--dir", dir]);
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let stdout = String::from_utf8(done.stdout).unwrap();
    assert!(stdout.contains("kept") && stdout.contains("mcpServers.plain"), "{stdout}");
    let mcp: Value = serde_json::from_str(&std::fs::read_to_string(target.join(".mcp.json")).unwrap()).unwrap();
    assert_eq!(mcp["other"], 1);
    assert_eq!(mcp["mcpServers"]["plain"]["command"], "my-own-plain", "an existing entry is kept");
    assert_eq!(mcp["mcpServers"]["docs.server"]["command"], "docs-mcp");
    assert!(mcp["mcpServers"].get("off").is_none(), "a disabled server is not exported");
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(target.join(".claude/settings.local.json")).unwrap()).unwrap();
    assert_eq!(settings["theme"], "dark");
    assert_eq!(settings["permissions"]["defaultMode"], "plan", "the user's mode is kept");
    let deny: Vec<&str> =
        settings["permissions"]["deny"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(
        deny,
        ["Bash(rm *)", "mcp__cairn__memory_forget", "mcp__docs_server__delete_page", "mcp__docs_server__purge"]
    );
    assert!(target.join(".mcp.json.cairn.bak").exists());

    let again = setup.run(&["export", "narrowed", "--to", "claude-code", "--dir", dir]);
    assert!(String::from_utf8(again.stdout).unwrap().contains("unchanged"));

    std::fs::write(target.join(".mcp.json"), "[1]").unwrap();
    let refused = setup.run(&["export", "narrowed", "--to", "claude-code", "--dir", dir]);
    assert!(!refused.status.success());
    assert_eq!(std::fs::read_to_string(target.join(".mcp.json")).unwrap(), "[1]");
}

#[test]
fn export_to_kas_writes_the_custom_agents_batch_and_refuses_a_spec_the_backend_cannot_read() {
    let setup = setup();
    setup.write("oncall.json", &projection_fixture("kiro-cli-oncall"));
    setup.write("notes.md", "---\nname: notes\ntools: read\n---\nTake notes.\n");
    let target = setup.home.join("out");
    let dir = target.to_str().unwrap();
    let done = setup.run(&["export", "oncall", "--to", "kas", "--dir", dir]);
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(target.join(".kiro/kas-custom-agents.json")).unwrap()).unwrap();
    assert_eq!(written["customAgents"]["oncall"]["model"], "claude-opus-4.7");
    assert!(written["customAgents"]["oncall"]["tools"].as_array().unwrap().iter().any(|tool| tool == "read_file"));
    let stdout = String::from_utf8(done.stdout).unwrap();
    assert!(
        stdout.contains("note: neither KAS nor kiro-cli reads") && stdout.contains("kas-custom-agents.json"),
        "the output says the file is a hand-off document: {stdout}"
    );
    let help = String::from_utf8(setup.run(&["export", "--help"]).stdout).unwrap();
    assert!(help.contains("Neither KAS nor kiro-cli reads this file"), "{help}");

    let markdown = setup.run(&["export", "notes", "--to", "claude-code", "--dir", dir]);
    assert!(!markdown.status.success());
    assert!(String::from_utf8(markdown.stderr).unwrap().contains("does not read the Markdown form"));
}

#[test]
fn the_projection_route_answers_per_backend_and_refuses_bad_queries() {
    let home = tempfile::tempdir().unwrap();
    let agents = tempfile::tempdir().unwrap();
    std::fs::write(agents.path().join("oncall.json"), projection_fixture("kiro-cli-oncall")).unwrap();
    std::fs::write(
        home.path().join("config.json"),
        serde_json::json!({"agent": {"agents_dir": agents.path()}}).to_string(),
    )
    .unwrap();
    let gateway = crate::serve::start_in(home, &[], &[]);
    let reply = gateway.get("/api/agents/oncall/projection?backend=codex");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body["projection"]["backend"], "codex");
    assert_eq!(reply.body["projection"]["settings"]["config_options"]["mode"], "read-only");
    assert_eq!(gateway.get("/api/agents/oncall/projection").code(), "missing_backend");
    let stated = gateway.get("/api/agents/oncall/projection?backend=kiro-cli&kiro_version=2.30.0");
    assert_eq!(stated.status, 200, "{}", stated.body);
    assert_eq!(
        stated.body["projection"]["notices"][0], "kiro-cli version: 2.30.0 (as stated with ?kiro_version=)",
        "{}",
        stated.body
    );
    assert_eq!(
        gateway.get("/api/agents/oncall/projection?backend=kiro-cli&kiro_version=latest").code(),
        "bad_kiro_version"
    );
    assert_eq!(gateway.get("/api/agents/oncall/projection?backend=copilot").code(), "unknown_backend");
    assert_eq!(gateway.get("/api/agents/nobody/projection?backend=kas").code(), "agent_not_found");
}

/// Phrases naming machinery Cairn does not have (it runs no agent); the
/// same list the agent-spec crate checks its texts against.
const RUNTIME_PHRASES: &[&str] =
    &["turn loop", "spawn gate", "permission request", "broker stub", "launcher", "cairn's gate", "gate tier"];

#[test]
fn no_projection_text_or_agent_help_describes_a_cairn_runtime() {
    let setup = setup();
    let cases = ["hooks-every-event", "managed-tool-policy", "tools-settings", "disabled-tools", "secrets-in-servers"];
    let mut names = Vec::new();
    for case in cases {
        let spec: Value = serde_json::from_str(&projection_fixture(case)).unwrap();
        let name = spec["name"].as_str().unwrap().to_owned();
        setup.write(&format!("{name}.json"), &projection_fixture(case));
        names.push(name);
    }
    let mut texts = Vec::new();
    for name in &names {
        for backend in
            ["kiro-cli", "kas", "claude", "codex", "opencode", "mimocode", "goose", "strands", "pi", "deepseek"]
        {
            let output = setup.run(&["project", name, "--backend", backend, "--kiro-version", "2.30.0"]);
            assert!(output.status.success(), "{name} {backend}: {}", String::from_utf8_lossy(&output.stderr));
            texts.push((format!("cairn agent project {name} --backend {backend}"), output.stdout));
        }
    }
    let subcommands: [&[&str]; 7] = [&[], &["list"], &["show"], &["pin"], &["check"], &["project"], &["export"]];
    for sub in subcommands {
        let mut args: Vec<&str> = sub.to_vec();
        args.push("--help");
        let output = setup.run(&args);
        assert!(output.status.success(), "{args:?}");
        texts.push((format!("cairn agent {}", args.join(" ")), output.stdout));
    }
    let mut problems = Vec::new();
    for (what, text) in &texts {
        let text = String::from_utf8_lossy(text).to_lowercase();
        for phrase in RUNTIME_PHRASES {
            if let Some(at) = text.find(phrase) {
                let line = text[..at].rsplit('\n').next().unwrap_or_default().to_owned() + &text[at..];
                problems.push(format!("{what} says {phrase:?}: {}", line.lines().next().unwrap_or_default()));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(texts.len(), names.len() * 10 + 7);
}

/// A fake `kiro-cli` whose `--version` runs `body` (a shell script), alone
/// on the returned PATH.
fn fake_kiro_cli(dir: &Path, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let bin = dir.join(format!("bin-{}", dir.read_dir().unwrap().count()));
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("kiro-cli");
    std::fs::write(&script, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

#[test]
fn kiro_cli_version_is_probed_once_or_stated_and_an_unknown_one_is_said() {
    let setup = setup();
    setup.write("kas-native.json", &projection_fixture("permissions-block"));
    let fakes = setup.home.join("fakes");
    std::fs::create_dir_all(&fakes).unwrap();
    let project = |path: &Path, extra: &[&str]| -> (bool, Vec<String>) {
        let mut args = vec!["project", "kas-native", "--backend", "kiro-cli", "--json"];
        args.extend_from_slice(extra);
        let output = cairn()
            .env("HOME", &setup.home)
            .env("CAIRN_HOME", &setup.data_home)
            .env("PATH", path)
            .arg("agent")
            .args(&args)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let projection: Value = serde_json::from_slice(&output.stdout).unwrap();
        let notices =
            projection["notices"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_owned()).collect();
        (projection["spec_read"].as_bool().unwrap(), notices)
    };
    let unknown = "the verdict on this block is withheld because the kiro-cli version is unknown";
    // (what `kiro-cli --version` does, spec read, the version notice, the permissions notice)
    let cases: &[(&str, bool, &str, &str)] = &[
        ("echo 'kiro-cli 2.30.1'", true, "kiro-cli version: 2.30.1 (from `kiro-cli --version`)", ""),
        (
            "echo 'kiro-cli 2.22.0'",
            false,
            "kiro-cli version: 2.22.0 (from `kiro-cli --version`)",
            "kiro-cli 2.22.0 predates 2.23.0",
        ),
        (
            "echo 'error: license 404 expired'; echo 'kiro-cli 2.30.0'",
            true,
            "kiro-cli version: unknown (`kiro-cli --version` printed no version); state it with --kiro-version X.Y.Z",
            unknown,
        ),
        (
            "printf '\\377\\376 v9999999.1\\n'",
            true,
            "kiro-cli version: unknown (`kiro-cli --version` printed no version)",
            unknown,
        ),
        ("echo 'kiro-cli 2.30.0'; exit 3", true, "kiro-cli version: unknown (`kiro-cli --version` failed", unknown),
        (
            "exec /bin/sleep 30",
            true,
            "kiro-cli version: unknown (`kiro-cli --version` did not answer within 3 s)",
            unknown,
        ),
    ];
    for (body, read, version_notice, permissions_notice) in cases {
        let bin = fake_kiro_cli(&fakes, body);
        let (spec_read, notices) = project(&bin, &[]);
        assert_eq!(spec_read, *read, "{body}: {notices:?}");
        assert!(notices.iter().any(|notice| notice.starts_with(version_notice)), "{body}: {notices:?}");
        if permissions_notice.is_empty() {
            assert!(!notices.iter().any(|notice| notice.starts_with("permissions")), "{body}: {notices:?}");
        } else {
            assert!(notices.iter().any(|notice| notice.contains(permissions_notice)), "{body}: {notices:?}");
        }
    }
    // No kiro-cli on PATH at all.
    let empty = fakes.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let (spec_read, notices) = project(&empty, &[]);
    assert!(spec_read, "{notices:?}");
    assert!(
        notices
            .iter()
            .any(|notice| notice
                == "kiro-cli version: unknown (no `kiro-cli` on PATH); state it with --kiro-version X.Y.Z"),
        "{notices:?}"
    );
    assert!(notices.iter().any(|notice| notice.contains(unknown)), "{notices:?}");
    // A stated version wins over the installed one, which is not asked.
    let older = fake_kiro_cli(&fakes, "echo 'kiro-cli 2.22.0'");
    let (spec_read, notices) = project(&older, &["--kiro-version", "v2.23.0"]);
    assert!(spec_read, "{notices:?}");
    assert!(notices.iter().any(|notice| notice == "kiro-cli version: 2.23.0 (as stated with --kiro-version)"));
    // Another backend does not ask kiro-cli at all.
    let output = setup.run(&["project", "kas-native", "--backend", "claude", "--json"]);
    let projection: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(!projection["notices"].to_string().contains("kiro-cli version"), "{projection}");
    // A stated version that is not one is refused.
    for bad in ["latest", "2", "2.x.0", "1.2.3.4", ""] {
        let refused = setup.run(&["project", "kas-native", "--backend", "kiro-cli", "--kiro-version", bad]);
        assert!(!refused.status.success(), "{bad:?}");
        assert!(String::from_utf8_lossy(&refused.stderr).contains("is not a version like 2.23.0"), "{bad:?}");
    }
}
