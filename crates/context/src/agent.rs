//! The agent part of a session: its prompt and steering files, resolved
//! through `cairn-agent-spec` and read only through the guard.

use cairn_agent_spec::{Catalog, Pins, ResolveContext, resolve_prompt, steering_files};
use serde::Serialize;

use crate::error::{ContextError, Result};
use crate::sources::SteeringDoc;

/// An agent's prompt and steering, ready for [`crate::SessionRequest`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AgentContext {
    /// The agent name.
    pub name: String,
    /// The prompt text (credentials redacted by agent-spec); empty when none.
    pub prompt: String,
    /// Steering files, in resource order.
    pub steering: Vec<SteeringDoc>,
    /// What the user should know: unread files, redactions, refusals.
    pub notices: Vec<String>,
}

impl AgentContext {
    /// An agent given as data.
    pub fn new(name: impl Into<String>, prompt: impl Into<String>) -> Self {
        Self { name: name.into(), prompt: prompt.into(), ..Self::default() }
    }

    /// Resolves `name` in the catalog, its prompt and its steering files.
    /// A steering file the guard refuses or that cannot be read is left
    /// out with a notice.
    ///
    /// # Errors
    ///
    /// [`ContextError::Agent`] when the name does not resolve or the prompt
    /// is refused (sensitive path, untrusted project prompt).
    pub fn resolve(catalog: &Catalog, name: &str, pins: &Pins, context: &ResolveContext) -> Result<Self> {
        let agent_error = |source| ContextError::Agent { name: name.to_owned(), source };
        let resolved = catalog.resolve(name, pins).map_err(agent_error)?;
        let prompt = resolve_prompt(&resolved.spec, resolved.scope, context).map_err(agent_error)?;
        let mut notices = resolved.warnings.clone();
        notices.extend(prompt.notices);
        let steering = steering_files(&resolved.spec, context);
        notices.extend(steering.notices);
        let mut docs = Vec::with_capacity(steering.files.len());
        for path in steering.files {
            match context.sensitive.read_to_string(&path) {
                Ok(text) => docs.push(SteeringDoc { path, text }),
                Err(error) => notices.push(format!("{}: not read ({error})", path.display())),
            }
        }
        Ok(Self { name: resolved.name, prompt: prompt.text, steering: docs, notices })
    }
}
