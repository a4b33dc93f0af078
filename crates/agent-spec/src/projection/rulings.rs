//! Every backend's ruling on every concern, as the field reference's
//! per-backend tables state them. Each backend's function matches on
//! [`Concern`] without a wildcard arm, so a concern added to the
//! vocabulary does not compile until every backend answers it.

use super::vocabulary::{AgentBackend, Concern, Disposition, Ruling, WithholdClass};

const fn delivered(concern: Concern, detail: &'static str) -> Ruling {
    Ruling { concern, disposition: Disposition::Delivered, detail }
}

const fn translated(concern: Concern, detail: &'static str) -> Ruling {
    Ruling { concern, disposition: Disposition::Translated, detail }
}

const fn no_channel(concern: Concern, channel: &'static str, detail: &'static str) -> Ruling {
    Ruling { concern, disposition: Disposition::NoChannel { channel }, detail }
}

const fn withheld(concern: Concern, class: WithholdClass, detail: &'static str) -> Ruling {
    Ruling { concern, disposition: Disposition::Withheld { class }, detail }
}

const ALLOWLIST: &str =
    "the projected MCP servers are the allowlist, at server granularity: `@server/tool` mounts the whole server";
const AUTO_APPROVE_GATE: &str =
    "not written: a pre-approval would make the harness run those calls without asking the user";
const PROMPT_CONTEXT: &str = "not written into the harness's files; Cairn's session context carries it as the agent prompt block where the session names the agent (the session API, `cairn hook ... --agent`)";
const RESOURCES_NO_READER: &str = "the harness reads no spec resources; where Cairn's session context names the agent, its `skill://` mapping scopes the skill catalog that context carries";
const ALIASES_RESOLVED: &str =
    "`@alias` references in tools and allowedTools are resolved to `@server/tool` before projection";
const MANAGED_POLICY_MIRRORED: &str = "applied to Cairn's own `cairn` server in the projection: excluded tools become deny rules where the harness has them (claude, opencode, mimocode), elsewhere that server is withheld whole; `excludeServers` withholds it";
const MANAGED_POLICY_UNREAD: &str = "nothing reads it: the harness does not know the key, `cairn mcp serve` does not apply it, and Cairn does not run the session, so the tools it excludes stay callable";
const TOOLS_SETTINGS_CHANNEL: &str = "the harness's own permission configuration";
const TOOLS_SETTINGS_NONE: &str =
    "the projection translates no toolsSettings entry; the harness applies its own defaults";
const HOOKS_NOT_RUN: &str =
    "no projected value carries them and Cairn does not run the session, so nothing fires the spec's hooks";
const CONFIG_OPTION_MODEL: &str =
    "`settings.config_options.model`, the value for session/set_config_option after session/new";
const NO_PROJECTION: &str = "Cairn has no projection of the spec for this backend beyond the model";

/// The ruling of `backend` on `concern`.
pub fn ruling(backend: AgentBackend, concern: Concern) -> Ruling {
    match backend {
        AgentBackend::KiroCli => kiro_cli(concern),
        AgentBackend::Kas => kas(concern),
        AgentBackend::Claude => claude(concern),
        AgentBackend::Codex => codex(concern),
        AgentBackend::Opencode => opencode(concern),
        AgentBackend::Mimocode => mimocode(concern),
        AgentBackend::Goose => goose(concern),
        AgentBackend::Strands => strands(concern),
        AgentBackend::Pi | AgentBackend::Deepseek => unprojected(concern),
    }
}

/// Every ruling of one backend, in vocabulary order.
pub fn rulings(backend: AgentBackend) -> Vec<Ruling> {
    Concern::ALL.into_iter().map(|concern| ruling(backend, concern)).collect()
}

fn kiro_cli(concern: Concern) -> Ruling {
    use Concern as C;
    match concern {
        C::McpServers => delivered(concern, "kiro-cli reads the file itself"),
        C::Tools => delivered(concern, "kiro-cli reads the file itself; `@server/tool` narrows to one tool"),
        C::DisabledTools => delivered(concern, "kiro-cli reads each entry's disabledTools"),
        C::ExcludedTools => withheld(
            concern,
            WithholdClass::NoReader,
            "kiro-cli's strict loader does not know the key: a spec carrying it is dropped whole",
        ),
        C::AllowedTools => delivered(concern, "kiro-cli approves the listed tools locally, without asking"),
        C::AutoApprove => withheld(
            concern,
            WithholdClass::NoReader,
            "kiro-cli ignores the key; the projection's `settings.allowedTools` lists the `@server/tool` grants it would take, which only an edit of the spec's allowedTools delivers (Cairn never writes a spec)",
        ),
        C::Model => delivered(concern, "kiro-cli reads the pin; an unavailable model falls back to the default"),
        C::AvailableModels => {
            withheld(concern, WithholdClass::HarnessOwnsTheVocabulary, "kiro-cli offers its own model list")
        }
        C::PermissionsDefaultMode => withheld(
            concern,
            WithholdClass::GatePreserving,
            "no such key in the spec: a session-wide mode would approve calls inside the harness",
        ),
        C::Permissions => delivered(
            concern,
            "kiro-cli reads the block from 2.23.0; an older release drops the whole file, so the verdict depends on the installed version (`kiro-cli --version`)",
        ),
        C::Prompt => delivered(concern, "kiro-cli reads the prompt (and resolves `file://`) itself"),
        C::Resources => delivered(concern, "kiro-cli loads file:// steering and skill:// skills itself"),
        C::Hooks => delivered(
            concern,
            "kiro-cli runs the spec's hooks itself; `cairn host install kiro-cli --agent NAME` adds Cairn's own context and memory hooks beside them",
        ),
        C::ToolsSettings => delivered(concern, "kiro-cli applies each tool's settings itself"),
        C::ToolAliases => delivered(concern, "kiro-cli reads the aliases itself"),
        C::ManagedToolPolicy => withheld(concern, WithholdClass::NoReader, MANAGED_POLICY_UNREAD),
    }
}

fn kas(concern: Concern) -> Ruling {
    use Concern as C;
    match concern {
        C::McpServers => delivered(
            concern,
            "in the `customAgents` object; headers left out, env filtered per key (only non-credential true/false literals and `${NAME}` references are carried)",
        ),
        C::Tools => translated(
            concern,
            "each kiro-cli built-in is written with its KAS family beside it (fs_read → read_file, list_directory, ...)",
        ),
        C::DisabledTools => delivered(concern, "kept on the server entry in the `customAgents` object"),
        C::ExcludedTools => translated(
            concern,
            "written with every id governed under the name (excluding fs_write also excludes delete_file)",
        ),
        C::AllowedTools => translated(
            concern,
            "derived into permissions rules under the governance ceiling; file-tool built-ins are withheld",
        ),
        C::AutoApprove => {
            translated(concern, "each governed verb becomes an `@server/tool` allow rule in the derivation")
        }
        C::Model => delivered(concern, "in the `customAgents` object"),
        C::AvailableModels => {
            withheld(concern, WithholdClass::HarnessOwnsTheVocabulary, "KAS advertises its own models on session/new")
        }
        C::PermissionsDefaultMode => withheld(
            concern,
            WithholdClass::GatePreserving,
            "not in the `customAgents` object; KAS resolves a call no rule covers to ask",
        ),
        C::Permissions => translated(
            concern,
            "merged with the derivation: deny and ask kept, allow only where the ceiling permits it, never for the shell or filesystem families",
        ),
        C::Prompt => translated(
            concern,
            "inlined in the `customAgents` object (`file://` resolved when projected); an absent prompt is written as \"\"",
        ),
        C::Resources => withheld(
            concern,
            WithholdClass::NoChannelAdvertised,
            "no slot in the `customAgents` object; where Cairn's session context names the agent, its `skill://` mapping scopes the skill catalog and its `file://` steering is included",
        ),
        C::Hooks => withheld(
            concern,
            WithholdClass::NotRunByCairn,
            "no slot in the `customAgents` object, and Cairn does not run the session, so nothing fires the spec's hooks",
        ),
        C::ToolsSettings => translated(
            concern,
            "partly, into permissions rules: deniedPaths, deniedCommands and web_fetch.blocked deny, subagent.availableAgents a subagent deny with the names excepted; the other entries are named in the notices",
        ),
        C::ToolAliases => translated(concern, ALIASES_RESOLVED),
        C::ManagedToolPolicy => withheld(concern, WithholdClass::NotRunByCairn, MANAGED_POLICY_UNREAD),
    }
}

fn claude(concern: Concern) -> Ruling {
    use Concern as C;
    match concern {
        C::McpServers => delivered(
            concern,
            "`.mcp.json` (written by `cairn agent export --to claude-code`); the same servers as the session/new array",
        ),
        C::Tools => translated(concern, ALLOWLIST),
        C::DisabledTools => translated(
            concern,
            "permissions.deny rules `mcp__<server>__<tool>` in settings.local.json (names sanitised as Claude Code writes them); the server stays mounted",
        ),
        C::ExcludedTools => translated(concern, "subtracted before the allowlist is computed"),
        C::AllowedTools => withheld(concern, WithholdClass::GatePreserving, AUTO_APPROVE_GATE),
        C::AutoApprove => withheld(concern, WithholdClass::GatePreserving, AUTO_APPROVE_GATE),
        C::Model => delivered(concern, "settings.local.json `model`"),
        C::AvailableModels => {
            delivered(concern, "settings.local.json `availableModels`, from the session's model list")
        }
        C::PermissionsDefaultMode => delivered(
            concern,
            "settings.local.json `permissions.defaultMode`: the mode the session asked for (`default` when none), never the spec's",
        ),
        C::Permissions => withheld(concern, WithholdClass::GatePreserving, AUTO_APPROVE_GATE),
        C::Prompt => withheld(concern, WithholdClass::ContextInstead, PROMPT_CONTEXT),
        C::Resources => withheld(concern, WithholdClass::NoReader, RESOURCES_NO_READER),
        C::Hooks => no_channel(
            concern,
            "Claude Code's own `hooks` settings",
            "the export writes none of the spec's hooks, so Claude Code runs none of them; `cairn host install claude-code` adds Cairn's own context and memory hooks, not the spec's",
        ),
        C::ToolsSettings => no_channel(
            concern,
            "Claude Code's own permission rules (`Bash(...)`, `Edit(...)`)",
            "the export translates no toolsSettings entry into them, so none applies",
        ),
        C::ToolAliases => translated(concern, ALIASES_RESOLVED),
        C::ManagedToolPolicy => translated(concern, MANAGED_POLICY_MIRRORED),
    }
}

fn codex(concern: Concern) -> Ruling {
    use Concern as C;
    match concern {
        C::McpServers => delivered(
            concern,
            "the projected session/new array, narrowed: HTTP servers dropped unless codex advertised them, narrowed servers left out",
        ),
        C::Tools => translated(concern, ALLOWLIST),
        C::DisabledTools => translated(
            concern,
            "the server is withheld whole, Cairn's own `cairn` server included: nothing projected for codex refuses one tool",
        ),
        C::ExcludedTools => translated(concern, "subtracted before the allowlist is computed"),
        C::AllowedTools => withheld(concern, WithholdClass::GatePreserving, AUTO_APPROVE_GATE),
        C::AutoApprove => withheld(concern, WithholdClass::GatePreserving, AUTO_APPROVE_GATE),
        C::Model => delivered(concern, CONFIG_OPTION_MODEL),
        C::AvailableModels => withheld(
            concern,
            WithholdClass::HarnessOwnsTheVocabulary,
            "codex advertises its own model ids on session/new",
        ),
        C::PermissionsDefaultMode => withheld(
            concern,
            WithholdClass::FixedByGovernance,
            "the projected `config_options.mode` is read-only, whatever the spec says",
        ),
        C::Permissions => withheld(concern, WithholdClass::GatePreserving, AUTO_APPROVE_GATE),
        C::Prompt => withheld(concern, WithholdClass::ContextInstead, PROMPT_CONTEXT),
        C::Resources => withheld(concern, WithholdClass::NoReader, RESOURCES_NO_READER),
        C::Hooks => no_channel(
            concern,
            "codex's own hook configuration",
            "the projection carries none of the spec's hooks, so codex runs none of them",
        ),
        C::ToolsSettings => no_channel(concern, TOOLS_SETTINGS_CHANNEL, TOOLS_SETTINGS_NONE),
        C::ToolAliases => translated(concern, ALIASES_RESOLVED),
        C::ManagedToolPolicy => translated(concern, MANAGED_POLICY_MIRRORED),
    }
}

fn opencode(concern: Concern) -> Ruling {
    use Concern as C;
    match concern {
        C::McpServers => delivered(concern, "the projected session/new array, every transport kept"),
        C::DisabledTools => translated(
            concern,
            "a deny rule in the projected permission config (`settings.permission_config`); the server stays mounted",
        ),
        C::Hooks => withheld(concern, WithholdClass::NotRunByCairn, HOOKS_NOT_RUN),
        C::PermissionsDefaultMode => withheld(
            concern,
            WithholdClass::FixedByGovernance,
            "the projected `config_options.mode` is ask, whatever the spec says",
        ),
        C::AvailableModels => withheld(
            concern,
            WithholdClass::HarnessOwnsTheVocabulary,
            "opencode advertises its own model ids on session/new",
        ),
        other => codex(other),
    }
}

fn mimocode(concern: Concern) -> Ruling {
    use Concern as C;
    match concern {
        C::DisabledTools => translated(
            concern,
            "a deny rule in the projected MIMOCODE_CONFIG_CONTENT (`settings.env`); the server stays mounted",
        ),
        other => opencode(other),
    }
}

fn goose(concern: Concern) -> Ruling {
    use Concern as C;
    match concern {
        C::McpServers => delivered(concern, "the projected session/new array"),
        C::DisabledTools => translated(concern, "the server is withheld whole, Cairn's own `cairn` server included"),
        C::Hooks => withheld(concern, WithholdClass::NotRunByCairn, HOOKS_NOT_RUN),
        C::PermissionsDefaultMode => withheld(
            concern,
            WithholdClass::FixedByGovernance,
            "the projected environment sets GOOSE_MODE=approve, whatever the spec says",
        ),
        C::Model => delivered(
            concern,
            "`settings.config_options.model`, for session/set_config_option, matched against the provider and model selects goose advertises",
        ),
        C::AvailableModels => withheld(
            concern,
            WithholdClass::HarnessOwnsTheVocabulary,
            "goose advertises its own provider and model selects",
        ),
        C::Resources => {
            withheld(concern, WithholdClass::NoChannelAdvertised, "goose advertises no channel for resources")
        }
        other => codex(other),
    }
}

fn strands(concern: Concern) -> Ruling {
    use Concern as C;
    match concern {
        C::McpServers => delivered(
            concern,
            "`settings.mcp_config`, the content of a --mcp-config file for the Strands CLI (Cairn writes no such file)",
        ),
        C::Tools => translated(concern, ALLOWLIST),
        C::DisabledTools => translated(concern, "the server is withheld whole, Cairn's own `cairn` server included"),
        C::ExcludedTools => translated(concern, "subtracted before the allowlist is computed"),
        C::AllowedTools | C::AutoApprove | C::Permissions | C::PermissionsDefaultMode => {
            withheld(concern, WithholdClass::GatePreserving, AUTO_APPROVE_GATE)
        }
        C::Model => delivered(concern, "`--model` in `settings.args`"),
        C::AvailableModels => {
            withheld(concern, WithholdClass::NoVocabularyAdvertised, "the CLI advertises no model list")
        }
        C::Prompt => withheld(
            concern,
            WithholdClass::ContextInstead,
            "not written as the agent-definition instructions (those replace the project's system prompt); Cairn's session context carries it as the agent prompt block where the session names the agent",
        ),
        C::Resources => withheld(concern, WithholdClass::NoReader, RESOURCES_NO_READER),
        C::Hooks => withheld(concern, WithholdClass::NotRunByCairn, HOOKS_NOT_RUN),
        C::ToolsSettings => no_channel(concern, TOOLS_SETTINGS_CHANNEL, TOOLS_SETTINGS_NONE),
        C::ToolAliases => translated(concern, ALIASES_RESOLVED),
        C::ManagedToolPolicy => translated(concern, MANAGED_POLICY_MIRRORED),
    }
}

/// pi and deepseek: nothing of the spec but the model is projected.
fn unprojected(concern: Concern) -> Ruling {
    use Concern as C;
    match concern {
        C::Model => delivered(concern, CONFIG_OPTION_MODEL),
        C::Prompt => withheld(concern, WithholdClass::ContextInstead, PROMPT_CONTEXT),
        C::Resources => withheld(concern, WithholdClass::NoReader, RESOURCES_NO_READER),
        C::McpServers => withheld(
            concern,
            WithholdClass::NoProjection,
            "the spec's servers are not projected; the harness mounts the servers of its own configuration",
        ),
        C::Tools => withheld(
            concern,
            WithholdClass::NoProjection,
            "no allowlist is projected, and an explicit `tools: []` does not reach the harness",
        ),
        C::Hooks => withheld(concern, WithholdClass::NotRunByCairn, HOOKS_NOT_RUN),
        C::ManagedToolPolicy => withheld(concern, WithholdClass::NotRunByCairn, MANAGED_POLICY_UNREAD),
        C::DisabledTools
        | C::ExcludedTools
        | C::AllowedTools
        | C::AutoApprove
        | C::AvailableModels
        | C::PermissionsDefaultMode
        | C::Permissions
        | C::ToolsSettings
        | C::ToolAliases => withheld(concern, WithholdClass::NoProjection, NO_PROJECTION),
    }
}
