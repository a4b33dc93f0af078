//! What merging and projecting user hooks leave out, and what they tell a
//! kept hook's author: shared by the merge (`merge.rs`) and the host
//! projections (`projection.rs`).

use std::fmt;

use serde::Serialize;

use crate::constants::{MAX_MATCHER_LEN, MAX_TOTAL_USER_HOOKS, MAX_USER_HOOKS_PER_EVENT};

/// Why a user hook entry was left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum DropReason {
    /// The user hooks are neither an object keyed by event nor a hooks array.
    NotHooks,
    /// An event key is not one of the five events.
    UnknownEvent,
    /// An event's value is not a list.
    EventNotAList,
    /// A list item is not an object.
    NotAnObject,
    /// The entry has no `command`.
    MissingCommand,
    /// `command` is not a string.
    CommandNotString,
    /// `command` has characters outside `[a-zA-Z0-9/_.-]`.
    CommandCharacters,
    /// `command` is not an absolute path.
    CommandNotAbsolute,
    /// `command` does not name an existing file.
    CommandNotFound,
    /// `command` resolves into a sensitive location.
    SensitiveCommand {
        /// Which guard rule classified it.
        reason: String,
    },
    /// `matcher` is present but not a string.
    MatcherNotString,
    /// `matcher` has characters outside `[a-zA-Z0-9_.*@/-]`.
    MatcherCharacters,
    /// `matcher` is longer than 200 characters.
    MatcherTooLong {
        /// Its length in characters.
        length: usize,
    },
    /// `matcher` passes the character rule but is not a usable matcher.
    MatcherInvalid {
        /// Why it cannot be compiled.
        reason: String,
    },
    /// Same `(command, matcher)` as an earlier hook of the event.
    Duplicate,
    /// More than the per-event number of user hooks.
    PerEventCap,
    /// More than the total number of user hooks.
    TotalCap,
    /// Hooks array: the action is not a command (an agent prompt).
    NotACommandAction {
        /// The action type as written.
        action: String,
    },
    /// Hooks array: the trigger belongs to another host's event set.
    UnsupportedTrigger {
        /// The trigger as written.
        trigger: String,
    },
    /// Hooks array: the trigger name is not known at all.
    UnknownTrigger {
        /// The trigger as written.
        trigger: String,
    },
    /// Hooks array: the item has no `trigger`.
    MissingTrigger,
    /// Hooks array: `enabled: false`.
    Disabled,
    /// Hooks array: `confirm: true` (nothing here can ask for confirmation).
    NeedsConfirmation,
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DropReason::NotHooks => f.write_str("user hooks must be an object keyed by event or a hooks array"),
            DropReason::UnknownEvent => f.write_str("not a hook event"),
            DropReason::EventNotAList => f.write_str("the event's hooks are not a list"),
            DropReason::NotAnObject => f.write_str("entry is not an object"),
            DropReason::MissingCommand => f.write_str("entry has no command"),
            DropReason::CommandNotString => f.write_str("command is not a string"),
            DropReason::CommandCharacters => f.write_str("command may only contain [a-zA-Z0-9/_.-]"),
            DropReason::CommandNotAbsolute => f.write_str("command must be an absolute path"),
            DropReason::CommandNotFound => f.write_str("command is not an existing file"),
            DropReason::SensitiveCommand { reason } => {
                write!(f, "command resolves into a sensitive location ({reason})")
            }
            DropReason::MatcherNotString => f.write_str("matcher is not a string"),
            DropReason::MatcherCharacters => f.write_str("matcher may only contain [a-zA-Z0-9_.*@/-]"),
            DropReason::MatcherTooLong { length } => {
                write!(f, "matcher is {length} characters long (at most {MAX_MATCHER_LEN})")
            }
            DropReason::MatcherInvalid { reason } => write!(f, "matcher is not usable: {reason}"),
            DropReason::Duplicate => f.write_str("same command and matcher as an earlier hook"),
            DropReason::PerEventCap => write!(f, "more than {MAX_USER_HOOKS_PER_EVENT} user hooks on this event"),
            DropReason::TotalCap => write!(f, "more than {MAX_TOTAL_USER_HOOKS} user hooks in total"),
            DropReason::NotACommandAction { action } => {
                write!(f, "action {action:?} is not a command; it does not run")
            }
            DropReason::UnsupportedTrigger { trigger } => {
                write!(f, "trigger {trigger:?} has no hook event here; it does not run")
            }
            DropReason::UnknownTrigger { trigger } => write!(f, "unknown trigger {trigger:?}"),
            DropReason::MissingTrigger => f.write_str("hook has no trigger"),
            DropReason::Disabled => f.write_str("hook is disabled (enabled: false)"),
            DropReason::NeedsConfirmation => {
                f.write_str("hook asks for confirmation (confirm: true), which cannot be given")
            }
        }
    }
}

/// A user hook entry that was left out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DroppedHook {
    /// Where it was: `preToolUse[2]`, or `hooks[3]` for the array form.
    pub location: String,
    /// Its command, when it had a string one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Why it was left out.
    pub reason: DropReason,
}

impl fmt::Display for DroppedHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.location)?;
        if let Some(command) = &self.command {
            write!(f, " ({command})")?;
        }
        write!(f, ": {}", self.reason)
    }
}

/// Something about a kept hook worth telling its author.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HookNotice {
    /// Where the hook was.
    pub location: String,
    /// What to know.
    pub message: String,
}

impl fmt::Display for HookNotice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.message)
    }
}
