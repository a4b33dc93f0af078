//! Agent spec files: the JSON and Markdown agent definitions kiro-cli users
//! keep in `~/.kiro/agents` and a project's `.kiro/agents`.
//!
//! - [`AgentSpec`] parses either serialisation (Markdown frontmatter must be
//!   JSON-shaped: anchors, aliases, tags, non-string keys and `.inf`/`.nan`
//!   are refused with the line that uses them), keeps unknown keys for
//!   round-tripping, and offers the typed view with the field reference's
//!   coercions ([`AgentSpec::model`], [`AgentSpec::welcome_message`],
//!   [`AgentSpec::hooks`], [`AgentSpec::mcp_servers`], ...).
//! - [`AgentSpec::diagnostics`] explains every rule a spec breaks, and
//!   whether kiro-cli's strict loader would drop the file for it;
//!   [`check_file`] turns that into a per-file [`CheckReport`].
//! - [`AgentCatalog`] and [`CatalogCache`] resolve a name to a file across the
//!   user and project directories: declared names outrank file names,
//!   `.json` beats a `.md` twin, differing duplicates are refused unless
//!   [`Pins`] pick one, and a project spec shadows a user spec.
//! - [`resolve_prompt`], [`skill_globs`] and [`steering_files`] resolve the
//!   prompt and the resources safely, reading only through `cairn-guard`.
//! - [`ToolGrants`], [`AutoApprove`], [`AgentSpec::tools_setting`],
//!   [`SubagentAllowlist`] and [`AgentSpec::is_toolless`] answer what the
//!   rest of the system asks of a spec.
//!
//! ```
//! use cairn_agent_spec::AgentSpec;
//!
//! let spec = AgentSpec::from_markdown_str(
//!     "---\nname: reviewer\ntools: read, grep\nmodel: {id: x}\n---\nReview the diff.\n",
//! )?;
//! assert_eq!(spec.name(), Some("reviewer"));
//! assert_eq!(spec.model(), "auto"); // a non-string model reads as no pin
//! assert!(spec.granted_tools().grants_builtin("fs_read"));
//! assert_eq!(spec.prompt().map(|prompt| prompt.text), Some("Review the diff.\n"));
//! # Ok::<(), cairn_agent_spec::AgentSpecError>(())
//! ```
//!
//! What this crate deliberately does not do: it never writes a spec file
//! (pins are data the caller stores), reads no environment variable or
//! configuration file (the directories, home, variables and project come
//! in through [`AgentDirs`] and [`ResolveContext`]), does not start MCP
//! servers or run hooks, and does not match skill globs against a skill
//! catalog: it hands the globs to whoever owns the skills.

#![warn(missing_docs)]

mod check;
pub mod constants;
mod context;
mod diagnostic;
mod discovery;
mod error;
mod hooks;
mod mcp;
mod parse;
pub mod projection;
mod prompt;
mod resources;
mod spec;
mod steering;
mod tools;

pub use check::{CheckReport, check_file};
pub use context::ResolveContext;
pub use diagnostic::{SpecDiagnostic, SpecSeverity};
pub use discovery::{
    AgentCatalog, AgentDirs, CatalogCache, ListEntry, LoadedFile, Pins, ResolvedSpec, Scope, validate_pin,
};
pub use error::{AgentSpecError, Result, SyntaxProblem};
pub use hooks::{Hooks, SpecHookEntry, SpecHookEvent};
pub use mcp::{McpServer, McpTransport, SecretMap};
pub use prompt::{PromptSource, ResolvedPrompt, resolve_prompt};
pub use resources::Resource;
pub use spec::{AgentSpec, PromptField, PromptValue, SpecFormat, ToolSetting, ToolsSettingsGroup};
pub use steering::{Steering, skill_globs, steering_files};
pub use tools::{
    AutoApprove, AutoApproveEntry, AutoApproveKind, GrantSummary, SubagentAllowlist, ToolGrants, ToolList,
    builtin_family, builtin_names, canonical_builtin,
};

#[cfg(test)]
mod tests;
