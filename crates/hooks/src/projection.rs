//! The hooks-array form projected onto the object form.
//!
//! Another host's hooks files hold a list of documents
//! `{name, description?, trigger, matcher?, action, timeout?, enabled?,
//! confirm?}`. Only a command action on one of the five events is emitted;
//! agent actions, file/task/manual triggers, disabled hooks and hooks that
//! ask for confirmation are reported and do not run. A per-hook `timeout`
//! is not carried over (the object form's default applies) and is noted.

use serde_json::{Map, Value, json};

use crate::event::{HookEvent, Trigger, classify_trigger};
use crate::left_out::{DropReason, DroppedHook, HookNotice};

/// One emitted entry, still to be validated like any user hook.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectedHook {
    /// The event it runs on.
    pub event: HookEvent,
    /// Where it came from: `hooks[3]`, with its name when it has one.
    pub location: String,
    /// `{command, matcher?}` in the object form.
    pub entry: Value,
}

/// What the projection made of a hooks array.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Projection {
    /// Entries to merge, in array order.
    pub hooks: Vec<ProjectedHook>,
    /// Documents that do not run, and why.
    pub dropped: Vec<DroppedHook>,
    /// Parts of emitted documents that are not carried over.
    pub notices: Vec<HookNotice>,
}

/// Projects a hooks array (or a `{version, hooks: [...]}` file) onto
/// object-form entries.
pub fn project_hook_array(value: &Value) -> Projection {
    let mut projection = Projection::default();
    let items = match value {
        Value::Array(items) => Some(items.as_slice()),
        Value::Object(file) => file.get("hooks").and_then(Value::as_array).map(Vec::as_slice),
        _ => None,
    };
    let Some(items) = items else {
        projection.dropped.push(DroppedHook {
            location: "hooks".to_owned(),
            command: None,
            reason: DropReason::NotHooks,
        });
        return projection;
    };
    for (index, item) in items.iter().enumerate() {
        let Value::Object(document) = item else {
            projection.dropped.push(DroppedHook {
                location: format!("hooks[{index}]"),
                command: None,
                reason: DropReason::NotAnObject,
            });
            continue;
        };
        let location = match document.get("name").and_then(Value::as_str) {
            Some(name) => format!("hooks[{index}] ({name})"),
            None => format!("hooks[{index}]"),
        };
        let command = action_command(document).map(str::to_owned);
        let mut drop = |reason: DropReason| {
            tracing::debug!(%location, %reason, "hooks-array document not emitted");
            projection.dropped.push(DroppedHook { location: location.clone(), command: command.clone(), reason });
        };
        if document.get("enabled") == Some(&Value::Bool(false)) {
            drop(DropReason::Disabled);
            continue;
        }
        if document.get("confirm") == Some(&Value::Bool(true)) {
            drop(DropReason::NeedsConfirmation);
            continue;
        }
        let event = match document.get("trigger").and_then(Value::as_str) {
            None => {
                drop(DropReason::MissingTrigger);
                continue;
            }
            Some(trigger) => match classify_trigger(trigger) {
                Trigger::Event(event) => event,
                Trigger::Unsupported(_) => {
                    drop(DropReason::UnsupportedTrigger { trigger: trigger.to_owned() });
                    continue;
                }
                Trigger::Unknown => {
                    drop(DropReason::UnknownTrigger { trigger: trigger.to_owned() });
                    continue;
                }
            },
        };
        match action_type(document) {
            Some(kind) if is_command_action(&kind) => {}
            Some(kind) => {
                drop(DropReason::NotACommandAction { action: kind });
                continue;
            }
            None => {
                drop(DropReason::MissingCommand);
                continue;
            }
        }
        let Some(command) = action_value(document) else {
            drop(DropReason::MissingCommand);
            continue;
        };
        let mut entry = Map::new();
        entry.insert("command".to_owned(), command.clone());
        if let Some(matcher) = document.get("matcher") {
            entry.insert("matcher".to_owned(), matcher.clone());
        }
        if document.contains_key("timeout") {
            projection.notices.push(HookNotice {
                location: location.clone(),
                message: "timeout is not carried into the object form; the default timeout applies".to_owned(),
            });
        }
        projection.hooks.push(ProjectedHook { event, location, entry: json!(entry) });
    }
    projection
}

fn is_command_action(kind: &str) -> bool {
    matches!(kind.to_ascii_lowercase().as_str(), "command" | "runcommand" | "shell" | "shellcommand")
}

/// The action's type: `{type: "command"}`, or a bare string action.
fn action_type(document: &Map<String, Value>) -> Option<String> {
    match document.get("action")? {
        Value::Object(action) => action.get("type").and_then(Value::as_str).map(str::to_owned),
        Value::String(kind) => Some(kind.clone()),
        _ => None,
    }
}

/// The command value, from the action object or (for a bare `"command"`
/// action) from the document.
fn action_value(document: &Map<String, Value>) -> Option<&Value> {
    match document.get("action")? {
        Value::Object(action) => action.get("command"),
        Value::String(_) => document.get("command"),
        _ => None,
    }
}

fn action_command(document: &Map<String, Value>) -> Option<&str> {
    action_value(document).and_then(Value::as_str)
}
