//! Cairn's context builder: how many characters each source may put in
//! front of the model, and the assembly of every source into the context
//! of a new session and of each message.
//!
//! - [`resolve_caps`] scales the per-section caps (a 165,000-character base
//!   at a 1,000,000-token reference window) linearly to the model's window,
//!   floored at 20% of the base; [`resolve_model_window`] finds the window
//!   of a known model id, and an unknown one means the reference window.
//! - [`ContextBuilder`] holds the sources (Markdown memory, semantic
//!   memory, lessons, episodic memory, the skill catalog, config hooks,
//!   channel buffers), each behind a small trait with a plain-data
//!   implementation, and builds [`ContextBuilder::build_session_context`]
//!   and [`ContextBuilder::build_message`]. Every build returns the text
//!   and a per-section account ([`BuiltContext::sections`]) whose
//!   characters add up to the text's.
//! - A request's [`Surface`] picks the fixed rules: an agent host (Claude
//!   Code, kiro-cli) gets none that ask for `OPTIONS` buttons or diff
//!   blocks. [`ContextBuilder::with_max_inject_chars`] bounds what any
//!   build injects, whatever the window.
//! - [`ChannelHistory`] keeps the per-channel buffer; recording needs an
//!   explicit [`Authorization`], and an unauthorised sender is never stored.
//! - [`neutralize_structural_markers`] keeps quoted text (channel history,
//!   episodic fragments, thread messages, skills from outside the owned
//!   directory) from forging section headers, role markers or the
//!   builder's framing.
//!
//! ```
//! use std::sync::Arc;
//! use cairn_context::{ContextBuilder, MessageRequest, SectionName, SessionRequest};
//! use cairn_memory_core::{Lesson, LessonCategory, Source, lesson_key};
//!
//! let lesson = Lesson {
//!     key: lesson_key("use tabs", None),
//!     rule: "use tabs".into(),
//!     not: None,
//!     category: LessonCategory::Preference,
//!     source: Source::UserExplicit,
//!     confidence: 1.0,
//!     updated_at: 0,
//!     evidence: None,
//! };
//! let builder = ContextBuilder::new().with_lessons(Arc::new(vec![lesson]));
//! let session = builder.build_session_context(&SessionRequest { model_window: Some(200_000), ..Default::default() });
//! assert!(session.text.contains("- use tabs"));
//! assert_eq!(session.section(SectionName::Lessons).unwrap().cap, Some(7_458));
//!
//! let message = builder.build_message(&MessageRequest { message: "hello", ..Default::default() });
//! assert_eq!(message.text, "hello");
//! ```
//!
//! What it deliberately does not do: it reads no configuration or
//! environment, calls no model (compression is the host's [`Compressor`]),
//! does not decide whether a sender is authorised (the host says so), and
//! does not store memory: it only reads the stores it is given.

#![warn(missing_docs)]

mod agent;
mod agent_scope;
mod builder;
mod caps;
mod channel;
pub mod constants;
mod error;
mod neutralize;
mod runtime;
mod sources;
mod text;
mod thread;
mod window;

pub use agent::AgentContext;
pub use agent_scope::AgentScope;
pub use builder::{
    AutoReply, BuiltContext, ContextBuilder, MessageRequest, SectionName, SectionReport, SessionRequest,
};
pub use caps::{CapSection, Caps, reference_caps, resolve_caps};
pub use channel::{
    Authorization, ChannelClock, ChannelConfig, ChannelEntry, ChannelHistory, ManualChannelClock, RecordOutcome,
    SystemChannelClock, render_entries, should_record_observe_history, validate_channel_id,
};
pub use error::{ContextError, Result};
pub use neutralize::{
    FRAMING_REPLACEMENT, neutralize_label, neutralize_one_line, neutralize_structural_markers, structural_marker,
};
pub use runtime::{RuntimeIdentity, Surface};
pub use sources::{
    CitedText, EpisodicFragment, EpisodicMemory, LessonLayers, LessonSource, MarkdownMemory, MarkdownSections,
    RecallQuery, RecalledFragments, SemanticMemory, SteeringDoc,
};
pub use thread::{Compressor, Role, ThreadMessage};
pub use window::{ModelWindows, canonical_model_id, resolve_model_window};
