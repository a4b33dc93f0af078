//! [`AgentSpec`]: one parsed spec file and the typed view over it, with the
//! field reference's coercions.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use cairn_guard::SensitivePaths;
use regex::Regex;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::constants::{
    CAIRN_ONLY_KEYS, ELLIPSIS, KIRO_CLI_KEYS, MARKDOWN_EXTENSION, MODEL_AUTO, RESERVED_SHORTCUTS,
    TOOLS_SETTINGS_GROUPS, WELCOME_MESSAGE_MAX_CHARS,
};
use crate::diagnostic::{Findings, SpecDiagnostic, SpecSeverity, type_name};
use crate::error::{AgentSpecError, Result};
use crate::hooks::{Hooks, read_hooks};
use crate::mcp::{McpServer, read_mcp_servers};
use crate::parse::{parse_json, parse_markdown, split_comma_list};
use crate::resources::{Resource, read_resources};
use crate::tools::{AutoApprove, SubagentAllowlist, ToolGrants, ToolList, read_string_list};

/// Which serialisation a spec was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SpecFormat {
    /// `<name>.json`: the JSON object.
    Json,
    /// `<name>.md`: JSON-shaped YAML frontmatter, the body as the prompt.
    Markdown,
}

/// Which field a prompt was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum PromptField {
    /// The Markdown body.
    Body,
    /// The `prompt` field.
    Prompt,
    /// kiro-cli's other spelling, read only when `prompt` is absent.
    SystemPrompt,
}

/// The prompt as the spec writes it, before any file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PromptValue<'a> {
    /// Literal text, or a `file://` URI.
    pub text: &'a str,
    /// Where it was read from.
    pub field: PromptField,
}

impl PromptValue<'_> {
    /// The path part when the prompt is a `file://` URI.
    pub fn file_uri_path(&self) -> Option<&str> {
        self.text.trim().strip_prefix("file://")
    }
}

/// The `toolsSettings` alias groups: one tool's settings under any of its
/// spellings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolsSettingsGroup {
    /// `read`, `fsRead`, `fs_read`.
    FsRead,
    /// `write`, `fsWrite`, `fs_write`.
    FsWrite,
    /// `shell`, `execute_bash`, `executeBash`, `executeCmd`, `execute_cmd`.
    Shell,
    /// `use_aws`, `useAws`, `aws`.
    UseAws,
    /// `crew`, `agent_crew`, `agentCrew`, `subagent`, `use_subagent`.
    Subagent,
}

impl ToolsSettingsGroup {
    /// Every group.
    pub const ALL: [Self; 5] = [Self::FsRead, Self::FsWrite, Self::Shell, Self::UseAws, Self::Subagent];

    fn index(self) -> usize {
        self as usize
    }

    /// Canonical name of the group.
    pub fn canonical(self) -> &'static str {
        TOOLS_SETTINGS_GROUPS[self.index()].0
    }

    /// Every spelling, in the order kiro-cli reads them.
    pub fn spellings(self) -> &'static [&'static str] {
        TOOLS_SETTINGS_GROUPS[self.index()].1
    }
}

/// One tool's settings as found, with the key as the spec spells it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ToolSetting<'a> {
    /// The key as written in the spec (for messages).
    pub key: &'a str,
    /// The settings value.
    pub value: &'a Value,
}

/// One agent spec file, parsed. Unknown keys are kept as written so the
/// spec round-trips; the accessors apply the field reference's coercions.
#[derive(Debug, Clone)]
pub struct AgentSpec {
    path: Option<PathBuf>,
    format: SpecFormat,
    fields: Map<String, Value>,
    body: Option<String>,
    parse_findings: Vec<SpecDiagnostic>,
}

impl AgentSpec {
    /// Parses the JSON serialisation.
    pub fn from_json_str(text: &str) -> Result<Self> {
        let fields = parse_json(text).map_err(|problem| AgentSpecError::Syntax { path: None, problem })?;
        Ok(Self { path: None, format: SpecFormat::Json, fields, body: None, parse_findings: Vec::new() })
    }

    /// Parses the Markdown serialisation: YAML frontmatter between `---`
    /// lines, then the body, which is the prompt.
    pub fn from_markdown_str(text: &str) -> Result<Self> {
        let parts = parse_markdown(text).map_err(|problem| AgentSpecError::Syntax { path: None, problem })?;
        let mut fields = parts.fields;
        let mut parse_findings = Vec::new();
        if let Some(Value::String(list)) = fields.get("tools") {
            let items = split_comma_list(list);
            parse_findings.push(SpecDiagnostic::notice(
                "tools-comma-list",
                "tools",
                format!("the comma-separated string is read as the list of {} names", items.len()),
            ));
            fields.insert("tools".to_owned(), Value::Array(items));
        }
        let body = (!parts.body.trim().is_empty()).then_some(parts.body);
        Ok(Self { path: None, format: SpecFormat::Markdown, fields, body, parse_findings })
    }

    /// Reads a spec file through the guarded read; `.md` files are Markdown,
    /// everything else JSON.
    pub fn read(path: &Path, sensitive: &SensitivePaths) -> Result<Self> {
        let text = sensitive
            .read_to_string(path)
            .map_err(|source| AgentSpecError::Read { path: path.to_path_buf(), source })?;
        Self::parse_file_text(path, &text)
    }

    /// Parses `text` as the content of the file at `path` (the extension
    /// picks the serialisation).
    pub fn parse_file_text(path: &Path, text: &str) -> Result<Self> {
        let is_markdown = path.extension().is_some_and(|extension| extension == MARKDOWN_EXTENSION);
        let parsed = if is_markdown { Self::from_markdown_str(text) } else { Self::from_json_str(text) };
        match parsed {
            Ok(spec) => Ok(spec.with_path(path)),
            Err(AgentSpecError::Syntax { problem, .. }) => {
                Err(AgentSpecError::Syntax { path: Some(path.to_path_buf()), problem })
            }
            Err(other) => Err(other),
        }
    }

    /// Records the file the spec came from (names, relative prompts and
    /// skill globs anchor on it).
    #[must_use]
    pub fn with_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// The file the spec came from, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Which serialisation it was read from.
    pub fn format(&self) -> SpecFormat {
        self.format
    }

    /// Every field as written (frontmatter for Markdown), unknown keys
    /// included.
    pub fn fields(&self) -> &Map<String, Value> {
        &self.fields
    }

    /// The Markdown body, when it is not blank.
    pub fn body(&self) -> Option<&str> {
        self.body.as_deref()
    }

    /// The spec as one JSON object: the fields, with a Markdown body as
    /// `prompt`.
    pub fn to_json(&self) -> Value {
        let mut fields = self.fields.clone();
        if let Some(body) = &self.body {
            fields.insert("prompt".to_owned(), Value::String(body.clone()));
        }
        Value::Object(fields)
    }

    /// True when two specs would behave identically: same fields and the
    /// same prompt source.
    pub fn same_content(&self, other: &Self) -> bool {
        self.to_json() == other.to_json()
    }

    fn str_field(&self, key: &str) -> Option<&str> {
        self.fields.get(key).and_then(Value::as_str)
    }

    /// The declared `name` (a non-string reads as absent).
    pub fn declared_name(&self) -> Option<&str> {
        self.str_field("name").filter(|name| !name.trim().is_empty())
    }

    /// The file name without its extension.
    pub fn file_stem(&self) -> Option<&str> {
        self.path.as_deref()?.file_stem()?.to_str()
    }

    /// The dispatch name: the declared `name`, which outranks the file
    /// name, or the file stem.
    pub fn name(&self) -> Option<&str> {
        self.declared_name().or_else(|| self.file_stem())
    }

    /// `description` (a non-string reads as absent).
    pub fn description(&self) -> Option<&str> {
        self.str_field("description")
    }

    /// `model`: absent or not a string reads as `"auto"` (no pin).
    pub fn model(&self) -> &str {
        self.str_field("model").unwrap_or(MODEL_AUTO)
    }

    /// True when `model` pins a model (anything but `"auto"`).
    pub fn model_pin(&self) -> Option<&str> {
        Some(self.model()).filter(|model| *model != MODEL_AUTO)
    }

    /// `welcomeMessage`: whitespace-only reads as none, and a long one is
    /// cut at [`WELCOME_MESSAGE_MAX_CHARS`] with the ellipsis inside that
    /// budget.
    pub fn welcome_message(&self) -> Option<String> {
        let message = self.str_field("welcomeMessage")?;
        if message.trim().is_empty() {
            return None;
        }
        if message.chars().count() <= WELCOME_MESSAGE_MAX_CHARS {
            return Some(message.to_owned());
        }
        let keep = WELCOME_MESSAGE_MAX_CHARS - ELLIPSIS.chars().count();
        let mut cut: String = message.chars().take(keep).collect();
        cut.push_str(ELLIPSIS);
        Some(cut)
    }

    /// `keyboardShortcut` (a non-string reads as absent).
    pub fn keyboard_shortcut(&self) -> Option<&str> {
        self.str_field("keyboardShortcut")
    }

    /// The prompt as written: the Markdown body, else `prompt`, else
    /// `systemPrompt` when `prompt` is absent.
    pub fn prompt(&self) -> Option<PromptValue<'_>> {
        if let Some(body) = &self.body {
            return Some(PromptValue { text: body, field: PromptField::Body });
        }
        match self.fields.get("prompt") {
            Some(Value::String(text)) => Some(PromptValue { text, field: PromptField::Prompt }),
            Some(_) => None,
            None => self.str_field("systemPrompt").map(|text| PromptValue { text, field: PromptField::SystemPrompt }),
        }
    }

    /// `tools`: what is mounted.
    pub fn tools(&self) -> ToolList {
        ToolList::read(self.fields.get("tools"))
    }

    /// `allowedTools` (malformed reads as empty).
    pub fn allowed_tools(&self) -> Vec<String> {
        read_string_list(self.fields.get("allowedTools")).unwrap_or_default()
    }

    /// `excludedTools` (malformed reads as empty).
    pub fn excluded_tools(&self) -> Vec<String> {
        read_string_list(self.fields.get("excludedTools")).unwrap_or_default()
    }

    /// The tools this spec grants: `tools` with `excludedTools` subtracted.
    pub fn granted_tools(&self) -> ToolGrants {
        ToolGrants::new(&self.tools(), &self.excluded_tools())
    }

    /// What `allowedTools` auto-approves.
    pub fn auto_approve(&self) -> AutoApprove {
        AutoApprove::new(&self.allowed_tools())
    }

    /// `hooks`, event by event; malformed entries are left out and
    /// reported by [`AgentSpec::diagnostics`].
    pub fn hooks(&self) -> Hooks {
        read_hooks(self.fields.get("hooks"), &mut Findings::default())
    }

    /// `mcpServers`, by name; malformed entries are left out and reported.
    pub fn mcp_servers(&self) -> Vec<McpServer> {
        read_mcp_servers(self.fields.get("mcpServers"), &mut Findings::default())
    }

    /// `includeMcpJson` or its `useLegacyMcpJson` alias. Absent or not a
    /// boolean reads as false; both spellings at once is an error.
    pub fn include_mcp_json(&self) -> Result<bool> {
        match (self.fields.get("includeMcpJson"), self.fields.get("useLegacyMcpJson")) {
            (Some(_), Some(_)) => {
                Err(AgentSpecError::DuplicateSpelling { first: "includeMcpJson", second: "useLegacyMcpJson" })
            }
            (Some(value), None) | (None, Some(value)) => Ok(value.as_bool().unwrap_or(false)),
            (None, None) => Ok(false),
        }
    }

    /// `resources`; malformed entries are left out and reported.
    pub fn resources(&self) -> Vec<Resource> {
        read_resources(self.fields.get("resources"), &mut Findings::default())
    }

    /// One tool's settings, read through its alias group: the first
    /// spelling present wins, as kiro-cli reads them.
    pub fn tools_setting(&self, group: ToolsSettingsGroup) -> Option<ToolSetting<'_>> {
        let settings = self.fields.get("toolsSettings")?.as_object()?;
        group.spellings().iter().find_map(|spelling| {
            settings.get_key_value(*spelling).map(|(key, value)| ToolSetting { key: key.as_str(), value })
        })
    }

    /// Settings of a tool that is in no alias group (an MCP tool, `knowledge`).
    pub fn tools_setting_raw(&self, key: &str) -> Option<&Value> {
        self.fields.get("toolsSettings")?.as_object()?.get(key)
    }

    /// The sub-agent allowlist (`availableAgents`), when declared. `None`
    /// means every agent may be spawned, as upstream.
    pub fn subagent_allowlist(&self) -> Option<SubagentAllowlist> {
        let setting = self.tools_setting(ToolsSettingsGroup::Subagent)?;
        let patterns = read_string_list(setting.value.get("availableAgents"))?;
        Some(SubagentAllowlist::new(patterns))
    }

    /// The field reference's "declares tools: []": `tools` is an explicit
    /// empty list, `allowedTools`, `mcpServers`, `hooks`, `permissions` and
    /// `toolsSettings` are absent or empty, `includePowers` is absent or
    /// false, and `includeMcpJson` is exactly false. Any doubt (a
    /// malformed value, both spellings of the MCP flag) answers false.
    pub fn is_toolless(&self) -> bool {
        let empty_or_absent = |key: &str| match self.fields.get(key) {
            None => true,
            Some(Value::Array(items)) => items.is_empty(),
            Some(Value::Object(map)) => map.is_empty(),
            Some(_) => false,
        };
        let tools_empty = matches!(self.fields.get("tools"), Some(Value::Array(items)) if items.is_empty());
        let powers_off = matches!(self.fields.get("includePowers"), None | Some(Value::Bool(false)));
        let mcp_json_false = matches!(
            (self.fields.get("includeMcpJson"), self.fields.get("useLegacyMcpJson")),
            (Some(Value::Bool(false)), None) | (None, Some(Value::Bool(false)))
        );
        tools_empty
            && ["allowedTools", "mcpServers", "hooks", "permissions", "toolsSettings"].into_iter().all(empty_or_absent)
            && powers_off
            && mcp_json_false
    }

    /// Every finding about this spec, in field order.
    pub fn diagnostics(&self) -> Vec<SpecDiagnostic> {
        let mut findings = Findings(self.parse_findings.clone());
        self.check_keys(&mut findings);
        self.check_scalars(&mut findings);
        self.check_prompt(&mut findings);
        for key in ["tools", "allowedTools", "excludedTools"] {
            check_string_list(&self.fields, key, &mut findings);
        }
        if !self.fields.contains_key("tools") {
            findings.push(SpecDiagnostic::notice(
                "no-tools",
                "tools",
                "absent, so the agent mounts no tools (none are inferred); write [\"*\"] for every tool",
            ));
        }
        self.check_include_mcp_json(&mut findings);
        read_hooks(self.fields.get("hooks"), &mut findings);
        read_mcp_servers(self.fields.get("mcpServers"), &mut findings);
        read_resources(self.fields.get("resources"), &mut findings);
        self.check_tools_settings(&mut findings);
        if let Some(Value::Object(_)) | None = self.fields.get("toolAliases") {
        } else {
            findings.push(
                SpecDiagnostic::error(
                    "wrong-type",
                    "toolAliases",
                    "must be an object mapping `@server/tool` to a new name",
                )
                .rejected_by_kiro_cli(),
            );
        }
        findings.0
    }

    /// True when any finding is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics().iter().any(|diagnostic| diagnostic.severity == SpecSeverity::Error)
    }

    fn check_keys(&self, findings: &mut Findings) {
        for key in self.fields.keys() {
            if KIRO_CLI_KEYS.contains(&key.as_str()) {
                continue;
            }
            if self.format == SpecFormat::Markdown && key == "prompt" {
                continue;
            }
            let diagnostic = if CAIRN_ONLY_KEYS.contains(&key.as_str()) {
                SpecDiagnostic::notice(
                    "not-a-kiro-cli-key",
                    key.clone(),
                    format!("Cairn reads `{key}`, but kiro-cli 2.x does not know it and drops the whole file"),
                )
            } else {
                SpecDiagnostic::warning(
                    "unknown-key",
                    key.clone(),
                    format!(
                        "unknown key, kept as written but unused; kiro-cli drops the whole file for it, so remove it{}",
                        suggestion(key).map(|known| format!(" or spell it `{known}`")).unwrap_or_default()
                    ),
                )
            };
            findings.push(diagnostic.rejected_by_kiro_cli());
        }
        if self.format == SpecFormat::Markdown {
            findings.push(SpecDiagnostic::notice(
                "markdown-form",
                "",
                "kiro-cli 2.x loads only .json agents; this Markdown spec is read by Cairn and by Kiro CLI 3",
            ));
        }
    }

    fn check_scalars(&self, findings: &mut Findings) {
        match self.fields.get("name") {
            None => findings.push(
                SpecDiagnostic::warning(
                    "missing-name",
                    "name",
                    format!(
                        "no `name`: Cairn uses the file name `{}`, but kiro-cli drops a file without one; add \"name\"",
                        self.file_stem().unwrap_or("?")
                    ),
                )
                .rejected_by_kiro_cli(),
            ),
            Some(Value::String(name)) if name.trim().is_empty() => findings.push(
                SpecDiagnostic::warning("empty-name", "name", "the name is empty; Cairn uses the file name instead")
                    .rejected_by_kiro_cli(),
            ),
            Some(Value::String(_)) => {}
            Some(other) => findings.push(
                SpecDiagnostic::warning(
                    "wrong-type",
                    "name",
                    format!("is {}, read as absent (the file name is used); make it a string", type_name(other)),
                )
                .rejected_by_kiro_cli(),
            ),
        }
        for key in ["description", "welcomeMessage", "keyboardShortcut", "$schema"] {
            match self.fields.get(key) {
                None | Some(Value::String(_) | Value::Null) => {}
                Some(other) => findings.push(
                    SpecDiagnostic::warning(
                        "wrong-type",
                        key,
                        format!("is {}, read as absent; make it a string", type_name(other)),
                    )
                    .rejected_by_kiro_cli(),
                ),
            }
        }
        match self.fields.get("model") {
            None | Some(Value::String(_) | Value::Null) => {}
            Some(other) => findings.push(
                SpecDiagnostic::warning(
                    "wrong-type",
                    "model",
                    format!("is {}, read as \"auto\" (no pin); write the model id as a string", type_name(other)),
                )
                .rejected_by_kiro_cli(),
            ),
        }
        if let Some(Value::String(message)) = self.fields.get("welcomeMessage") {
            if message.trim().is_empty() {
                findings.push(SpecDiagnostic::notice(
                    "welcome-blank",
                    "welcomeMessage",
                    "is blank, so nothing is shown",
                ));
            } else if message.chars().count() > WELCOME_MESSAGE_MAX_CHARS {
                findings.push(SpecDiagnostic::notice(
                    "welcome-truncated",
                    "welcomeMessage",
                    format!("is longer than {WELCOME_MESSAGE_MAX_CHARS} characters and is shown cut short"),
                ));
            }
        }
        if let Some(shortcut) = self.keyboard_shortcut()
            && let Some(problem) = shortcut_problem(shortcut)
        {
            findings.push(SpecDiagnostic::warning(
                "keyboard-shortcut",
                "keyboardShortcut",
                format!("`{shortcut}` {problem}; kiro-cli clears it"),
            ));
        }
    }

    fn check_prompt(&self, findings: &mut Findings) {
        match (self.fields.get("prompt"), self.fields.get("systemPrompt")) {
            (Some(Value::String(_)), Some(_)) => findings.push(SpecDiagnostic::warning(
                "system-prompt-ignored",
                "systemPrompt",
                "ignored because `prompt` is set; keep one of the two",
            )),
            (Some(Value::String(_) | Value::Null) | None, _) => {}
            (Some(other), _) => findings.push(
                SpecDiagnostic::warning(
                    "wrong-type",
                    "prompt",
                    format!("is {}, read as no prompt; write text or a file:// URI", type_name(other)),
                )
                .rejected_by_kiro_cli(),
            ),
        }
        if let Some(Value::String(_)) = self.fields.get("systemPrompt")
            && self.fields.get("prompt").is_none()
        {
            findings.push(SpecDiagnostic::notice(
                "system-prompt-spelling",
                "systemPrompt",
                "read as the prompt; prefer the `prompt` spelling, which every kiro-cli version accepts",
            ));
        }
        if self.format == SpecFormat::Markdown
            && self.body.is_some()
            && let Some(Value::String(_)) = self.fields.get("prompt")
        {
            findings.push(SpecDiagnostic::warning(
                "frontmatter-prompt-ignored",
                "prompt",
                "ignored because the Markdown body is the prompt; remove one of the two",
            ));
        }
    }

    fn check_include_mcp_json(&self, findings: &mut Findings) {
        if let Err(error) = self.include_mcp_json() {
            findings.push(
                SpecDiagnostic::error("duplicate-spelling", "useLegacyMcpJson", error.to_string())
                    .rejected_by_kiro_cli(),
            );
            return;
        }
        for key in ["includeMcpJson", "useLegacyMcpJson"] {
            match self.fields.get(key) {
                None | Some(Value::Bool(_)) => {}
                Some(other) => findings.push(
                    SpecDiagnostic::warning(
                        "wrong-type",
                        key,
                        format!("is {}, read as false; write true or false", type_name(other)),
                    )
                    .rejected_by_kiro_cli(),
                ),
            }
        }
    }

    fn check_tools_settings(&self, findings: &mut Findings) {
        let settings = match self.fields.get("toolsSettings") {
            None => return,
            Some(Value::Object(settings)) => settings,
            Some(other) => {
                findings.push(
                    SpecDiagnostic::error(
                        "wrong-type",
                        "toolsSettings",
                        format!("is {}; it must be an object keyed by tool name", type_name(other)),
                    )
                    .rejected_by_kiro_cli(),
                );
                return;
            }
        };
        for group in ToolsSettingsGroup::ALL {
            let present: Vec<&str> =
                group.spellings().iter().copied().filter(|spelling| settings.contains_key(*spelling)).collect();
            if let [winner, rest @ ..] = present.as_slice() {
                for ignored in rest {
                    findings.push(SpecDiagnostic::warning(
                        "settings-alias-shadowed",
                        format!("toolsSettings.{ignored}"),
                        format!("ignored: `toolsSettings.{winner}` is the same tool's settings and is read first"),
                    ));
                }
            }
        }
        if let Some(setting) = self.tools_setting(ToolsSettingsGroup::Subagent) {
            let path = format!("toolsSettings.{}", setting.key);
            if setting.value.get("allowedAgents").is_some() {
                findings.push(SpecDiagnostic::warning(
                    "allowed-agents-ignored",
                    format!("{path}.allowedAgents"),
                    "kiro-cli silently ignores `allowedAgents`; use `availableAgents` (who may be spawned) or `trustedAgents` (who runs without prompts)",
                ));
            }
            if let Some(value) = setting.value.get("availableAgents")
                && read_string_list(Some(value)).is_none()
            {
                findings.push(SpecDiagnostic::error(
                    "wrong-type",
                    format!("{path}.availableAgents"),
                    "must be a list of agent names or globs",
                ));
            }
        }
        if let Some(setting) = self.tools_setting(ToolsSettingsGroup::Shell)
            && setting.value.get("alwaysAllow").is_some()
        {
            findings.push(SpecDiagnostic::warning(
                "settings-key-ignored",
                format!("toolsSettings.{}.alwaysAllow", setting.key),
                "kiro-cli ignores `alwaysAllow`; use `allowedCommands`",
            ));
        }
        for group in [ToolsSettingsGroup::FsRead, ToolsSettingsGroup::FsWrite] {
            if let Some(setting) = self.tools_setting(group)
                && setting.value.get("autoApprove").is_some()
            {
                findings.push(SpecDiagnostic::warning(
                    "settings-key-ignored",
                    format!("toolsSettings.{}.autoApprove", setting.key),
                    "kiro-cli ignores `autoApprove` here; list the tool in allowedTools or use `allowedPaths`",
                ));
            }
        }
    }
}

fn check_string_list(fields: &Map<String, Value>, key: &str, findings: &mut Findings) {
    let Some(value) = fields.get(key) else { return };
    if read_string_list(Some(value)).is_none() {
        let read_as = if key == "tools" { "no tools are granted" } else { "it is read as empty" };
        let what = match value {
            Value::Array(_) => "has an entry that is not a string".to_owned(),
            other => format!("is {} instead of a list", type_name(other)),
        };
        let diagnostic = SpecDiagnostic::warning(
            "wrong-type",
            key,
            format!("{what}, so {read_as}; write a list of names such as [\"fs_read\"]"),
        );
        // kiro-cli does not know excludedTools at all; that is reported once.
        findings.push(if key == "excludedTools" { diagnostic } else { diagnostic.rejected_by_kiro_cli() });
    }
}

static SHORTCUT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^((ctrl|shift|alt)\+)+([a-z0-9]|f[1-9]|f1[0-2]|tab)$").expect("valid regex"));

fn shortcut_problem(shortcut: &str) -> Option<&'static str> {
    let normalized = shortcut.to_ascii_lowercase();
    if !SHORTCUT.is_match(&normalized) {
        return Some("is not ctrl/shift/alt plus a letter, digit, f1-f12 or tab");
    }
    RESERVED_SHORTCUTS.contains(&normalized.as_str()).then_some("is reserved by kiro-cli")
}

/// A near-miss spelling of a known key (case or separator only).
fn suggestion(key: &str) -> Option<&'static str> {
    let folded =
        |text: &str| text.chars().filter(|c| c.is_ascii_alphanumeric()).collect::<String>().to_ascii_lowercase();
    let wanted = folded(key);
    KIRO_CLI_KEYS.iter().chain(CAIRN_ONLY_KEYS).copied().find(|known| folded(known) == wanted)
}
