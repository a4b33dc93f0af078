//! A [`Summarizer`] that plays replies given in advance, for tests and
//! offline runs of code built on consolidation.

use std::collections::VecDeque;

use parking_lot::Mutex;

use super::{Summarizer, SummarizerError};

/// Plays its replies in order and records every prompt it is given. With
/// no reply left it fails, as a model that cannot be reached would.
///
/// ```
/// use cairn_memory_core::{ScriptedSummarizer, Summarizer};
///
/// let summarizer = ScriptedSummarizer::default();
/// summarizer.push(r#"{"semantic": []}"#);
/// assert_eq!(summarizer.summarize("a prompt").unwrap(), r#"{"semantic": []}"#);
/// assert!(summarizer.summarize("another").is_err());
/// assert_eq!(summarizer.prompts(), ["a prompt", "another"]);
/// ```
#[derive(Debug, Default)]
pub struct ScriptedSummarizer {
    replies: Mutex<VecDeque<String>>,
    prompts: Mutex<Vec<String>>,
}

impl ScriptedSummarizer {
    /// Queues `reply` after the replies already queued.
    pub fn push(&self, reply: impl Into<String>) {
        self.replies.lock().push_back(reply.into());
    }

    /// Every prompt given so far, oldest first.
    pub fn prompts(&self) -> Vec<String> {
        self.prompts.lock().clone()
    }

    /// The newest prompt given, empty when none was.
    pub fn last_prompt(&self) -> String {
        self.prompts.lock().last().cloned().unwrap_or_default()
    }

    /// How many prompts were given.
    pub fn calls(&self) -> usize {
        self.prompts.lock().len()
    }
}

impl Summarizer for ScriptedSummarizer {
    fn summarize(&self, prompt: &str) -> Result<String, SummarizerError> {
        self.prompts.lock().push(prompt.to_owned());
        self.replies.lock().pop_front().ok_or_else(|| SummarizerError("no scripted reply left".to_owned()))
    }
}
