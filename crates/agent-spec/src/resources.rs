//! `resources`: `skill://` globs, `file://` steering globs and knowledge
//! base objects.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::diagnostic::{Findings, SpecDiagnostic, type_name};

/// One valid `resources` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Resource {
    /// `file://<glob>`: steering files.
    File {
        /// The URI as written.
        uri: String,
    },
    /// `skill://<glob>`: skills mapped to the agent.
    Skill {
        /// The URI as written.
        uri: String,
    },
    /// `{"type": "knowledgeBase", ...}`: left to the backend, never read.
    KnowledgeBase {
        /// The object as written.
        fields: Map<String, Value>,
    },
}

pub(crate) fn read_resources(value: Option<&Value>, findings: &mut Findings) -> Vec<Resource> {
    let items = match value {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Array(items)) => items,
        Some(other) => {
            findings.push(
                SpecDiagnostic::error("wrong-type", "resources", format!("is {}; it must be a list", type_name(other)))
                    .rejected_by_kiro_cli(),
            );
            return Vec::new();
        }
    };
    let mut resources = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let path = format!("resources[{index}]");
        match item {
            Value::String(uri) => {
                let trimmed = uri.trim();
                let (scheme, rest) = if let Some(rest) = trimmed.strip_prefix("file://") {
                    ("file://", rest)
                } else if let Some(rest) = trimmed.strip_prefix("skill://") {
                    ("skill://", rest)
                } else {
                    let fix = if trimmed.contains("://") {
                        "only file:// and skill:// URIs are resources".to_owned()
                    } else {
                        format!("prefix it, e.g. `file://{trimmed}`")
                    };
                    findings.push(
                        SpecDiagnostic::error(
                            "bad-resource",
                            path,
                            format!("`{uri}` must start with file:// or skill://, and kiro-cli drops the whole file for it; {fix}"),
                        )
                        .rejected_by_kiro_cli(),
                    );
                    continue;
                };
                if rest.trim().is_empty() {
                    findings.push(
                        SpecDiagnostic::error("bad-resource", path, format!("`{uri}` names no path after {scheme}"))
                            .rejected_by_kiro_cli(),
                    );
                    continue;
                }
                resources.push(if scheme == "file://" {
                    Resource::File { uri: trimmed.to_owned() }
                } else {
                    Resource::Skill { uri: trimmed.to_owned() }
                });
            }
            Value::Object(fields) => {
                if fields.get("type").and_then(Value::as_str) != Some("knowledgeBase") {
                    findings.push(
                        SpecDiagnostic::error(
                            "bad-resource",
                            path,
                            "an object resource must have \"type\": \"knowledgeBase\", and kiro-cli drops the whole file otherwise",
                        )
                        .rejected_by_kiro_cli(),
                    );
                    continue;
                }
                match fields.get("source") {
                    Some(Value::String(source)) if source.starts_with("file://") => {}
                    _ => findings.push(SpecDiagnostic::warning(
                        "knowledge-base-source",
                        format!("{path}.source"),
                        "a knowledge base's source should be a file:// path; engines that check it drop this entry",
                    )),
                }
                if let Some(index_type) = fields.get("indexType")
                    && !matches!(index_type.as_str(), Some("best" | "fast"))
                {
                    findings.push(SpecDiagnostic::warning(
                        "knowledge-base-index-type",
                        format!("{path}.indexType"),
                        "must be \"best\" or \"fast\"",
                    ));
                }
                resources.push(Resource::KnowledgeBase { fields: fields.clone() });
            }
            other => findings.push(
                SpecDiagnostic::error(
                    "bad-resource",
                    path,
                    format!("is {}; a resource must be a string (file:// or skill://) or an object", type_name(other)),
                )
                .rejected_by_kiro_cli(),
            ),
        }
    }
    resources
}
