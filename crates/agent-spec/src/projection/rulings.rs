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

const ALLOWLIST: &str = "the MCP array's allowlist, at server granularity: `@server/tool` mounts the whole server";
const AUTO_APPROVE_GATE: &str =
    "a pre-approval inside the harness would skip the permission gate, its ceiling and its audit";
const PROMPT_CONTEXT: &str = "arrives as the agent prompt block of the session context, on every backend";
const RESOURCES_NO_READER: &str =
    "the harness reads no spec resources; mapped `skill://` skills arrive as the injected skill catalog";
const ALIASES_RESOLVED: &str =
    "`@alias` references in tools and allowedTools are resolved to `@server/tool` before projection";
const MANAGED_POLICY: &str = "applied by Cairn to its own managed servers (tools excluded or servers withheld)";
const TOOLS_SETTINGS_CHANNEL: &str = "Cairn's spec-shell-allowlist and spec-write-allowlist gate tiers";
const TOOLS_SETTINGS_NONE: &str =
    "no field on this harness; only subagent.availableAgents is applied, by Cairn's spawn gate";
const HOOKS_TURN_LOOP: &str = "fired by Cairn's turn loop: every tool call arrives as a permission request";

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
        AgentBackend::Pi | AgentBackend::Deepseek => broker_only(backend, concern),
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
        C::AutoApprove => translated(
            concern,
            "kiro-cli ignores the key; each governed verb becomes an `@server/tool` grant in allowedTools",
        ),
        C::Model => delivered(concern, "kiro-cli reads the pin; an unavailable model falls back to the default"),
        C::AvailableModels => {
            withheld(concern, WithholdClass::HarnessOwnsTheVocabulary, "kiro-cli offers its own model list")
        }
        C::PermissionsDefaultMode => withheld(
            concern,
            WithholdClass::GatePreserving,
            "a session-wide mode would approve calls inside the harness",
        ),
        C::Permissions => delivered(
            concern,
            "read from kiro-cli 2.23.0; an older or unknown release drops the whole file, so the block is written only past the floor",
        ),
        C::Prompt => delivered(concern, "kiro-cli reads the prompt (and resolves `file://`) itself"),
        C::Resources => delivered(concern, "kiro-cli loads file:// steering and skill:// skills itself"),
        C::Hooks => delivered(concern, "kiro-cli runs the hooks itself; Cairn never fires them there"),
        C::ToolsSettings => delivered(concern, "kiro-cli applies each tool's settings itself"),
        C::ToolAliases => delivered(concern, "kiro-cli reads the aliases itself"),
        C::ManagedToolPolicy => translated(concern, MANAGED_POLICY),
    }
}

fn kas(concern: Concern) -> Ruling {
    use Concern as C;
    match concern {
        C::McpServers => delivered(
            concern,
            "on the wire object; headers withheld, env filtered per key (only non-credential true/false literals and `${NAME}` references travel)",
        ),
        C::Tools => translated(
            concern,
            "each kiro-cli built-in is sent with its KAS family beside it (fs_read → read_file, list_directory, ...)",
        ),
        C::DisabledTools => delivered(concern, "kept on the server entry the wire carries"),
        C::ExcludedTools => translated(
            concern,
            "sent with every id governed under the name (excluding fs_write also excludes delete_file)",
        ),
        C::AllowedTools => translated(
            concern,
            "derived into permissions rules under the governance ceiling; file-tool built-ins are withheld",
        ),
        C::AutoApprove => {
            translated(concern, "each governed verb becomes an `@server/tool` allow rule in the derivation")
        }
        C::Model => delivered(concern, "on the wire object"),
        C::AvailableModels => {
            withheld(concern, WithholdClass::HarnessOwnsTheVocabulary, "KAS advertises its own models on session/new")
        }
        C::PermissionsDefaultMode => withheld(
            concern,
            WithholdClass::GatePreserving,
            "an absent rule resolves to ask, so every call reaches the gate",
        ),
        C::Permissions => translated(
            concern,
            "merged with the derivation: deny and ask relayed, allow only where the ceiling permits it, never for the shell or filesystem families",
        ),
        C::Prompt => {
            translated(concern, "inlined on the wire (`file://` resolved by Cairn); an absent prompt is sent as \"\"")
        }
        C::Resources => translated(
            concern,
            "skill:// mappings arrive as the injected skill catalog; file:// steering is loaded by Cairn",
        ),
        C::Hooks => translated(concern, "no wire slot; fired by Cairn's turn loop on each permission request"),
        C::ToolsSettings => translated(
            concern,
            "translated into permissions rules: deniedPaths, deniedCommands and web_fetch.blocked deny; subagent.availableAgents a subagent deny with the names excepted",
        ),
        C::ToolAliases => translated(concern, ALIASES_RESOLVED),
        C::ManagedToolPolicy => translated(concern, MANAGED_POLICY),
    }
}

fn claude(concern: Concern) -> Ruling {
    use Concern as C;
    match concern {
        C::McpServers => delivered(concern, "the session/new mcpServers array (or .mcp.json when exported)"),
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
            "settings.local.json `permissions.defaultMode`: the mode the session asked for, never the spec's",
        ),
        C::Permissions => withheld(concern, WithholdClass::GatePreserving, AUTO_APPROVE_GATE),
        C::Prompt => withheld(concern, WithholdClass::ContextInstead, PROMPT_CONTEXT),
        C::Resources => withheld(concern, WithholdClass::NoReader, RESOURCES_NO_READER),
        C::Hooks => no_channel(
            concern,
            "claude's own hook settings",
            "postToolUse, userPromptSubmit, agentSpawn and stop are fired by Cairn's turn loop; preToolUse does not run",
        ),
        C::ToolsSettings => no_channel(
            concern,
            TOOLS_SETTINGS_CHANNEL,
            "only the shell allowlist (denyByDefault with allowedCommands) and the write allowlist (fallbackAction deny with allowedPaths) are applied, by those tiers",
        ),
        C::ToolAliases => translated(concern, ALIASES_RESOLVED),
        C::ManagedToolPolicy => translated(concern, MANAGED_POLICY),
    }
}

fn codex(concern: Concern) -> Ruling {
    use Concern as C;
    match concern {
        C::McpServers => delivered(
            concern,
            "narrowed three ways: unadvertised transports dropped, narrowed third-party servers omitted, Cairn's control plane rebuilt with the session's identity",
        ),
        C::Tools => translated(concern, ALLOWLIST),
        C::DisabledTools => translated(
            concern,
            "the server is withheld whole, except Cairn's control plane, whose calls are refused at the permission request",
        ),
        C::ExcludedTools => translated(concern, "subtracted before the allowlist is computed"),
        C::AllowedTools => withheld(concern, WithholdClass::GatePreserving, AUTO_APPROVE_GATE),
        C::AutoApprove => withheld(concern, WithholdClass::GatePreserving, AUTO_APPROVE_GATE),
        C::Model => delivered(concern, "pushed with session/set_config_option after session/new"),
        C::AvailableModels => withheld(
            concern,
            WithholdClass::HarnessOwnsTheVocabulary,
            "codex advertises its own model ids on session/new",
        ),
        C::PermissionsDefaultMode => withheld(concern, WithholdClass::FixedByGovernance, "mode=read-only"),
        C::Permissions => withheld(concern, WithholdClass::GatePreserving, AUTO_APPROVE_GATE),
        C::Prompt => withheld(concern, WithholdClass::ContextInstead, PROMPT_CONTEXT),
        C::Resources => withheld(concern, WithholdClass::NoReader, RESOURCES_NO_READER),
        C::Hooks => no_channel(
            concern,
            "codex's own hook configuration",
            "postToolUse, userPromptSubmit, agentSpawn and stop are fired by Cairn's turn loop; preToolUse does not run (codex runs sandboxed calls without asking)",
        ),
        C::ToolsSettings => no_channel(concern, TOOLS_SETTINGS_CHANNEL, TOOLS_SETTINGS_NONE),
        C::ToolAliases => translated(concern, ALIASES_RESOLVED),
        C::ManagedToolPolicy => translated(concern, MANAGED_POLICY),
    }
}

fn opencode(concern: Concern) -> Ruling {
    use Concern as C;
    match concern {
        C::McpServers => delivered(concern, "no transport filter"),
        C::DisabledTools => translated(
            concern,
            "a deny rule in the seeded permission config; the server stays mounted (withheld whole only when a lower config source outranks the rule)",
        ),
        C::Hooks => translated(concern, HOOKS_TURN_LOOP),
        C::PermissionsDefaultMode => withheld(
            concern,
            WithholdClass::FixedByGovernance,
            "fixed at ask, read back off the harness's own resolved config",
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
            "a deny rule in the config seeded through MIMOCODE_CONFIG_CONTENT (read back from `mimo debug config`); the server stays mounted",
        ),
        C::Hooks => withheld(
            concern,
            WithholdClass::UnaskedNativeTools,
            "some of the harness's own tools never ask, so a hook fired from the permission request would miss them",
        ),
        C::PermissionsDefaultMode => {
            withheld(concern, WithholdClass::FixedByGovernance, "fixed at ask, seeded through MIMOCODE_CONFIG_CONTENT")
        }
        other => opencode(other),
    }
}

fn goose(concern: Concern) -> Ruling {
    use Concern as C;
    match concern {
        C::McpServers => delivered(concern, "the session/new array, measured as a round trip"),
        C::DisabledTools => translated(concern, "the server is withheld whole, control plane included"),
        C::Hooks => translated(concern, HOOKS_TURN_LOOP),
        C::PermissionsDefaultMode => {
            withheld(concern, WithholdClass::FixedByGovernance, "carried as GOOSE_MODE in the child's environment")
        }
        C::Model => delivered(
            concern,
            "pushed with session/set_config_option, from the provider and model selects goose advertises",
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
        C::McpServers => delivered(concern, "by the owner-only --mcp-config launch file, never the wire"),
        C::Tools => translated(concern, ALLOWLIST),
        C::DisabledTools => translated(concern, "the server is withheld whole, control plane included"),
        C::ExcludedTools => translated(concern, "subtracted before the allowlist is computed"),
        C::AllowedTools | C::AutoApprove | C::Permissions => {
            withheld(concern, WithholdClass::GatePreserving, "Cairn's gate asks for every call")
        }
        C::Model => delivered(concern, "the --model launch argument"),
        C::AvailableModels => {
            withheld(concern, WithholdClass::NoVocabularyAdvertised, "the CLI advertises no model list")
        }
        C::PermissionsDefaultMode => {
            withheld(concern, WithholdClass::GatePreserving, "Cairn's gate asks for every call")
        }
        C::Prompt => withheld(
            concern,
            WithholdClass::ContextInstead,
            "not sent as the agent-definition instructions (those replace the project's system prompt); arrives as the agent prompt block",
        ),
        C::Resources => withheld(concern, WithholdClass::NoReader, RESOURCES_NO_READER),
        C::Hooks => translated(concern, HOOKS_TURN_LOOP),
        C::ToolsSettings => no_channel(concern, TOOLS_SETTINGS_CHANNEL, TOOLS_SETTINGS_NONE),
        C::ToolAliases => translated(concern, ALIASES_RESOLVED),
        C::ManagedToolPolicy => translated(concern, MANAGED_POLICY),
    }
}

fn broker_only(backend: AgentBackend, concern: Concern) -> Ruling {
    use Concern as C;
    let none = "no projection of the spec: the backend has no mirror";
    match concern {
        C::Model => delivered(concern, "pushed with session/set_config_option after session/new"),
        C::Prompt => withheld(concern, WithholdClass::ContextInstead, PROMPT_CONTEXT),
        C::Resources => withheld(concern, WithholdClass::NoReader, RESOURCES_NO_READER),
        C::McpServers => withheld(
            concern,
            WithholdClass::BrokerOnly,
            if backend == AgentBackend::Pi {
                "pi stores the array and never hands it to the pi process; only Cairn's pooled broker stubs are composed"
            } else {
                "deepseek mounts the pooled broker stubs, not the servers the spec declares"
            },
        ),
        C::Tools => withheld(
            concern,
            WithholdClass::BrokerOnly,
            "no allowlist; an explicit `tools: []` is still honoured by refusing every permission request",
        ),
        C::Hooks => withheld(
            concern,
            WithholdClass::BrokerOnly,
            if backend == AgentBackend::Pi {
                "pi is handed no spec and Cairn does not fire the field there"
            } else {
                "no channel and not fired by Cairn"
            },
        ),
        C::ManagedToolPolicy => translated(concern, MANAGED_POLICY),
        C::DisabledTools
        | C::ExcludedTools
        | C::AllowedTools
        | C::AutoApprove
        | C::AvailableModels
        | C::PermissionsDefaultMode
        | C::Permissions
        | C::ToolsSettings
        | C::ToolAliases => withheld(concern, WithholdClass::BrokerOnly, none),
    }
}
