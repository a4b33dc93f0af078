//! The agent part of a session: its prompt and steering files, resolved
//! through `cairn-agent-spec` and read only through the guard.

use std::collections::BTreeMap;

use cairn_agent_spec::projection::{AgentBackend, ProjectionInput, ProjectionOptions, project};
use cairn_agent_spec::{AgentCatalog, Pins, ResolveContext, resolve_prompt, skill_globs, steering_files};
use serde::Serialize;

use crate::agent_scope::AgentScope;
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
    /// What the user should know: unread files, redactions, refusals, and
    /// what the backend will not receive.
    pub notices: Vec<String>,
    /// Which skills, steering and triggers the agent's context carries.
    pub scope: AgentScope,
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
    pub fn resolve(catalog: &AgentCatalog, name: &str, pins: &Pins, context: &ResolveContext) -> Result<Self> {
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
        let scope = AgentScope::custom(skill_globs(&resolved.spec, context));
        Ok(Self { name: resolved.name, prompt: prompt.text, steering: docs, notices, scope })
    }

    /// The skill scope alone of the agent `name` (its `skill://` mapping),
    /// for a surface that serves skills but no prompt (the MCP server's
    /// `skill_search`). Reads neither the prompt nor the steering.
    ///
    /// # Errors
    ///
    /// [`ContextError::Agent`] when the name does not resolve.
    pub fn resolve_scope(
        catalog: &AgentCatalog,
        name: &str,
        pins: &Pins,
        context: &ResolveContext,
    ) -> Result<AgentScope> {
        let resolved =
            catalog.resolve(name, pins).map_err(|source| ContextError::Agent { name: name.to_owned(), source })?;
        Ok(AgentScope::custom(skill_globs(&resolved.spec, context)))
    }

    /// [`Self::resolve`] for a session on `backend`: the session-start
    /// notices name what the backend will not receive (from the spec's
    /// projection there), and the steering is dropped where the backend
    /// does not read it.
    ///
    /// # Errors
    ///
    /// As [`Self::resolve`].
    pub fn resolve_for_backend(
        catalog: &AgentCatalog,
        name: &str,
        pins: &Pins,
        context: &ResolveContext,
        backend: AgentBackend,
    ) -> Result<Self> {
        let mut agent = Self::resolve(catalog, name, pins, context)?;
        let resolved =
            catalog.resolve(name, pins).map_err(|source| ContextError::Agent { name: name.to_owned(), source })?;
        let peers = BTreeMap::new();
        let input = ProjectionInput {
            name: &resolved.name,
            spec: &resolved.spec,
            scope: resolved.scope,
            prompt: Some(&agent.prompt),
            peers: &peers,
        };
        let projection = project(&input, backend, &ProjectionOptions::default());
        agent.notices.extend(projection.notices);
        if !backend.reads_spec_steering() {
            agent.scope.steering_withheld = true;
            agent.steering.clear();
        }
        Ok(agent)
    }
}
