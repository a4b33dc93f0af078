//! What one spec becomes on each backend: every concern's ruling, the
//! projected values (the MCP array, the per-tool deny set, the harness's
//! own settings, the KAS wire object), the zero-tool ban signal and the
//! session-start notices. A projection is a value; rendering and writing
//! it are the caller's business.

mod build;
mod checkout;
mod permissions;
mod rulings;
mod servers;
mod vocabulary;

pub use build::{AgentProjection, MAX_KAS_SUBAGENTS, ProjectionInput, ProjectionOptions, project};
pub use checkout::{CHECKOUT_KEYS, Narrowed, narrow_checkout_spec};
pub use permissions::{
    Ceiling, Effect, FILE_TOOL_BUILTINS, PermissionRule, Permissions, SPEC_PERMISSIONS_MIN_ENGINE,
    SPEC_PERMISSIONS_MIN_KIRO_CLI, Version, WithheldGrant, derive_permissions, spec_permissions_accepted,
};
pub use rulings::{ruling, rulings};
pub use servers::{CONTROL_PLANE_SERVERS, DeniedTool, WithheldServer, claude_rule_name, sanitize_claude_name};
pub use vocabulary::{
    AgentBackend, Concern, Disposition, PerToolDeny, ProjectionKind, Ruling, WithholdClass, ZeroToolBan,
};

/// Why a projection could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ProjectionError {
    /// A backend name that is not one of [`AgentBackend::ALL`].
    #[error("unknown backend `{name}`; known: {known}")]
    UnknownBackend {
        /// As given.
        name: String,
        /// The accepted names.
        known: String,
    },
}
