//! Findings about one spec: what Cairn refuses, what it reads differently
//! from how it is written, and what kiro-cli would do with the file.

use std::fmt;

use serde::Serialize;

/// How much a finding matters to Cairn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SpecSeverity {
    /// Cairn cannot use this part of the spec as written.
    Error,
    /// Cairn reads the value differently from how it is written, or
    /// ignores it.
    Warning,
    /// Worth knowing; nothing is lost.
    Notice,
}

/// One finding, located by a JSON-style path (`hooks.preToolUse[0].command`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SpecDiagnostic {
    /// How much it matters to Cairn.
    pub severity: SpecSeverity,
    /// Stable identifier of the rule (`unknown-key`, `hook-missing-command`).
    pub code: &'static str,
    /// Where in the spec (empty for the whole file).
    pub path: String,
    /// One sentence a user can act on.
    pub message: String,
    /// True when kiro-cli's strict loader drops the whole file for this.
    pub kiro_cli_rejects: bool,
}

impl SpecDiagnostic {
    pub(crate) fn new(
        severity: SpecSeverity,
        code: &'static str,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self { severity, code, path: path.into(), message: message.into(), kiro_cli_rejects: false }
    }

    pub(crate) fn error(code: &'static str, path: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(SpecSeverity::Error, code, path, message)
    }

    pub(crate) fn warning(code: &'static str, path: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(SpecSeverity::Warning, code, path, message)
    }

    pub(crate) fn notice(code: &'static str, path: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(SpecSeverity::Notice, code, path, message)
    }

    /// Marks the finding as one kiro-cli's strict loader drops the file for.
    pub(crate) fn rejected_by_kiro_cli(mut self) -> Self {
        self.kiro_cli_rejects = true;
        self
    }
}

impl fmt::Display for SpecDiagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() { f.write_str(&self.message) } else { write!(f, "{}: {}", self.path, self.message) }
    }
}

/// Collects findings while a reader walks the spec.
#[derive(Debug, Default)]
pub(crate) struct Findings(pub(crate) Vec<SpecDiagnostic>);

impl Findings {
    pub(crate) fn push(&mut self, diagnostic: SpecDiagnostic) {
        self.0.push(diagnostic);
    }
}

/// JSON type name for messages.
pub(crate) fn type_name(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "an object",
    }
}
