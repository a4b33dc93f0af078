//! `cairn mcp list|probe|enable|disable|sync|import` and `/api/mcp*`:
//! sources merged with provenance, probes of real third-party servers and
//! of misbehaving ones (no process left behind), byte-preserving spec
//! edits, and every import rule.
//!
//! The real servers come from `.ci/run`: `CAIRN_TEST_MCP_TIME` is the
//! `mcp-server-time` executable (PyPI) and `CAIRN_TEST_MCP_EVERYTHING` the
//! `dist/index.js` of `@modelcontextprotocol/server-everything` (npm), run
//! with `node`. Without them a test that needs them fails under `CI=true`
//! and is skipped with a message otherwise.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cairn;
use crate::serve::start_in;

/// A user home (HOME) and a Cairn home inside one temporary directory.
struct Env {
    root: tempfile::TempDir,
}

impl Env {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("user/.kiro/agents")).unwrap();
        std::fs::create_dir_all(root.path().join("cairn")).unwrap();
        Self { root }
    }

    fn user(&self) -> PathBuf {
        self.root.path().join("user")
    }

    fn home(&self) -> PathBuf {
        self.root.path().join("cairn")
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.root.path().join(relative)
    }

    fn write(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    fn write_json(&self, relative: &str, value: &Value) -> PathBuf {
        self.write(relative, &serde_json::to_string_pretty(value).unwrap())
    }

    fn run(&self, args: &[&str]) -> Output {
        cairn()
            .arg("--home")
            .arg(self.home())
            .args(args)
            .env("HOME", self.user())
            .env_remove("CAIRN_HOME")
            .env("CAIRN_SKIP_MODEL_DOWNLOAD", "1")
            .output()
            .unwrap()
    }

    /// Runs a command that must succeed and parses its JSON.
    fn json(&self, args: &[&str]) -> Value {
        let output = self.run(args);
        assert!(output.status.success(), "cairn {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|error| panic!("cairn {args:?}: {error}: {}", String::from_utf8_lossy(&output.stdout)))
    }

    /// Runs a command that must fail; its stderr.
    fn fails(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(!output.status.success(), "cairn {args:?} succeeded: {}", String::from_utf8_lossy(&output.stdout));
        String::from_utf8_lossy(&output.stderr).into_owned()
    }
}

/// A launch command from the environment, or `None` (a failure under CI).
fn real_server(variable: &str) -> Option<PathBuf> {
    match std::env::var_os(variable).map(PathBuf::from) {
        Some(path) if path.exists() => Some(path),
        other => {
            let why = match other {
                Some(path) => format!("{variable}={} does not exist", path.display()),
                None => format!("{variable} is not set"),
            };
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{why} (.ci/run installs it)");
            eprintln!("skipped: {why}; run .ci/run (or install the server and export {variable})");
            None
        }
    }
}

fn by_name<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|item| item["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {list:#}"))
}

#[test]
fn mcp_list_merges_every_source_with_provenance_and_reports_malformed_ones() {
    let env = Env::new();
    let project = env.path("checkout");
    env.write_json(
        "user/.kiro/agents/dev.json",
        &json!({
            "name": "dev",
            "tools": ["fs_read", "@time"],
            "mcpServers": {"time": {"command": "own-time", "env": {"TZ_TOKEN": "s3cr3t-value-1"}}},
        }),
    );
    env.write_json("user/.kiro/agents/other.json", &json!({"name": "other", "mcpServers": ["not", "an", "object"]}));
    env.write("user/.kiro/agents/broken.json", "{ this is not json");
    env.write_json(
        "user/.kiro/settings/mcp.json",
        &json!({"mcpServers": {
            "time": {"command": "global-time"},
            "remote": {"url": "https://mcp.example.com/mcp?key=abc", "headers": {"Authorization": "Bearer s3cr3t-value-2"}},
            "bad": {"command": 3},
        }}),
    );
    env.write_json("checkout/.kiro/settings/mcp.json", &json!({"mcpServers": {"proj": {"command": "p"}}}));
    env.write("cairn/mcp.json", "{\"mcpServers\": ");
    let project_arg = project.to_str().unwrap();

    let listing = env.json(&["mcp", "list", "--json", "--agent", "dev", "--project", project_arg]);
    let servers = &listing["servers"];
    let names: Vec<&str> = servers.as_array().unwrap().iter().map(|server| server["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["time", "proj", "remote"], "the agent's own spec first, then the mcp.json files");
    let time = by_name(servers, "time");
    assert_eq!(time["source"]["kind"], "agent_spec");
    assert_eq!(time["command"], "own-time");
    assert_eq!(time["env_keys"], json!(["TZ_TOKEN"]));
    assert_eq!(time["also_defined_in"][0]["kind"], "kiro_global");
    assert_eq!(
        (time["enabled"].clone(), time["in_tools"].clone(), time["in_agent_spec"].clone()),
        (json!(true), json!(true), json!(true))
    );
    assert_eq!(by_name(servers, "proj")["source"]["kind"], "kiro_project");
    assert_eq!(by_name(servers, "proj")["enabled"], false);
    let remote = by_name(servers, "remote");
    assert_eq!(
        (remote["transport"].as_str(), remote["url"].as_str()),
        (Some("http"), Some("https://mcp.example.com/mcp?…"))
    );
    assert_eq!(remote["header_keys"], json!(["Authorization"]));

    let sources = listing["sources"].as_array().unwrap();
    let problems = |path: &Path| -> Vec<String> {
        let source = sources.iter().find(|source| source["path"] == path.to_str().unwrap()).unwrap();
        source["problems"].as_array().unwrap().iter().map(|problem| problem.as_str().unwrap().to_owned()).collect()
    };
    assert!(problems(&env.path("cairn/mcp.json"))[0].contains("not valid JSON"));
    assert!(problems(&env.path("user/.kiro/agents/other.json"))[0].contains("mcpServers"));
    assert!(!problems(&env.path("user/.kiro/agents/broken.json")).is_empty());
    assert!(problems(&env.path("user/.kiro/settings/mcp.json"))[0].contains("mcpServers.bad.command"));
    let text = listing.to_string();
    for secret in ["s3cr3t-value-1", "s3cr3t-value-2", "key=abc"] {
        assert!(!text.contains(secret), "{secret} leaked into the listing");
    }

    // Without an agent nothing says `enabled`, and an unknown agent is refused.
    let plain = env.json(&["mcp", "list", "--json"]);
    assert!(by_name(&plain["servers"], "time").get("enabled").is_none());
    assert!(env.fails(&["mcp", "list", "--agent", "nobody"]).contains("no agent named"));
}

/// Members of process group `pgid`, zombies included.
fn group_members(pgid: u32) -> Vec<u32> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        let Some((_, after_name)) = stat.rsplit_once(')') else { continue };
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        if fields.get(2).and_then(|group| group.parse::<u32>().ok()) == Some(pgid) {
            members.push(pid);
        }
    }
    members
}

fn pid_in(path: &Path) -> u32 {
    let started = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "{} was never written", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A shell server that records its pid, starts a grandchild in its group
/// (recording that pid too), then does `body`.
fn script_server(env: &Env, name: &str, body: &str) -> Value {
    let leader = env.path(&format!("{name}.pid"));
    let grandchild = env.path(&format!("{name}.child.pid"));
    let script =
        format!("echo $$ > '{}'\nsleep 300 &\necho $! > '{}'\n{body}\n", leader.display(), grandchild.display());
    let path = env.write(&format!("scripts/{name}.sh"), &script);
    json!({"command": "sh", "args": [path]})
}

#[test]
#[cfg(target_os = "linux")]
fn mcp_probe_gives_misbehaving_servers_their_own_status_and_leaves_no_process() {
    let env = Env::new();
    let initialize_answer = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"flood","version":"1"}}}"#;
    let servers = json!({
        "silent": script_server(&env, "silent", "sleep 300"),
        "garbage": script_server(&env, "garbage", "echo 'Server ready on stdio!'\nsleep 300"),
        "flood": script_server(
            &env,
            "flood",
            &format!("read line\necho '{initialize_answer}'\nread line\nread line\nhead -c 3000000 /dev/zero | tr '\\0' a\nsleep 300"),
        ),
        "quits": script_server(&env, "quits", "echo 'missing configuration' >&2\nexit 3"),
        "absent": {"command": env.path("no/such/server").to_str().unwrap()},
    });
    env.write_json("user/.kiro/settings/mcp.json", &json!({"mcpServers": servers}));

    let report = env.json(&["mcp", "probe", "--json", "--timeout-secs", "3"]);
    let results = &report["results"];
    let expected = [
        ("silent", "timeout", None, "no answer to `initialize`"),
        ("garbage", "error", Some("not_json_rpc"), "Server ready on stdio!"),
        ("flood", "error", Some("output_cap"), "more than 1048576 bytes"),
        ("quits", "error", Some("exited"), "missing configuration"),
        ("absent", "error", Some("spawn_failed"), "cannot start"),
    ];
    for (name, status, error, reason) in expected {
        let result = by_name(results, name);
        assert_eq!(result["status"], status, "{name}: {result}");
        assert_eq!(result["error"].as_str(), error, "{name}: {result}");
        assert!(result["reason"].as_str().unwrap().contains(reason), "{name}: {result}");
    }
    assert_eq!(by_name(results, "flood")["server_name"], Value::Null, "a failed probe reports no server");

    for name in ["silent", "garbage", "flood", "quits"] {
        let leader = pid_in(&env.path(&format!("{name}.pid")));
        assert_eq!(group_members(leader), Vec::<u32>::new(), "{name}: processes of its group are left");
        let grandchild = pid_in(&env.path(&format!("{name}.child.pid")));
        assert!(!Path::new(&format!("/proc/{grandchild}")).exists(), "{name}: its child {grandchild} is left");
    }
}

#[test]
fn mcp_probe_real_servers_answer_the_handshake() {
    let (Some(time), Some(everything)) = (real_server("CAIRN_TEST_MCP_TIME"), real_server("CAIRN_TEST_MCP_EVERYTHING"))
    else {
        return;
    };
    let env = Env::new();
    let own_home = env.path("own-home");
    env.write_json(
        "user/.kiro/settings/mcp.json",
        &json!({"mcpServers": {
            "time": {"command": time, "args": ["--local-timezone", "UTC"]},
            "everything": {"command": "node", "args": [everything, "stdio"]},
            "cairn-itself": {"command": env!("CARGO_BIN_EXE_cairn"), "args": ["--home", own_home, "mcp", "serve"]},
            "off": {"command": "sh", "args": ["-c", "exit 1"], "disabled": true},
        }}),
    );
    let report = env.json(&["mcp", "probe", "--json"]);
    let results = &report["results"];
    let time = by_name(results, "time");
    assert_eq!(time["status"], "ok", "{time}");
    assert_eq!(time["server_name"], "mcp-time");
    assert!(time["tools"].as_array().unwrap().contains(&json!("get_current_time")), "{time}");
    let everything = by_name(results, "everything");
    assert_eq!(everything["status"], "ok", "{everything}");
    assert!(everything["tools"].as_array().unwrap().contains(&json!("echo")), "{everything}");
    let own = by_name(results, "cairn-itself");
    assert_eq!(own["status"], "ok", "{own}");
    assert!(own["tools"].as_array().unwrap().contains(&json!("memory_search")), "{own}");
    assert_eq!(
        by_name(&report["skipped"], "off")["reason"].as_str().map(|reason| reason.contains("disabled")),
        Some(true)
    );
    assert!(results.as_array().unwrap().iter().all(|result| result["name"] != "off"));
    // A disabled server named explicitly is probed.
    let named = env.json(&["mcp", "probe", "--json", "--server", "off", "--timeout-secs", "10"]);
    assert_eq!(by_name(&named["results"], "off")["error"], "exited");
    assert!(env.fails(&["mcp", "probe", "--server", "nope"]).contains("no source defines"));
}

#[test]
#[cfg(unix)]
fn mcp_probe_reaches_a_streamable_http_server_on_loopback() {
    let Some(everything) = real_server("CAIRN_TEST_MCP_EVERYTHING") else { return };
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut server = std::process::Command::new("node")
        .arg(&everything)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < Duration::from_secs(60), "server-everything did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let env = Env::new();
    env.write_json(
        "cairn/mcp.json",
        &json!({"mcpServers": {
            "everything-http": {"url": format!("http://127.0.0.1:{port}/mcp")},
            "nobody-home": {"url": "http://127.0.0.1:9/mcp"},
        }}),
    );
    let report = env.json(&["mcp", "probe", "--json", "--timeout-secs", "20"]);
    let _ = server.kill();
    let _ = server.wait();
    let http = by_name(&report["results"], "everything-http");
    assert_eq!((http["status"].as_str(), http["transport"].as_str()), (Some("ok"), Some("http")), "{http}");
    assert!(http["tools"].as_array().unwrap().contains(&json!("echo")), "{http}");
    assert_eq!(by_name(&report["results"], "nobody-home")["error"], "http");
}

const DEV_SPEC: &str = "{\n  \"name\": \"dev\",\n  \"prompt\":   \"Be brief.\" ,\n  \"tools\": [\"fs_read\"],\n  \"mcpServers\": {\n    \"git\": { \"command\": \"git-mcp\" }\n  },\n  \"x-custom\": {\"kept\" :  [1,2]}\n}\n";

#[test]
fn mcp_enable_and_disable_edit_only_the_tool_lists() {
    let env = Env::new();
    let spec = env.write("user/.kiro/agents/dev.json", DEV_SPEC);
    env.write_json("user/.kiro/settings/mcp.json", &json!({"mcpServers": {"time": {"command": "t"}}}));

    let enabled = env.json(&["mcp", "enable", "time", "--agent", "dev", "--json"]);
    assert_eq!(enabled["changed"], true);
    assert!(enabled["notices"][0].as_str().unwrap().contains("cairn mcp sync"), "{enabled}");
    let after_enable = std::fs::read_to_string(&spec).unwrap();
    assert_eq!(
        after_enable,
        DEV_SPEC
            .replace("[\"fs_read\"]", "[\"fs_read\", \"@time\"]")
            .replace("{\"kept\" :  [1,2]}\n}", "{\"kept\" :  [1,2]},\n  \"allowedTools\": [\"@time\"]\n}")
    );
    let again = env.json(&["mcp", "enable", "time", "--agent", "dev", "--json"]);
    assert_eq!(again["changed"], false, "enabling twice changes nothing");
    let listed = env.json(&["mcp", "list", "--json", "--agent", "dev"]);
    assert_eq!(by_name(&listed["servers"], "time")["enabled"], true);

    let disabled = env.json(&["mcp", "disable", "time", "--agent", "dev", "--json"]);
    assert_eq!(disabled["changed"], true);
    assert_eq!(
        std::fs::read_to_string(&spec).unwrap(),
        after_enable.replace("[\"fs_read\", \"@time\"]", "[\"fs_read\"]").replace("[\"@time\"]", "[]")
    );
    let listed = env.json(&["mcp", "list", "--json", "--agent", "dev"]);
    assert_eq!(by_name(&listed["servers"], "time")["enabled"], false);
}

#[test]
fn mcp_enable_refuses_specs_it_must_not_edit() {
    let env = Env::new();
    let project = env.path("checkout");
    env.write_json("checkout/.kiro/agents/proj.json", &json!({"name": "proj", "tools": []}));
    env.write("user/.kiro/agents/md.md", "---\nname: md\ntools: [read]\n---\nHi\n");
    let malformed = env.write("user/.kiro/agents/odd.json", "{\"name\": \"odd\", \"tools\": \"fs_read\"}");
    env.write("user/.kiro/agents/dev.json", DEV_SPEC);
    env.write_json("user/.kiro/settings/mcp.json", &json!({"mcpServers": {"time": {"command": "t"}}}));
    let project_arg = project.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["mcp", "enable", "time", "--agent", "proj", "--project", project_arg], "project_spec_readonly"),
        (&["mcp", "enable", "time", "--agent", "md"], "markdown_spec_readonly"),
        (&["mcp", "enable", "time", "--agent", "odd"], "spec_unreadable"),
        (&["mcp", "enable", "nope", "--agent", "dev"], "unknown_server"),
        (&["mcp", "enable", "time"], "name the agent whose spec to edit: one of dev, md, odd (agent_required)"),
        (&["mcp", "disable", "time", "--agent", "ghost"], "no agent named"),
    ];
    for (args, expected) in cases {
        let stderr = env.fails(args);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    assert_eq!(std::fs::read_to_string(&malformed).unwrap(), "{\"name\": \"odd\", \"tools\": \"fs_read\"}");
    assert_eq!(std::fs::read_to_string(env.path("user/.kiro/agents/dev.json")).unwrap(), DEV_SPEC);
}

#[test]
fn mcp_sync_adds_missing_servers_and_existing_definitions_win() {
    let env = Env::new();
    let spec = env.write("user/.kiro/agents/dev.json", DEV_SPEC);
    env.write_json(
        "user/.kiro/settings/mcp.json",
        &json!({"mcpServers": {"git": {"command": "other-git"}, "time": {"command": "t", "args": ["--utc"]}}}),
    );
    env.write_json("cairn/mcp.json", &json!({"mcpServers": {"web": {"url": "https://mcp.example.com/mcp"}}}));

    let dry = env.json(&["mcp", "sync", "--agent", "dev", "--dry-run", "--json"]);
    assert_eq!((dry["added"].clone(), dry["kept"].clone()), (json!(["time", "web"]), json!(["git"])));
    assert_eq!(std::fs::read_to_string(&spec).unwrap(), DEV_SPEC, "a dry run writes nothing");

    let synced = env.json(&["mcp", "sync", "--agent", "dev", "--json"]);
    assert_eq!(synced["added"], json!(["time", "web"]));
    let text = std::fs::read_to_string(&spec).unwrap();
    assert!(text.starts_with("{\n  \"name\": \"dev\",\n  \"prompt\":   \"Be brief.\" ,\n  \"tools\": [\"fs_read\"],\n  \"mcpServers\": {\n    \"git\": { \"command\": \"git-mcp\" },\n    \"time\": {"), "{text}");
    assert!(text.ends_with("\n  },\n  \"x-custom\": {\"kept\" :  [1,2]}\n}\n"), "{text}");
    let value: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["mcpServers"]["git"]["command"], "git-mcp");
    assert_eq!(value["mcpServers"]["time"], json!({"command": "t", "args": ["--utc"]}));
    let again = env.json(&["mcp", "sync", "--agent", "dev", "--json"]);
    assert_eq!(again["added"], json!([]));

    // A destination `mcpServers` that is not an object is a conflict, kept byte for byte.
    let odd = "{\"name\": \"odd\", \"mcpServers\": [\"x\"]}";
    let odd_path = env.write("user/.kiro/agents/odd.json", odd);
    assert!(env.fails(&["mcp", "sync", "--agent", "odd"]).contains("not an object"));
    assert_eq!(std::fs::read_to_string(odd_path).unwrap(), odd);
}

#[test]
fn mcp_edits_default_to_the_only_agent_and_name_the_choices_when_there_are_several() {
    let env = Env::new();
    let none = env.fails(&["mcp", "enable", "git"]);
    assert!(none.contains("there is no agent spec to edit") && none.contains("(agent_required)"), "{none}");

    let spec = env.write("user/.kiro/agents/dev.json", DEV_SPEC);
    let enabled = env.json(&["mcp", "enable", "git", "--json"]);
    assert_eq!((enabled["agent"].clone(), enabled["changed"].clone()), (json!("dev"), json!(true)), "{enabled}");
    let loaded: Value = serde_json::from_str(&std::fs::read_to_string(&spec).unwrap()).unwrap();
    assert_eq!(loaded["tools"], json!(["fs_read", "@git"]));
    env.write_json("cairn/mcp.json", &json!({"mcpServers": {"time": {"command": "mcp-server-time"}}}));
    let synced = env.json(&["mcp", "sync", "--dry-run", "--json"]);
    assert_eq!(synced["added"], json!(["time"]), "{synced}");

    // A second agent: nothing is guessed, nothing is written.
    env.write("user/.kiro/agents/ops.json", "{\"name\": \"ops\"}");
    let before = std::fs::read_to_string(&spec).unwrap();
    for args in [&["mcp", "disable", "git"][..], &["mcp", "sync"][..]] {
        let refused = env.fails(args);
        assert!(refused.contains("name the agent whose spec to edit: one of dev, ops (agent_required)"), "{refused}");
    }
    assert_eq!(std::fs::read_to_string(&spec).unwrap(), before);
}

#[test]
fn a_gateway_probes_the_enabled_servers_once_at_start() {
    let env = Env::new();
    let started = env.path("started");
    let muted = env.path("muted");
    let touch = |marker: &Path| json!({"command": "sh", "args": ["-c", format!("touch '{}'", marker.display())]});
    let mut quiet = touch(&muted);
    quiet["disabled"] = json!(true);
    env.write_json("cairn/mcp.json", &json!({"mcpServers": {"marker": touch(&started), "quiet": quiet}}));
    let port_file = env.path("port");
    let mut gateway = cairn()
        .arg("--home")
        .arg(env.home())
        .args(["serve", "--port", "0", "--heartbeat-secs", "3600", "--port-file"])
        .arg(&port_file)
        .env("HOME", env.user())
        .env_remove("CAIRN_HOME")
        .env("CAIRN_SKIP_MODEL_DOWNLOAD", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // No request is made: the gateway starts the server by itself.
    let waited = std::time::Instant::now();
    while !started.exists() && waited.elapsed() < crate::serve::PATIENCE {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = gateway.kill();
    let _ = gateway.wait();
    assert!(started.exists(), "the enabled server was not probed at start");
    assert!(!muted.exists(), "a disabled server was started");
}

#[test]
fn mcp_enable_clears_the_disabled_flag_import_and_sync_wrote() {
    let env = Env::new();
    let spec = env.write("user/.kiro/agents/dev.json", DEV_SPEC);
    env.write_json(
        "user/.claude.json",
        &json!({"mcpServers": {"fetch": {"command": "uvx", "args": ["mcp-server-fetch"]}}}),
    );
    let imported = env.json(&["mcp", "import", "--from", "claude-code", "--json"]);
    assert_eq!(by_name(&imported["decisions"], "fetch")["decision"], "imported", "{imported}");
    let synced = env.json(&["mcp", "sync", "--agent", "dev", "--json"]);
    assert_eq!(synced["added"], json!(["fetch"]));
    let loaded: Value = serde_json::from_str(&std::fs::read_to_string(&spec).unwrap()).unwrap();
    assert_eq!(loaded["mcpServers"]["fetch"]["disabled"], true, "sync copies the import's flag");

    // Bad input: an unknown server is refused and the spec is not touched.
    let before = std::fs::read_to_string(&spec).unwrap();
    let stderr = env.fails(&["mcp", "enable", "fetcher", "--agent", "dev"]);
    assert!(stderr.contains("no source defines an MCP server named \"fetcher\" (unknown_server)"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&spec).unwrap(), before);

    let output = env.run(&["mcp", "enable", "fetch", "--agent", "dev"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("removed `disabled: true` from fetch"), "{stdout}");
    // The spec as kiro-cli's loader reads it: plain JSON, the entry unmuted, the server granted.
    let text = std::fs::read_to_string(&spec).unwrap();
    let loaded: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(loaded["mcpServers"]["fetch"], json!({"command": "uvx", "args": ["mcp-server-fetch"]}), "{text}");
    assert_eq!(loaded["mcpServers"]["git"], json!({"command": "git-mcp"}), "other entries are kept");
    assert_eq!(loaded["tools"], json!(["fs_read", "@fetch"]));
    assert_eq!(loaded["allowedTools"], json!(["@fetch"]));
    assert!(
        text.starts_with("{\n  \"name\": \"dev\",\n  \"prompt\":   \"Be brief.\" ,"),
        "other bytes are kept: {text}"
    );
    let listed = env.json(&["mcp", "list", "--json", "--agent", "dev"]);
    let fetch = by_name(&listed["servers"], "fetch");
    assert_eq!((fetch["enabled"].clone(), fetch["disabled"].clone()), (json!(true), json!(false)), "{fetch}");
    let again = env.json(&["mcp", "enable", "fetch", "--agent", "dev", "--json"]);
    assert_eq!((again["changed"].clone(), again["cleared_disabled"].clone()), (json!(false), json!(false)));

    // Disabling removes the grants and leaves the entry alone.
    env.json(&["mcp", "disable", "fetch", "--agent", "dev", "--json"]);
    let loaded: Value = serde_json::from_str(&std::fs::read_to_string(&spec).unwrap()).unwrap();
    assert_eq!(loaded["mcpServers"]["fetch"], json!({"command": "uvx", "args": ["mcp-server-fetch"]}));
    assert_eq!(loaded["tools"], json!(["fs_read"]));
}

/// The order a user may take as well: import, enable, then sync. The
/// grant came first, so the synced entry arrives enabled.
#[test]
fn mcp_import_enable_then_sync_leaves_the_server_enabled_for_kiro_cli() {
    let env = Env::new();
    let spec = env.write("user/.kiro/agents/dev.json", DEV_SPEC);
    env.write_json(
        "user/.claude.json",
        &json!({"mcpServers": {"fetch": {"command": "uvx", "args": ["mcp-server-fetch"]}, "other": {"command": "o"}}}),
    );
    let imported = env.json(&["mcp", "import", "--from", "claude-code", "--json"]);
    assert_eq!(by_name(&imported["decisions"], "fetch")["decision"], "imported", "{imported}");
    let enabled = env.json(&["mcp", "enable", "fetch", "--agent", "dev", "--json"]);
    assert_eq!(enabled["changed"], true, "{enabled}");
    let synced = env.json(&["mcp", "sync", "--agent", "dev", "--json"]);
    assert_eq!(synced["added"], json!(["fetch", "other"]), "{synced}");
    // The spec as kiro-cli's loader reads it: plain JSON, the granted server
    // unmuted; the one not granted keeps the import's flag.
    let loaded: Value = serde_json::from_str(&std::fs::read_to_string(&spec).unwrap()).unwrap();
    assert_eq!(loaded["mcpServers"]["fetch"], json!({"command": "uvx", "args": ["mcp-server-fetch"]}), "{loaded}");
    assert_eq!(loaded["mcpServers"]["other"], json!({"command": "o", "disabled": true}), "{loaded}");
    assert_eq!(loaded["tools"], json!(["fs_read", "@fetch"]));
    let listed = env.json(&["mcp", "list", "--json", "--agent", "dev"]);
    let fetch = by_name(&listed["servers"], "fetch");
    assert_eq!((fetch["enabled"].clone(), fetch["disabled"].clone()), (json!(true), json!(false)), "{fetch}");
    assert!(fetch.get("warning").is_none_or(Value::is_null), "{fetch}");
}

#[test]
fn mcp_list_does_not_call_a_granted_server_enabled_while_it_is_disabled() {
    let env = Env::new();
    // Granted through a wildcard, muted in the spec itself.
    env.write_json(
        "user/.kiro/agents/ops.json",
        &json!({"name": "ops", "tools": ["*"], "mcpServers": {"fetch": {"command": "uvx", "disabled": true}}}),
    );
    // Granted by name, muted in the included `mcp.json`.
    env.write_json("user/.kiro/agents/web.json", &json!({"name": "web", "tools": ["@docs"], "includeMcpJson": true}));
    env.write_json(
        "user/.kiro/settings/mcp.json",
        &json!({"mcpServers": {"docs": {"url": "https://docs.example.com/mcp", "disabled": true}}}),
    );
    for (agent, server, muted_in) in [("ops", "fetch", "ops.json"), ("web", "docs", "settings/mcp.json")] {
        let listed = env.json(&["mcp", "list", "--json", "--agent", agent]);
        let row = by_name(&listed["servers"], server);
        assert_eq!(row["enabled"], false, "{row}");
        let warning = row["warning"].as_str().unwrap_or_else(|| panic!("no warning: {row}"));
        assert!(warning.contains("disabled: true") && warning.contains(muted_in), "{warning}");
        let output = env.run(&["mcp", "list", "--agent", agent]);
        assert!(String::from_utf8_lossy(&output.stderr).contains("warning: `tools` grants"), "{output:?}");
    }
    // Enabling can clear only the spec's own flag; the included file's is named.
    let enabled = env.json(&["mcp", "enable", "docs", "--agent", "web", "--json"]);
    assert_eq!(enabled["cleared_disabled"], false);
    assert!(enabled["notices"][0].as_str().unwrap().contains("settings/mcp.json"), "{enabled}");
    let enabled = env.json(&["mcp", "enable", "fetch", "--agent", "ops", "--json"]);
    assert_eq!(enabled["cleared_disabled"], true);
    let listed = env.json(&["mcp", "list", "--json", "--agent", "ops"]);
    assert_eq!(by_name(&listed["servers"], "fetch")["enabled"], true);
    assert!(by_name(&listed["servers"], "fetch").get("warning").is_none());
}

const SECRETS: &[&str] =
    &["ghp_s3cr3tS3cr3tS3cr3tS3cr3tS3cr3tS3cr3", "Bearer hunter2-token", "cookie-value-77", "query-secret-99"];

fn foreign_configs(env: &Env) {
    env.write_json(
        "user/.claude.json",
        &json!({
            "numStartups": 3,
            "mcpServers": {
                "Fetch_Tool": {"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch"]},
                "with-env": {"command": "npx", "args": ["-y", "server-github"], "env": {"GITHUB_TOKEN": SECRETS[0]}},
                "with-headers": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": SECRETS[1]}},
                "mixed": {"command": "x", "url": "https://mcp.example.com/mcp"},
                "remote-args": {"url": "https://mcp.example.com/mcp", "args": ["--verbose"]},
                "queried": {"url": format!("https://mcp.example.com/mcp?k={}", SECRETS[3])},
                "cookie-jar": {"url": "https://mcp.example.com/mcp", "cookie": SECRETS[2]},
                "with-cwd": {"command": "x", "cwd": "/tmp"},
                "docs": {"type": "http", "url": "https://docs.example.com/mcp"},
                "TIME": {"command": "uvx", "args": ["mcp-server-time"]},
                "Cairn": {"command": "cairn", "args": ["mcp", "serve"]},
            },
            "projects": {
                "/work/app": {"mcpServers": {"app-db": {"command": "db-mcp"}, "fetch-tool": {"command": "uvx", "args": ["mcp-server-fetch"]}}},
            },
        }),
    );
    env.write(
        "user/.hermes/config.yaml",
        "model: x\nmcp_servers:\n  github:\n    command: npx\n    args: [\"-y\", \"@modelcontextprotocol/server-github\"]\n    tools:\n      include: [list_issues]\n  notes:\n    command: notes-mcp\n    enabled: false\n  slow:\n    command: slow-mcp\n    timeout: 120\n",
    );
    env.write_json(
        "user/.openclaw/openclaw.json",
        &json!({"mcp": {"servers": {
            "claw-fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"], "transport": "stdio"},
            "claw-sse": {"url": "https://claw.example.com/sse", "transport": "sse"},
        }}}),
    );
    // An effective source: its names are reserved.
    env.write_json("user/.kiro/settings/mcp.json", &json!({"mcpServers": {"time": {"command": "t"}}}));
}

#[test]
fn mcp_import_applies_every_rule_and_never_shows_a_secret() {
    let env = Env::new();
    foreign_configs(&env);
    let output = env.run(&["mcp", "import", "--dry-run", "--json"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    for secret in SECRETS {
        assert!(!stdout.contains(secret), "{secret} leaked: {stdout}");
    }
    let report: Value = serde_json::from_str(&stdout).unwrap();
    let decision = |name: &str| -> (String, String) {
        let row = by_name(&report["decisions"], name);
        (row["decision"].as_str().unwrap().to_owned(), row["reason"].as_str().unwrap().to_owned())
    };
    let expected: &[(&str, &str, &str)] = &[
        ("Fetch_Tool", "would_import", "single supported transport"),
        ("docs", "would_import", "single supported transport"),
        ("app-db", "would_import", "single supported transport"),
        ("notes", "would_import", "single supported transport"),
        ("claw-fs", "would_import", "single supported transport"),
        ("with-env", "rejected", "environment"),
        ("with-headers", "rejected", "headers"),
        ("mixed", "rejected", "mixed transports"),
        ("remote-args", "rejected", "remote arguments"),
        ("queried", "rejected", "query or fragment"),
        ("cookie-jar", "rejected", "credential, token or cookie"),
        ("with-cwd", "rejected", "working directory"),
        ("github", "rejected", "filters tools"),
        ("slow", "rejected", "does not import"),
        ("claw-sse", "rejected", "`sse` transport"),
        ("TIME", "collision", "`time` is taken by `time` in"),
        ("Cairn", "collision", "Cairn's own server"),
        ("fetch-tool", "duplicate", "same name in this import"),
    ];
    for (name, want_decision, want_reason) in expected {
        let (got, reason) = decision(name);
        assert_eq!(&got, want_decision, "{name}: {reason}");
        assert!(reason.contains(want_reason), "{name}: {reason:?} does not say {want_reason:?}");
    }
    assert_eq!(by_name(&report["decisions"], "Fetch_Tool")["imported_as"], "fetch-tool");
    assert_eq!(by_name(&report["decisions"], "app-db")["scope"], "local /work/app");
    assert_eq!(report["decisions"].as_array().unwrap().len(), expected.len());
    assert!(!env.path("cairn/mcp.json").exists(), "a dry run writes nothing");

    let applied = env.json(&["mcp", "import", "--json"]);
    assert_eq!(applied["written"], true);
    let written: Value = serde_json::from_str(&std::fs::read_to_string(env.path("cairn/mcp.json")).unwrap()).unwrap();
    assert_eq!(
        written["mcpServers"],
        json!({
            "fetch-tool": {"command": "uvx", "args": ["mcp-server-fetch"], "disabled": true},
            "docs": {"url": "https://docs.example.com/mcp", "disabled": true},
            "app-db": {"command": "db-mcp", "disabled": true},
            "notes": {"command": "notes-mcp", "disabled": true},
            "claw-fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"], "disabled": true},
        })
    );
    let ledger = std::fs::read_to_string(env.path("cairn/mcp-import-ledger.json")).unwrap();
    for secret in SECRETS {
        assert!(!ledger.contains(secret), "{secret} reached the ledger");
    }
    assert_eq!(serde_json::from_str::<Value>(&ledger).unwrap()["imports"].as_array().unwrap().len(), 5);

    // A re-import changes nothing: every earlier import is in the ledger.
    let before = std::fs::read(env.path("cairn/mcp.json")).unwrap();
    let again = env.json(&["mcp", "import", "--json"]);
    assert_eq!(again["written"], false);
    for name in ["Fetch_Tool", "docs", "app-db", "notes", "claw-fs"] {
        assert_eq!(by_name(&again["decisions"], name)["decision"], "already_imported", "{name}");
    }
    assert_eq!(std::fs::read(env.path("cairn/mcp.json")).unwrap(), before);
    // The imported servers are listed, disabled, and skipped by a probe of everything.
    let listed = env.json(&["mcp", "list", "--json"]);
    assert_eq!(by_name(&listed["servers"], "docs")["disabled"], true);
}

#[test]
fn mcp_import_into_a_malformed_destination_is_a_conflict_kept_byte_for_byte() {
    let env = Env::new();
    foreign_configs(&env);
    for malformed in ["{\"mcpServers\": {\"a\": ", "{\"mcpServers\": [1, 2]}\n"] {
        let destination = env.write("cairn/mcp.json", malformed);
        let report = env.json(&["mcp", "import", "--from", "claude-code", "--json"]);
        assert_eq!(report["written"], false);
        let fetch = by_name(&report["decisions"], "Fetch_Tool");
        assert_eq!(fetch["decision"], "conflict", "{fetch}");
        assert!(fetch["reason"].as_str().unwrap().contains("malformed"));
        assert_eq!(std::fs::read_to_string(&destination).unwrap(), malformed);
        assert!(!env.path("cairn/mcp-import-ledger.json").exists());
    }
    assert!(env.fails(&["mcp", "import", "--file", "x.json"]).contains("exactly one"));
    // A foreign file that is not valid is reported and contributes nothing.
    env.write("cairn/mcp.json", "{}");
    env.write("bad.yaml", "mcp_servers: [unclosed\n");
    let report =
        env.json(&["mcp", "import", "--from", "hermes", "--file", env.path("bad.yaml").to_str().unwrap(), "--json"]);
    assert!(report["files"][0]["problem"].as_str().unwrap().contains("YAML"), "{report}");
    assert_eq!(report["decisions"], json!([]));
}

#[test]
#[cfg(target_os = "linux")]
fn serve_mcp_endpoints_list_probe_toggle_sync_and_import() {
    let env = Env::new();
    env.write("user/.kiro/agents/dev.json", DEV_SPEC);
    let mut servers = json!({
        "garbage": {"command": "sh", "args": ["-c", "echo nope; sleep 30"]},
    });
    if let Some(time) = real_server("CAIRN_TEST_MCP_TIME") {
        servers["time"] = json!({"command": time});
    }
    env.write_json("user/.kiro/settings/mcp.json", &json!({"mcpServers": servers}));
    env.write_json(
        "user/.claude.json",
        &json!({"mcpServers": {"docs": {"type": "http", "url": "https://docs.example.com/mcp"}}}),
    );
    let Env { root } = env;
    let user = root.path().join("user");
    let gateway_home = tempfile::tempdir().unwrap();
    let gateway = start_in(gateway_home, &[], &[("HOME", user.to_str().unwrap())]);

    let listing = gateway.get("/api/mcp?agent=dev");
    assert_eq!(listing.status, 200, "{:?}", listing.body);
    assert_eq!(listing.body["agent"]["name"], "dev");
    assert_eq!(by_name(&listing.body["servers"], "git")["enabled"], false);
    assert_eq!(gateway.get("/api/mcp?agent=ghost").code(), "agent_not_found");
    assert_eq!(gateway.get("/api/mcp?color=red").status, 400);

    // The answer comes at once: empty or probing, or already fresh when the
    // probe the gateway starts with has finished (fast servers here).
    let first = gateway.get("/api/mcp/probe");
    assert_eq!(first.status, 200);
    assert!(
        first.body["state"] == "empty" || first.body["probing"] == true || first.body["state"] == "fresh",
        "{:?}",
        first.body
    );
    let cached = gateway.wait_for("/api/mcp/probe", "a cached probe", |body| body["state"] == "fresh");
    assert_eq!(by_name(&cached["results"], "garbage")["error"], "not_json_rpc");
    if servers.get("time").is_some() {
        assert_eq!(by_name(&cached["results"], "time")["status"], "ok");
    }
    let fresh = gateway.send("POST", "/api/mcp/probe", &json!({"servers": ["garbage"], "timeout_secs": 10}));
    assert_eq!(fresh.status, 200, "{:?}", fresh.body);
    assert_eq!(fresh.body["results"].as_array().unwrap().len(), 1);
    for (body, code) in [
        (json!({"timeout_secs": 0}), "invalid_timeout"),
        (json!({"servers": ["nope"]}), "probe_refused"),
        (json!({"everything": true}), "invalid_body"),
    ] {
        assert_eq!(gateway.send("POST", "/api/mcp/probe", &body).code(), code, "{body}");
    }

    let toggled = gateway.send("POST", "/api/mcp/toggle", &json!({"agent": "dev", "server": "git", "enabled": true}));
    assert_eq!(toggled.status, 200, "{:?}", toggled.body);
    assert_eq!(toggled.body["changed"], true);
    let listing = gateway.get("/api/mcp?agent=dev");
    assert_eq!(by_name(&listing.body["servers"], "git")["enabled"], true);
    for (body, code) in [
        (json!({"agent": "dev", "server": "nope", "enabled": true}), "unknown_server"),
        (json!({"agent": "ghost", "server": "git", "enabled": true}), "agent_not_found"),
        (json!({"agent": "dev", "server": "git"}), "invalid_body"),
    ] {
        assert_eq!(gateway.send("POST", "/api/mcp/toggle", &body).code(), code, "{body}");
    }

    let synced = gateway.send("POST", "/api/mcp/sync", &json!({"agent": "dev"}));
    assert_eq!(synced.status, 200, "{:?}", synced.body);
    assert!(synced.body["added"].as_array().unwrap().contains(&json!("garbage")));

    let dry = gateway.send("POST", "/api/mcp/import", &json!({"from": ["claude_code"], "dry_run": true}));
    assert_eq!(dry.status, 200, "{:?}", dry.body);
    assert_eq!(by_name(&dry.body["decisions"], "docs")["decision"], "would_import");
    let applied = gateway.send("POST", "/api/mcp/import", &json!({"from": ["claude_code"]}));
    assert_eq!(by_name(&applied.body["decisions"], "docs")["decision"], "imported");
    assert_eq!(gateway.send("POST", "/api/mcp/import", &json!({"from": ["nobody"]})).code(), "invalid_body");
    // The imported server reaches the spec muted; enabling it unmutes it.
    let synced = gateway.send("POST", "/api/mcp/sync", &json!({"agent": "dev"}));
    assert_eq!(synced.body["added"], json!(["docs"]), "{:?}", synced.body);
    let toggled = gateway.send("POST", "/api/mcp/toggle", &json!({"agent": "dev", "server": "docs", "enabled": true}));
    assert_eq!(toggled.body["cleared_disabled"], true, "{:?}", toggled.body);
    let spec: Value =
        serde_json::from_str(&std::fs::read_to_string(user.join(".kiro/agents/dev.json")).unwrap()).unwrap();
    assert_eq!(spec["mcpServers"]["docs"], json!({"url": "https://docs.example.com/mcp"}));
    drop(root);
}
