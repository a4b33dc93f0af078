//! Thread history for a new session: the last 20 messages, framed as
//! quoted conversation, compressed around a verbatim head and tail when a
//! [`Compressor`] is given, truncated otherwise.

use serde::Serialize;

use crate::caps::Caps;
use crate::constants::{
    MESSAGE_TRUNCATED_MARKER, THREAD_FOOTER, THREAD_FRAMING, THREAD_HEAD_MESSAGES, THREAD_HEADER, THREAD_MESSAGES,
    THREAD_TAIL_MESSAGES,
};
use crate::error::Result;
use crate::neutralize::{neutralize_label, neutralize_structural_markers};
use crate::text::{chars, truncate};

/// Who wrote a thread message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A person.
    User,
    /// The agent.
    Assistant,
}

/// One message of the thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThreadMessage {
    /// Who wrote it.
    pub role: Role,
    /// The author's display name, for threads with several people.
    pub author: Option<String>,
    /// The text.
    pub text: String,
}

impl ThreadMessage {
    /// A message from the user.
    pub fn user(text: impl Into<String>) -> Self {
        Self { role: Role::User, author: None, text: text.into() }
    }

    /// A message from the agent.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self { role: Role::Assistant, author: None, text: text.into() }
    }
}

/// Summarises the middle of a long thread (an LLM call, in the gateway).
pub trait Compressor: Send + Sync {
    /// A summary of `messages` in at most `budget_chars` characters.
    fn compress(&self, messages: &[ThreadMessage], budget_chars: usize) -> Result<String>;
}

/// The thread block, its cap, and whether anything was cut.
pub(crate) struct ThreadBlock {
    pub(crate) text: String,
    pub(crate) cap: usize,
    pub(crate) truncated: bool,
    pub(crate) notice: Option<String>,
}

/// One message as block lines: `label: first line`, further lines
/// indented, everything neutralised; cut to `max` characters first.
fn render_message(message: &ThreadMessage, max: usize) -> (String, bool) {
    let neutral = neutralize_structural_markers(message.text.trim());
    let (neutral, cut) = truncate(&neutral, max, MESSAGE_TRUNCATED_MARKER);
    let label = match &message.author {
        Some(author) => neutralize_label(author),
        None => match message.role {
            Role::User => "user".to_owned(),
            Role::Assistant => "assistant".to_owned(),
        },
    };
    let mut out = format!("{label}:");
    for (index, line) in neutral.split('\n').enumerate() {
        out.push_str(if index == 0 { " " } else { "\n  " });
        out.push_str(line);
    }
    (out, cut)
}

fn frame(lines: &[String]) -> String {
    let mut block = format!("{THREAD_HEADER}\n{THREAD_FRAMING}\n");
    for line in lines {
        block.push_str(line);
        block.push('\n');
    }
    block.push_str(THREAD_FOOTER);
    block
}

const FRAME_OVERHEAD: usize = 1 + 1 + 1; // three newlines around header and framing

fn frame_chars() -> usize {
    chars(THREAD_HEADER) + chars(THREAD_FRAMING) + chars(THREAD_FOOTER) + FRAME_OVERHEAD
}

/// Builds the block; `None` when there is no history.
pub(crate) fn thread_block(
    messages: &[ThreadMessage],
    caps: &Caps,
    compressor: Option<&dyn Compressor>,
) -> Option<ThreadBlock> {
    if messages.is_empty() {
        return None;
    }
    let recent = &messages[messages.len().saturating_sub(THREAD_MESSAGES)..];
    let mut notice = None;
    if let Some(compressor) = compressor {
        let budget = caps.compressed_history;
        let per_message = caps.per_message_within(budget);
        let rendered: Vec<(String, bool)> = recent.iter().map(|message| render_message(message, per_message)).collect();
        let verbatim = frame_chars() + rendered.iter().map(|(line, _)| chars(line) + 1).sum::<usize>();
        if verbatim <= budget {
            let truncated = rendered.iter().any(|(_, cut)| *cut);
            let lines: Vec<String> = rendered.into_iter().map(|(line, _)| line).collect();
            return Some(ThreadBlock { text: frame(&lines), cap: budget, truncated, notice: None });
        }
        if recent.len() > THREAD_HEAD_MESSAGES + THREAD_TAIL_MESSAGES {
            let head = &rendered[..THREAD_HEAD_MESSAGES];
            let tail = &rendered[rendered.len() - THREAD_TAIL_MESSAGES..];
            let middle = &recent[THREAD_HEAD_MESSAGES..recent.len() - THREAD_TAIL_MESSAGES];
            let opener = format!("(summary of {} messages)", middle.len());
            let closer = "(end of summary)";
            let fixed = frame_chars()
                + head.iter().chain(tail).map(|(line, _)| chars(line) + 1).sum::<usize>()
                + chars(&opener)
                + chars(closer)
                + 3;
            if fixed < budget {
                let room = budget - fixed;
                match compressor.compress(middle, room) {
                    Ok(summary) => {
                        let summary = neutralize_structural_markers(summary.trim());
                        let (summary, _) = truncate(&summary, room, MESSAGE_TRUNCATED_MARKER);
                        let mut lines: Vec<String> = head.iter().map(|(line, _)| line.clone()).collect();
                        lines.push(opener);
                        lines.push(summary);
                        lines.push(closer.to_owned());
                        lines.extend(tail.iter().map(|(line, _)| line.clone()));
                        return Some(ThreadBlock { text: frame(&lines), cap: budget, truncated: true, notice: None });
                    }
                    Err(error) => {
                        tracing::warn!(%error, "thread compression failed; truncating instead");
                        notice = Some(format!("thread compression failed, history truncated instead: {error}"));
                    }
                }
            }
        }
    }
    let budget = caps.history_budget;
    let per_message = caps.per_message_within(budget);
    let rendered: Vec<(String, bool)> = recent.iter().map(|message| render_message(message, per_message)).collect();
    let mut truncated = rendered.iter().any(|(_, cut)| *cut);
    // Keep the newest messages that fit, with room for the omission line.
    let omission_room = 48;
    let mut used = frame_chars();
    let mut first_kept = rendered.len();
    for (index, (line, _)) in rendered.iter().enumerate().rev() {
        let cost = chars(line) + 1;
        if used + cost + omission_room > budget {
            break;
        }
        used += cost;
        first_kept = index;
    }
    let mut lines = Vec::with_capacity(rendered.len() - first_kept + 1);
    if first_kept > 0 {
        truncated = true;
        lines.push(format!("({first_kept} earlier messages left out)"));
    }
    lines.extend(rendered.into_iter().skip(first_kept).map(|(line, _)| line));
    Some(ThreadBlock { text: frame(&lines), cap: budget, truncated, notice })
}
