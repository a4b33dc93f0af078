//! The closed vocabulary a projection is stated in: the backends, the
//! concerns a spec expresses, and the four dispositions.

use serde::Serialize;

use super::ProjectionError;

/// A harness a spec can be run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AgentBackend {
    /// kiro-cli: opens the spec file itself (`--agent <name>`).
    KiroCli,
    /// The Kiro Agent Server: the spec is projected onto a
    /// `_meta.kiro.customAgents` object, which Cairn sends nowhere.
    Kas,
    /// The claude-agent-acp harness.
    Claude,
    /// codex-acp.
    Codex,
    /// opencode.
    Opencode,
    /// MiMo Code (opencode's rules, its own config channel).
    Mimocode,
    /// goose.
    Goose,
    /// The Strands CLI in its ACP mode.
    Strands,
    /// pi: no projection of the spec beyond the model.
    Pi,
    /// deepseek: no projection of the spec beyond the model.
    Deepseek,
}

impl AgentBackend {
    /// Every backend, in display order.
    pub const ALL: [Self; 10] = [
        Self::KiroCli,
        Self::Kas,
        Self::Claude,
        Self::Codex,
        Self::Opencode,
        Self::Mimocode,
        Self::Goose,
        Self::Strands,
        Self::Pi,
        Self::Deepseek,
    ];

    /// The name used on the command line and in files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::KiroCli => "kiro-cli",
            Self::Kas => "kas",
            Self::Claude => "claude",
            Self::Codex => "codex",
            Self::Opencode => "opencode",
            Self::Mimocode => "mimocode",
            Self::Goose => "goose",
            Self::Strands => "strands",
            Self::Pi => "pi",
            Self::Deepseek => "deepseek",
        }
    }

    /// Parses a backend name (`claude-code` is accepted for `claude`).
    ///
    /// # Errors
    ///
    /// [`ProjectionError::UnknownBackend`] naming the accepted names.
    pub fn parse(text: &str) -> Result<Self, ProjectionError> {
        let text = text.trim();
        if text == "claude-code" {
            return Ok(Self::Claude);
        }
        Self::ALL.into_iter().find(|backend| backend.as_str() == text).ok_or_else(|| ProjectionError::UnknownBackend {
            name: text.to_owned(),
            known: Self::ALL.iter().map(|backend| backend.as_str()).collect::<Vec<_>>().join(", "),
        })
    }

    /// How the spec reaches the backend at all.
    pub fn kind(self) -> ProjectionKind {
        match self {
            Self::KiroCli => ProjectionKind::Native,
            Self::Kas => ProjectionKind::External,
            Self::Claude | Self::Codex | Self::Opencode | Self::Mimocode | Self::Goose | Self::Strands => {
                ProjectionKind::Mirrored
            }
            Self::Pi | Self::Deepseek => ProjectionKind::Unprojected,
        }
    }

    /// Whether the backend reads the Markdown form of a spec (only KAS does).
    pub fn reads_markdown(self) -> bool {
        self == Self::Kas
    }

    /// Whether Cairn's session context carries a spec's `file://` steering
    /// for this backend (kiro-cli and KAS also load it themselves).
    pub fn reads_spec_steering(self) -> bool {
        matches!(self, Self::KiroCli | Self::Kas | Self::Claude | Self::Codex)
    }

    /// How far a per-tool MCP restriction survives on this backend.
    pub fn per_tool_deny(self) -> PerToolDeny {
        match self {
            Self::KiroCli | Self::Kas => PerToolDeny::Native,
            Self::Claude | Self::Opencode | Self::Mimocode => PerToolDeny::SettingsFile,
            Self::Codex | Self::Goose | Self::Strands => PerToolDeny::WholeServer,
            Self::Pi | Self::Deepseek => PerToolDeny::None,
        }
    }

    /// How an explicit `tools: []` holds on this backend, from what the
    /// projected values carry.
    pub fn zero_tool_ban(self) -> ZeroToolBan {
        match self {
            Self::KiroCli => {
                ZeroToolBan::Enforced { how: "kiro-cli reads `tools: []` from the spec file itself and mounts nothing" }
            }
            Self::Kas => ZeroToolBan::Enforced {
                how: "the `customAgents` object carries `tools: []`, which KAS reads as mount nothing",
            },
            Self::Claude => ZeroToolBan::Partial {
                why: "the projected session options (no built-in, a strict MCP config, an empty MCP array) hold only for a session started with them; `cairn agent export` writes no file that carries them, so Claude Code started on the exported files keeps its built-in tools",
            },
            Self::Opencode | Self::Goose | Self::Strands => ZeroToolBan::Partial {
                why: "no MCP server is projected, but the harness keeps its own built-in tools: nothing in the projected values removes them",
            },
            Self::Codex => ZeroToolBan::Partial {
                why: "no MCP server is projected, but in read-only mode codex runs passive reads, hosted web search and sandboxed commands without asking; it also starts the servers of its own config.toml",
            },
            Self::Mimocode => ZeroToolBan::NotEnforced {
                why: "no MCP server is projected, but MiMo Code keeps its own tools, and some of them (memory, history, task) never ask permission",
            },
            Self::Pi | Self::Deepseek => ZeroToolBan::NotEnforced {
                why: "nothing of the spec but the model is projected for this backend, so `tools: []` does not reach it",
            },
        }
    }
}

impl std::fmt::Display for AgentBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a spec reaches a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProjectionKind {
    /// The harness opens the file itself: the file is the contract.
    Native,
    /// Parsed into the harness's own wire object (KAS's `customAgents`).
    /// Cairn sends it nowhere: `cairn agent export --to kas` writes it to a
    /// hand-off file that nothing reads on its own.
    External,
    /// Field by field into the harness's own files and session values
    /// (`cairn agent export --to claude-code` writes Claude Code's).
    Mirrored,
    /// No projection of the spec beyond the model.
    Unprojected,
}

/// Where a per-tool `disabledTools` restriction ends up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PerToolDeny {
    /// The harness reads the entry's `disabledTools` itself.
    Native,
    /// Deny rules in the harness's own settings; the server stays mounted.
    SettingsFile,
    /// The narrowed server is withheld whole.
    WholeServer,
    /// The spec's servers do not reach the backend at all.
    None,
}

/// How an explicit `tools: []` (mount nothing) holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "ban", rename_all = "kebab-case")]
pub enum ZeroToolBan {
    /// Nothing can be called.
    Enforced {
        /// By what.
        how: &'static str,
    },
    /// Some calls still run.
    Partial {
        /// Which, and why.
        why: &'static str,
    },
    /// The ban does not hold.
    NotEnforced {
        /// Why.
        why: &'static str,
    },
}

/// The closed list of things a spec expresses. Adding one obliges every
/// backend to answer it: [`super::ruling`] matches on it without a
/// wildcard arm, so a new concern does not compile until each backend has
/// its ruling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Concern {
    /// `mcpServers`.
    #[serde(rename = "mcpServers")]
    McpServers,
    /// `tools`: what is mounted.
    #[serde(rename = "tools")]
    Tools,
    /// A server entry's `disabledTools`.
    #[serde(rename = "disabledTools")]
    DisabledTools,
    /// `excludedTools`: subtracted after `tools`.
    #[serde(rename = "excludedTools")]
    ExcludedTools,
    /// `allowedTools`: what is auto-approved.
    #[serde(rename = "allowedTools")]
    AllowedTools,
    /// A server entry's `autoApprove`.
    #[serde(rename = "autoApprove")]
    AutoApprove,
    /// `model`.
    #[serde(rename = "model")]
    Model,
    /// The models the session may switch to.
    #[serde(rename = "availableModels")]
    AvailableModels,
    /// The session's permission mode.
    #[serde(rename = "permissions.defaultMode")]
    PermissionsDefaultMode,
    /// A spec-written `permissions` block.
    #[serde(rename = "permissions")]
    Permissions,
    /// `prompt`.
    #[serde(rename = "prompt")]
    Prompt,
    /// `resources` (`skill://` and `file://`).
    #[serde(rename = "resources")]
    Resources,
    /// `hooks`.
    #[serde(rename = "hooks")]
    Hooks,
    /// `toolsSettings`.
    #[serde(rename = "toolsSettings")]
    ToolsSettings,
    /// `toolAliases`.
    #[serde(rename = "toolAliases")]
    ToolAliases,
    /// `managedToolPolicy`.
    #[serde(rename = "managedToolPolicy")]
    ManagedToolPolicy,
}

impl Concern {
    /// Every concern.
    pub const ALL: [Self; 16] = [
        Self::McpServers,
        Self::Tools,
        Self::DisabledTools,
        Self::ExcludedTools,
        Self::AllowedTools,
        Self::AutoApprove,
        Self::Model,
        Self::AvailableModels,
        Self::PermissionsDefaultMode,
        Self::Permissions,
        Self::Prompt,
        Self::Resources,
        Self::Hooks,
        Self::ToolsSettings,
        Self::ToolAliases,
        Self::ManagedToolPolicy,
    ];

    /// The key as a spec spells it.
    pub fn key(self) -> &'static str {
        match self {
            Self::McpServers => "mcpServers",
            Self::Tools => "tools",
            Self::DisabledTools => "disabledTools",
            Self::ExcludedTools => "excludedTools",
            Self::AllowedTools => "allowedTools",
            Self::AutoApprove => "autoApprove",
            Self::Model => "model",
            Self::AvailableModels => "availableModels",
            Self::PermissionsDefaultMode => "permissions.defaultMode",
            Self::Permissions => "permissions",
            Self::Prompt => "prompt",
            Self::Resources => "resources",
            Self::Hooks => "hooks",
            Self::ToolsSettings => "toolsSettings",
            Self::ToolAliases => "toolAliases",
            Self::ManagedToolPolicy => "managedToolPolicy",
        }
    }
}

/// Why a concern is not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WithholdClass {
    /// The value would pre-approve calls inside the harness, which would
    /// then run them without asking the user: the projection grants none.
    GatePreserving,
    /// Not written into the harness's files; Cairn's session context
    /// carries it as prompt text where that context names the agent.
    ContextInstead,
    /// Nothing on the harness reads it.
    NoReader,
    /// The harness advertises its own list, the only ids it accepts.
    HarnessOwnsTheVocabulary,
    /// The harness advertises no list at all.
    NoVocabularyAdvertised,
    /// The projection writes a fixed value (read-only, ask, approve), not
    /// the spec's.
    FixedByGovernance,
    /// The harness advertises no channel for it.
    NoChannelAdvertised,
    /// Only something running the session could apply it, and Cairn does
    /// not run agents: no projected or exported value carries it.
    NotRunByCairn,
    /// No projection of the spec for this backend beyond the model.
    NoProjection,
}

/// The four answers a backend gives a concern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "disposition", rename_all = "kebab-case")]
pub enum Disposition {
    /// The projected or exported values carry it as the spec states it
    /// (or the harness reads it from the spec file itself).
    Delivered,
    /// The projected or exported values carry it in another form.
    Translated,
    /// The harness has the capability, but no projected or exported value
    /// carries it; `channel` names what it would have to travel on.
    NoChannel {
        /// The channel it would need.
        channel: &'static str,
    },
    /// Not carried, and why.
    Withheld {
        /// Why.
        class: WithholdClass,
    },
}

/// One backend's answer for one concern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Ruling {
    /// The concern.
    pub concern: Concern,
    /// The answer.
    #[serde(flatten)]
    pub disposition: Disposition,
    /// How, in a phrase.
    pub detail: &'static str,
}
