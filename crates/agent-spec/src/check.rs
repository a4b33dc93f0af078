//! `check`: one report per file, saying whether Cairn can use it and
//! whether kiro-cli's strict loader would drop it.

use std::path::{Path, PathBuf};

use cairn_guard::SensitivePaths;
use serde::Serialize;

use crate::diagnostic::{SpecDiagnostic, SpecSeverity};
use crate::error::AgentSpecError;
use crate::spec::AgentSpec;

/// The verdict on one spec file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    /// The file checked.
    pub file: PathBuf,
    /// True when Cairn finds no error.
    pub ok: bool,
    /// The dispatch name, when the file parses.
    pub name: Option<String>,
    /// What Cairn cannot use as written.
    pub errors: Vec<String>,
    /// What Cairn reads differently from how it is written, or ignores.
    pub warnings: Vec<String>,
    /// True when kiro-cli's strict loader drops the whole file.
    pub kiro_cli_rejects: bool,
    /// Worth knowing; nothing lost.
    pub notices: Vec<String>,
    /// Every finding with its rule code and location.
    #[serde(skip)]
    pub diagnostics: Vec<SpecDiagnostic>,
}

impl CheckReport {
    /// Builds the report for a parsed spec.
    pub fn for_spec(file: &Path, spec: &AgentSpec) -> Self {
        let diagnostics = spec.diagnostics();
        let pick = |severity| {
            diagnostics.iter().filter(|d| d.severity == severity).map(ToString::to_string).collect::<Vec<_>>()
        };
        let errors = pick(SpecSeverity::Error);
        Self {
            file: file.to_path_buf(),
            ok: errors.is_empty(),
            name: spec.name().map(str::to_owned),
            warnings: pick(SpecSeverity::Warning),
            notices: pick(SpecSeverity::Notice),
            kiro_cli_rejects: diagnostics.iter().any(|d| d.kiro_cli_rejects),
            errors,
            diagnostics,
        }
    }

    /// Builds the report for a file that does not parse: kiro-cli cannot
    /// read it either.
    pub fn for_error(file: &Path, error: &AgentSpecError) -> Self {
        let message = match error {
            AgentSpecError::Syntax { problem, .. } => problem.to_string(),
            other => std::iter::successors(Some(other as &dyn std::error::Error), |e| e.source())
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(": "),
        };
        Self {
            file: file.to_path_buf(),
            ok: false,
            name: None,
            errors: vec![message],
            warnings: Vec::new(),
            kiro_cli_rejects: true,
            notices: Vec::new(),
            diagnostics: Vec::new(),
        }
    }
}

/// Reads and checks one file.
pub fn check_file(file: &Path, sensitive: &SensitivePaths) -> CheckReport {
    match AgentSpec::read(file, sensitive) {
        Ok(spec) => CheckReport::for_spec(file, &spec),
        Err(error) => CheckReport::for_error(file, &error),
    }
}
