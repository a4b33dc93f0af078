//! `cairn host install|uninstall <host>`: add (or remove) the MCP server
//! entry and the lifecycle hook entries in a host's own config files.
//!
//! - `claude-code`: hooks in `~/.claude/settings.json` and the MCP server in
//!   `~/.claude.json` (user scope), or with `--project DIR` in
//!   `DIR/.claude/settings.json` and `DIR/.mcp.json`.
//! - `kiro-cli --agent NAME`: the agent spec `NAME.json` in the agents
//!   directory (`agent.agents_dir`, else `~/.kiro/agents`) gets the
//!   `mcpServers.cairn` entry (`cairn mcp serve --agent NAME`, so the
//!   agent's `skill_search` finds only its own skills), `agentSpawn`,
//!   `userPromptSubmit` and `postToolUse` hooks (`cairn hook kiro-cli
//!   <event> --agent NAME`, so the context is the agent's), and `@cairn` in
//!   its `tools` when it lists tools. Entries an earlier install wrote
//!   without `--agent` for this binary and home are replaced (install) or
//!   removed (uninstall).
//!
//! Files are merged, never clobbered: unknown keys and other entries stay,
//! an entry already present is not added twice, and a file that is not a
//! JSON object is refused. Each changed file is written atomically after a
//! copy of the previous file is kept beside it (`<file>.cairn.bak`).
//! `--dry-run` prints the unified diff and writes nothing. `uninstall`
//! removes exactly the entries `install` adds for this binary and home
//! (compared by value), and nothing else.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use serde_json::{Map, Value, json};

use crate::home::Home;

/// `cairn host ...`
#[derive(Debug, clap::Subcommand)]
pub(crate) enum HostCommand {
    /// Add Cairn's MCP server and hooks to a host's config.
    Install(HostArgs),
    /// Remove what `install` added.
    Uninstall(HostArgs),
}

/// The host and where its config lives.
#[derive(Debug, clap::Args)]
pub(crate) struct HostArgs {
    /// `claude-code` or `kiro-cli`.
    #[arg(value_enum)]
    pub(crate) host: crate::host::HostName,
    /// Claude Code: configure this project (`.claude/settings.json`, `.mcp.json`) instead of the user.
    #[arg(long, value_name = "DIR")]
    pub(crate) project: Option<PathBuf>,
    /// kiro-cli: the agent spec to configure (`<agents dir>/<NAME>.json`).
    #[arg(long, value_name = "NAME")]
    pub(crate) agent: Option<String>,
    /// Print the changes as a unified diff and write nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
}

/// The name of Cairn's MCP server entry in host configs.
const SERVER_NAME: &str = "cairn";
use crate::host::{CLAUDE_EVENTS, KIRO_EVENTS};

/// The change one config file gets, applied to its text as read (under
/// the file's lock when it is written).
type Change = Box<dyn Fn(&mut Value, &Path) -> anyhow::Result<()>>;

/// One config file and its change.
struct Edit {
    path: PathBuf,
    change: Change,
}

impl Edit {
    fn new(path: PathBuf, change: impl Fn(&mut Value, &Path) -> anyhow::Result<()> + 'static) -> Self {
        Self { path, change: Box::new(change) }
    }

    /// The file's value before (`None`: no file) and after the change, from `text`.
    fn plan(&self, text: Option<&str>) -> anyhow::Result<(Option<Value>, Value)> {
        let before = parse(&self.path, text)?;
        let mut after = before.clone().unwrap_or_else(|| Value::Object(Map::new()));
        (self.change)(&mut after, &self.path)?;
        Ok((before, after))
    }
}

fn shell_quote(text: &str) -> String {
    if !text.is_empty() && text.chars().all(|ch| ch.is_ascii_alphanumeric() || "/._-+=:@".contains(ch)) {
        return text.to_owned();
    }
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// How host configs start Cairn: this binary, with this home.
struct Invocation {
    exe: String,
    home: String,
}

impl Invocation {
    fn current(home: &Home) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("locating the cairn binary")?;
        let exe = exe.canonicalize().unwrap_or(exe);
        home.ensure_dir()?;
        let dir = home.dir().canonicalize().unwrap_or_else(|_| home.dir().to_owned());
        Ok(Self { exe: exe.to_string_lossy().into_owned(), home: dir.to_string_lossy().into_owned() })
    }

    fn hook_command(&self, host: &str, event: &str) -> String {
        format!("{} --home {} hook {host} {event}", shell_quote(&self.exe), shell_quote(&self.home))
    }

    /// A kiro-cli hook of agent `name`: its context is scoped to the agent.
    fn agent_hook_command(&self, event: &str, name: &str) -> String {
        format!("{} --agent {}", self.hook_command("kiro-cli", event), shell_quote(name))
    }

    fn mcp_server(&self) -> Value {
        json!({"command": self.exe, "args": ["--home", self.home, "mcp", "serve"]})
    }

    /// The MCP server of agent `name`: its `skill_search` is scoped to the agent.
    fn agent_mcp_server(&self, name: &str) -> Value {
        json!({"command": self.exe, "args": ["--home", self.home, "mcp", "serve", "--agent", name]})
    }
}

/// A config file's text as a JSON object (`None`: no file); anything
/// else is refused, so a file Cairn cannot read is never clobbered.
fn parse(path: &Path, text: Option<&str>) -> anyhow::Result<Option<Value>> {
    let Some(text) = text else { return Ok(None) };
    let value: Value = if text.trim().is_empty() {
        Value::Object(Map::new())
    } else {
        serde_json::from_str(text)
            .with_context(|| format!("{} is not valid JSON; fix it first, nothing was changed", path.display()))?
    };
    if !value.is_object() {
        bail!("{} is not a JSON object; nothing was changed", path.display());
    }
    Ok(Some(value))
}

/// The file's text, or `None` when there is none.
fn read(path: &Path) -> anyhow::Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error).with_context(|| format!("reading {}", path.display())),
    }
}

/// `object[key]` as an object, created when absent; an error when it is something else.
fn object_at<'a>(value: &'a mut Value, key: &str, path: &Path) -> anyhow::Result<&'a mut Map<String, Value>> {
    let map = value.as_object_mut().expect("checked to be an object");
    let entry = map.entry(key.to_owned()).or_insert_with(|| Value::Object(Map::new()));
    entry
        .as_object_mut()
        .with_context(|| format!("`{key}` in {} is not an object; nothing was changed", path.display()))
}

fn array_at<'a>(map: &'a mut Map<String, Value>, key: &str, path: &Path) -> anyhow::Result<&'a mut Vec<Value>> {
    let entry = map.entry(key.to_owned()).or_insert_with(|| Value::Array(Vec::new()));
    entry.as_array_mut().with_context(|| format!("`{key}` in {} is not an array; nothing was changed", path.display()))
}

fn set_server(value: &mut Value, key: &str, server: Value, path: &Path, install: bool) -> anyhow::Result<()> {
    let servers = object_at(value, key, path)?;
    if install {
        match servers.get(SERVER_NAME) {
            Some(existing) if *existing != server => bail!(
                "{} already has a different `{key}.{SERVER_NAME}` entry; remove it first (nothing was changed)",
                path.display()
            ),
            _ => {
                servers.insert(SERVER_NAME.to_owned(), server);
            }
        }
    } else if servers.get(SERVER_NAME) == Some(&server) {
        servers.remove(SERVER_NAME);
    }
    if servers.is_empty() {
        value.as_object_mut().expect("an object").remove(key);
    }
    Ok(())
}

/// Adds (or removes) `entry` in the `hooks.<event>` arrays.
fn set_hooks(value: &mut Value, entries: &[(&str, Value)], path: &Path, install: bool) -> anyhow::Result<()> {
    let hooks = object_at(value, "hooks", path)?;
    for (event, entry) in entries {
        let list = array_at(hooks, event, path)?;
        if install {
            if !list.contains(entry) {
                list.push(entry.clone());
            }
        } else {
            list.retain(|existing| existing != entry);
            if list.is_empty() {
                hooks.remove(*event);
            }
        }
    }
    if hooks.is_empty() {
        value.as_object_mut().expect("an object").remove("hooks");
    }
    Ok(())
}

fn claude_edits(home: &Home, args: &HostArgs, install: bool) -> anyhow::Result<Vec<Edit>> {
    let invocation = Invocation::current(home)?;
    let (settings_path, mcp_path) = match &args.project {
        Some(dir) => (dir.join(".claude/settings.json"), dir.join(".mcp.json")),
        None => {
            let user = home.settings().user_home.clone().context("no home directory; pass --project")?;
            (user.join(".claude/settings.json"), user.join(".claude.json"))
        }
    };
    let entries: Vec<(&'static str, Value)> = CLAUDE_EVENTS
        .iter()
        .map(|event| {
            let handler = json!({"type": "command", "command": invocation.hook_command("claude-code", event)});
            let entry = if matches!(*event, "PreToolUse" | "PostToolUse") {
                json!({"matcher": "*", "hooks": [handler]})
            } else {
                json!({"hooks": [handler]})
            };
            (*event, entry)
        })
        .collect();
    let settings = Edit::new(settings_path, move |value, path| set_hooks(value, &entries, path, install));
    let mut server = invocation.mcp_server();
    if args.project.is_none() {
        server["type"] = json!("stdio");
    }
    let mcp = Edit::new(mcp_path, move |value, path| set_server(value, "mcpServers", server.clone(), path, install));
    Ok(vec![settings, mcp])
}

fn kiro_edits(home: &Home, args: &HostArgs, install: bool) -> anyhow::Result<Vec<Edit>> {
    let Some(name) = &args.agent else { bail!("kiro-cli needs --agent NAME (the agent spec to configure)") };
    if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
        bail!("--agent must be an agent name, not a path ({name:?})");
    }
    let invocation = Invocation::current(home)?;
    let path = home.agents_dir(None)?.join(format!("{name}.json"));
    if read(&path)?.is_none() {
        bail!("no agent spec {} (create the agent in kiro-cli first)", path.display());
    }
    // An earlier install's entries for this binary and home, unscoped.
    let unscoped_server = invocation.mcp_server();
    let unscoped_hooks: Vec<(&'static str, Value)> = KIRO_EVENTS
        .iter()
        .map(|event| (*event, json!({"command": invocation.hook_command("kiro-cli", event)})))
        .collect();
    let server = invocation.agent_mcp_server(name);
    let entries = kiro_hook_entries(home, &invocation, name)?;
    let change = move |agent: &mut Value, path: &Path| -> anyhow::Result<()> {
        if let Some(servers) = agent.get_mut("mcpServers").and_then(Value::as_object_mut)
            && servers.get(SERVER_NAME) == Some(&unscoped_server)
        {
            servers.remove(SERVER_NAME);
        }
        set_server(agent, "mcpServers", server.clone(), path, install)?;
        set_hooks(agent, &unscoped_hooks, path, false)?;
        set_hooks(agent, &entries, path, install)?;
        let tool = Value::String(format!("@{SERVER_NAME}"));
        if let Some(tools) = agent.get_mut("tools").and_then(Value::as_array_mut) {
            if install {
                if !tools.contains(&tool) && !tools.contains(&json!("*")) {
                    tools.push(tool);
                }
            } else {
                tools.retain(|existing| *existing != tool);
            }
        }
        Ok(())
    };
    Ok(vec![Edit::new(path, change)])
}

fn kiro_hook_entries(home: &Home, invocation: &Invocation, name: &str) -> anyhow::Result<Vec<(&'static str, Value)>> {
    let mut bundled = cairn_hooks::HookSet::new();
    for event in cairn_hooks::HookEvent::ALL {
        if KIRO_EVENTS.contains(&event.as_str()) {
            bundled.push(event, cairn_hooks::HookEntry::new(invocation.agent_hook_command(event.as_str(), name)));
        }
    }
    let merged = home.user_hooks(&bundled);
    for dropped in &merged.dropped {
        eprintln!("warning: agent.kiro_hooks: {dropped} (not installed)");
    }
    let mut entries = Vec::new();
    for (event, hooks) in merged.hooks.iter() {
        for hook in hooks {
            if hook.fail_closed {
                eprintln!(
                    "warning: agent.kiro_hooks: {:?} asks to fail closed, which kiro-cli does not do; installed as an ordinary hook",
                    hook.command
                );
            }
            let mut entry = serde_json::to_value(hook)?;
            if let Some(map) = entry.as_object_mut() {
                map.remove("fail_closed");
            }
            entries.push((event.as_str(), entry));
        }
    }
    Ok(entries)
}

fn render(value: &Value) -> anyhow::Result<String> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    Ok(text)
}

/// The previous text normalised the way it would be written, so a diff
/// shows only what changed.
fn normalised(before: Option<&str>) -> String {
    before
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
        .and_then(|value| render(&value).ok())
        .unwrap_or_default()
}

/// Applies each edit: a dry run prints the diff; otherwise the file is
/// re-read, changed and written under its lock (another `cairn host
/// install`, or any Cairn edit of the same file, waits), after a copy of
/// the previous text is kept beside it.
fn apply(edits: &[Edit], dry_run: bool) -> anyhow::Result<()> {
    for edit in edits {
        if dry_run {
            let text = read(&edit.path)?;
            let (before, after) = edit.plan(text.as_deref())?;
            if unchanged(before.as_ref(), &after) {
                println!("unchanged {}", edit.path.display());
                continue;
            }
            let before = normalised(text.as_deref());
            let name = edit.path.display().to_string();
            let after = render(&after)?;
            let diff = similar::TextDiff::from_lines(&before, &after);
            print!("{}", diff.unified_diff().context_radius(3).header(&name, &name));
            continue;
        }
        if let Some(parent) = edit.path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        let mut backup = edit.path.clone().into_os_string();
        backup.push(".cairn.bak");
        let backup = PathBuf::from(backup);
        let mut existed = false;
        let written = crate::locked_edit::edit_locked(&edit.path, |text: Option<String>| -> anyhow::Result<_> {
            let (before, after) = edit.plan(text.as_deref())?;
            if unchanged(before.as_ref(), &after) {
                return Ok(None);
            }
            if let Some(text) = &text {
                existed = true;
                crate::settings::atomic_write(&backup, text.as_bytes())?;
            }
            Ok(Some(render(&after)?))
        })?;
        match (written, existed) {
            (false, _) => println!("unchanged {}", edit.path.display()),
            (true, true) => println!("updated {} (previous file in {})", edit.path.display(), backup.display()),
            (true, false) => println!("created {}", edit.path.display()),
        }
    }
    Ok(())
}

/// Whether a change leaves the file as it was (no file and nothing to add counts).
fn unchanged(before: Option<&Value>, after: &Value) -> bool {
    match before {
        Some(value) => value == after,
        None => after.as_object().is_some_and(Map::is_empty),
    }
}

pub(crate) fn run(home: &Home, command: &HostCommand) -> anyhow::Result<ExitCode> {
    let (args, install) = match command {
        HostCommand::Install(args) => (args, true),
        HostCommand::Uninstall(args) => (args, false),
    };
    let edits = match args.host {
        crate::host::HostName::ClaudeCode => {
            if args.agent.is_some() {
                bail!("--agent is for kiro-cli; Claude Code takes --project DIR or nothing (user scope)");
            }
            claude_edits(home, args, install)?
        }
        crate::host::HostName::KiroCli => {
            if args.project.is_some() {
                bail!("--project is for Claude Code; kiro-cli takes --agent NAME");
            }
            kiro_edits(home, args, install)?
        }
    };
    apply(&edits, args.dry_run)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_quote_leaves_plain_paths_and_quotes_the_rest() {
        assert_eq!(shell_quote("/usr/bin/cairn"), "/usr/bin/cairn");
        assert_eq!(shell_quote("/home/a b/cairn"), "'/home/a b/cairn'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }
}
