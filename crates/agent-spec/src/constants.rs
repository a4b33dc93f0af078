//! Every fixed number and name table this crate uses, in one place.

/// Longest welcome message shown, in characters, counting the ellipsis that
/// marks a cut.
pub const WELCOME_MESSAGE_MAX_CHARS: usize = 500;

/// The ellipsis a truncated welcome message ends with (inside the budget).
pub const ELLIPSIS: &str = "…";

/// What `model` reads as when it is absent or not a string: no pin.
pub const MODEL_AUTO: &str = "auto";

/// Hook entry defaults (kiro-cli classic `Hook`).
pub const HOOK_DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// Default cap on a hook's captured output, in bytes.
pub const HOOK_DEFAULT_MAX_OUTPUT_SIZE: u64 = 10_240;
/// Default hook result cache lifetime: no caching.
pub const HOOK_DEFAULT_CACHE_TTL_SECONDS: u64 = 0;

/// Default MCP server request timeout, in milliseconds.
pub const MCP_DEFAULT_TIMEOUT_MS: u64 = 120_000;

/// How many steering files one resolution admits at most.
pub const STEERING_MAX_FILES: usize = 256;
/// How deep a steering glob walks below its anchor.
pub const STEERING_MAX_DEPTH: usize = 16;

/// Where the project-level agents live inside a project checkout.
pub const PROJECT_AGENTS_DIR: &str = ".kiro/agents";

/// The spec's own file extensions, in precedence order (`.json` wins).
pub const JSON_EXTENSION: &str = "json";
/// The Markdown serialisation's extension.
pub const MARKDOWN_EXTENSION: &str = "md";

/// The CLI command that pins a name to one file, for refusal messages.
pub const PIN_COMMAND: &str = "cairn agent pin";

/// Top-level keys kiro-cli's strict (classic) loader accepts.
pub const KIRO_CLI_KEYS: &[&str] = &[
    "$schema",
    "name",
    "description",
    "prompt",
    "mcpServers",
    "tools",
    "toolAliases",
    "allowedTools",
    "resources",
    "hooks",
    "toolsSettings",
    "includeMcpJson",
    "useLegacyMcpJson",
    "model",
    "keyboardShortcut",
    "welcomeMessage",
];

/// Top-level keys Cairn reads that kiro-cli's strict loader does not know,
/// so a file carrying them is dropped by kiro-cli 2.x.
pub const CAIRN_ONLY_KEYS: &[&str] = &["systemPrompt", "excludedTools", "permissions", "includePowers"];

/// The hook events kiro-cli names, as spelled on the wire.
pub const HOOK_EVENTS: &[&str] = &["agentSpawn", "userPromptSubmit", "preToolUse", "postToolUse", "stop"];

/// Keys of one hook entry.
pub const HOOK_ENTRY_KEYS: &[&str] = &["command", "matcher", "timeout_ms", "max_output_size", "cache_ttl_seconds"];

/// Keys of one MCP server entry that Cairn reads.
pub const MCP_ENTRY_KEYS: &[&str] = &[
    "type",
    "command",
    "args",
    "env",
    "url",
    "headers",
    "timeout",
    "disabled",
    "disabledTools",
    "autoApprove",
    "oauth",
    "oauthScopes",
];

/// kiro-cli's built-in tools: spec name, then its aliases.
pub const BUILTIN_TOOLS: &[(&str, &[&str])] = &[
    ("fs_read", &["read"]),
    ("fs_write", &["write"]),
    ("execute_bash", &["execute_cmd", "shell"]),
    ("use_aws", &["aws"]),
    ("report_issue", &["gh_issue", "report"]),
    ("todo_list", &["todo"]),
    ("use_subagent", &["subagent"]),
    ("introspect", &[]),
    ("knowledge", &[]),
    ("thinking", &[]),
    ("delegate", &[]),
    ("grep", &[]),
    ("glob", &[]),
    ("code", &[]),
    ("web_fetch", &[]),
    ("web_search", &[]),
    ("switch_to_execution", &[]),
    ("session", &[]),
];

/// Tags that stand for several built-ins at once (Kiro CLI 3 tag names
/// that are not also a built-in alias).
pub const BUILTIN_TAGS: &[(&str, &[&str])] = &[("web", &["web_fetch", "web_search"])];

/// The tool ids each built-in is projected with, beside its own name, on
/// engines that match exact ids and translate nothing.
pub const BUILTIN_FAMILIES: &[(&str, &[&str])] = &[
    ("fs_read", &["read_file", "list_directory"]),
    ("grep", &["grep_search"]),
    ("glob", &["file_search"]),
    ("fs_write", &["str_replace", "fs_append"]),
    ("web_search", &["remote_web_search"]),
    ("use_subagent", &["invoke_sub_agent"]),
    ("execute_bash", &["control_bash_process", "control_pwsh_process"]),
];

/// Ids an exclusion reaches beyond the family a grant mounts: excluding
/// `fs_write` also excludes deleting files.
pub const EXCLUSION_EXTRAS: &[(&str, &[&str])] = &[("fs_write", &["delete_file"])];

/// `toolsSettings` alias groups: the canonical key, then every spelling in
/// the order kiro-cli reads them (the first one present wins).
pub const TOOLS_SETTINGS_GROUPS: &[(&str, &[&str])] = &[
    ("fs_read", &["read", "fsRead", "fs_read"]),
    ("fs_write", &["write", "fsWrite", "fs_write"]),
    ("shell", &["shell", "execute_bash", "executeBash", "executeCmd", "execute_cmd"]),
    ("use_aws", &["use_aws", "useAws", "aws"]),
    ("subagent", &["crew", "agent_crew", "agentCrew", "subagent", "use_subagent"]),
];

/// Keyboard shortcut keys kiro-cli reserves for itself.
pub const RESERVED_SHORTCUTS: &[&str] =
    &["ctrl+c", "ctrl+d", "ctrl+l", "ctrl+z", "ctrl+s", "ctrl+r", "ctrl+t", "shift+tab"];
