//! Hooks for Cairn: let users steer tool use and prompts with configuration
//! and scripts without opening a hole.
//!
//! - [`ConfigHooks`] compiles the `hooks` config section: tool approve/deny
//!   patterns (deny wins), auto-replies, transforms and context rules,
//!   evaluated in that order ([`ConfigHooks::tool_decision`],
//!   [`ConfigHooks::process_message`]).
//! - [`merge_user_hooks`] validates user hook scripts (object form or the
//!   hooks-array form, see [`project_hook_array`]) and appends them to the
//!   bundled [`HookSet`], reporting every dropped entry with a
//!   [`DropReason`].
//! - [`HookRunner`] fires the hooks of an event: JSON on stdin, own process
//!   group, timeout that kills the group, output redacted with
//!   `cairn-guard` and capped, exit 2 blocks a `preToolUse`,
//!   `fail_closed` hooks block on failure.
//!
//! ```
//! use cairn_hooks::{ConfigHooks, HooksConfig, MessageOutcome, ToolDecision};
//!
//! let config = HooksConfig::from_json_str(r#"{
//!     "auto_approve_tools": ["fs_read", "@git/status"],
//!     "auto_deny_tools": ["execute_bash"],
//!     "auto_replies": {"^ping$": "pong"},
//!     "context_rules": {"deploy, release": "Releases are cut on Tuesdays."}
//! }"#).unwrap();
//! let (hooks, warnings) = ConfigHooks::compile(&config).unwrap();
//! assert!(warnings.is_empty());
//! // Deny covers the tool under its alias too.
//! assert_eq!(hooks.tool_decision("shell"), ToolDecision::Deny { pattern: "execute_bash".into() });
//! assert!(matches!(hooks.process_message("PING"), MessageOutcome::Reply { .. }));
//! let MessageOutcome::Forward { context, .. } = hooks.process_message("when is the next release?") else { panic!() };
//! assert_eq!(context, ["Releases are cut on Tuesdays."]);
//! ```
//!
//! What this crate deliberately does not do: it reads no config file or
//! environment variable (the binary passes values in), it does not frame
//! hook output for a prompt (the context builder does), it has no JSON
//! decision protocol beyond exit codes, and it does not cache hook results.
//! Hook commands run with the user's own permissions; validation limits
//! *which* files may be hooks, not what they do.

#![warn(missing_docs)]

mod config;
pub mod constants;
mod error;
mod event;
mod left_out;
mod matcher;
mod merge;
mod projection;
mod reap;
mod runner;
#[cfg(test)]
mod tests;

pub use config::{
    ConfigHooks, ConfigWarning, ContextRule, ContextRules, HooksConfig, MessageOutcome, Pairs, ToolDecision,
    ToolPattern,
};
pub use error::{HooksError, Result};
pub use event::{HookEvent, Trigger, classify_trigger};
pub use left_out::{DropReason, DroppedHook, HookNotice};
pub use matcher::{ToolMatcher, ToolName, canonical_tool, is_known_builtin};
pub use merge::{HookEntry, HookSet, MergeOptions, MergeReport, merge_user_hooks, validate_command, validate_matcher};
pub use projection::{ProjectedHook, Projection, project_hook_array};
pub use runner::{
    CapturedOutput, EventDecision, HookInput, HookOutcome, HookRun, HookRunner, RunnerOptions, Verdict, run_hook,
};
