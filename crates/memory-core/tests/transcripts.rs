//! Session transcripts persisted in memory.db: a restart neither skips nor
//! repeats a message to consolidation, two handles append safely, two
//! consolidators never run one session at once, stored text is redacted
//! and bounded.

use std::path::Path;
use std::sync::{Arc, Barrier};

use cairn_memory_core::{
    Consolidator, ConsolidatorConfig, MemoryConfig, MemoryDb, MemoryError, MemoryFiles, Rejected, ScriptedSummarizer,
    Summarizer, SummarizerError, ToolCall, TranscriptMessage, constants,
};
use serde_json::json;

const HOUR_MS: i64 = 60 * 60 * 1_000;

/// One gateway process: its own database handle and consolidator.
struct Process {
    db: Arc<MemoryDb>,
    consolidator: Consolidator,
}

fn start(home: &Path, summarizer: Arc<dyn Summarizer>) -> Process {
    let db = Arc::new(MemoryDb::open_in_home(home, MemoryConfig::default()).unwrap());
    let files = Arc::new(MemoryFiles::open(home).unwrap());
    let consolidator = Consolidator::new(home, db.clone(), files, summarizer, ConsolidatorConfig::default());
    Process { db, consolidator }
}

fn batch(label: &str, count: usize) -> Vec<TranscriptMessage> {
    (0..count)
        .map(|index| {
            TranscriptMessage::new(if index % 2 == 0 { "user" } else { "assistant" }, format!("{label} {index}"))
        })
        .collect()
}

const HISTORY_REPLY: &str = r#"{"history": null, "episodic": [], "lessons": []}"#;

#[test]
fn a_restart_with_a_reused_session_key_skips_no_message() {
    let home = tempfile::tempdir().unwrap();
    let summarizer = Arc::new(ScriptedSummarizer::default());

    // First process: ten messages, consolidated after the idle time.
    let first = start(home.path(), summarizer.clone());
    first.consolidator.maybe_consolidate("chat-1", &batch("before", 10), 0).unwrap();
    summarizer.push(HISTORY_REPLY);
    let results = first.consolidator.check_idle_sessions(4 * HOUR_MS);
    assert!(results[0].1.is_ok(), "{results:?}");
    assert_eq!(first.consolidator.last_consolidated("chat-1").unwrap(), 10);
    drop(first);

    // Second process: the gateway's in-memory transcript starts empty and
    // the same session key is reused. Its five messages must all be consolidated.
    let second = start(home.path(), summarizer.clone());
    assert_eq!(second.consolidator.last_consolidated("chat-1").unwrap(), 10, "the marker persisted");
    second.consolidator.maybe_consolidate("chat-1", &batch("after", 5), 5 * HOUR_MS).unwrap();
    summarizer.push(HISTORY_REPLY);
    let results = second.consolidator.check_idle_sessions(9 * HOUR_MS);
    assert_eq!(results.len(), 1, "the restarted session is consolidated");
    assert!(results[0].1.is_ok(), "{results:?}");
    assert_eq!(results[0].1.as_ref().unwrap().messages, 5);
    let prompt = summarizer.last_prompt();
    for index in 0..5 {
        assert!(prompt.contains(&format!("after {index}")), "message {index} was skipped: {prompt}");
    }
    assert!(!prompt.contains("before "), "an old message was consolidated twice: {prompt}");
    assert_eq!(second.consolidator.last_consolidated("chat-1").unwrap(), 15);

    // Nothing pending: later ticks ask nothing.
    let calls = summarizer.calls();
    assert!(second.consolidator.check_idle_sessions(20 * HOUR_MS).is_empty());
    assert_eq!(summarizer.calls(), calls);
}

#[test]
fn messages_pending_at_shutdown_are_consolidated_by_the_next_process() {
    let home = tempfile::tempdir().unwrap();
    let summarizer = Arc::new(ScriptedSummarizer::default());
    let first = start(home.path(), summarizer.clone());
    first.consolidator.record_messages("chat-2", &batch("pending", 4), 0).unwrap();
    drop(first);

    // The next process never saw the session, yet its idle tick finds it.
    let second = start(home.path(), summarizer.clone());
    summarizer.push(HISTORY_REPLY);
    let results = second.consolidator.check_idle_sessions(4 * HOUR_MS);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(summarizer.last_prompt().contains("pending 3"));
    assert_eq!(second.consolidator.last_consolidated("chat-2").unwrap(), 4);

    // The preferences count persists too: 29 messages past its marker (over
    // two processes) do not fire, the 30th does.
    let third = start(home.path(), summarizer.clone());
    assert!(third.consolidator.record_messages("chat-2", &batch("more", 25), 5 * HOUR_MS).unwrap().is_none());
    drop(third);
    let fourth = start(home.path(), summarizer.clone());
    summarizer.push(r#"{"semantic": []}"#);
    let report = fourth.consolidator.record_messages("chat-2", &batch("thirtieth", 1), 5 * HOUR_MS).unwrap();
    let report = report.expect("the 30th message past the persisted marker fires");
    assert_eq!(report.messages, 30, "4 + 25 + 1: nothing skipped, nothing twice");
    let state = fourth.db.transcript_state("chat-2").unwrap().unwrap();
    assert_eq!((state.next_seq, state.preferences_marker, state.history_marker), (30, 30, 4));
}

#[test]
fn a_failed_run_keeps_the_marker_and_the_messages() {
    let home = tempfile::tempdir().unwrap();
    let summarizer = Arc::new(ScriptedSummarizer::default());
    let process = start(home.path(), summarizer.clone());
    process.consolidator.record_messages("s", &batch("kept", 3), 0).unwrap();
    summarizer.push("not json at all");
    let results = process.consolidator.check_idle_sessions(4 * HOUR_MS);
    assert!(matches!(results[0].1, Err(MemoryError::InvalidReply { .. })), "{results:?}");
    assert_eq!(process.consolidator.last_consolidated("s").unwrap(), 0);
    assert_eq!(process.db.transcript("s").unwrap().len(), 3);
    // The claim was released: the next tick (same or another process) retries.
    let other = start(home.path(), summarizer.clone());
    summarizer.push(HISTORY_REPLY);
    assert!(other.consolidator.check_idle_sessions(4 * HOUR_MS)[0].1.is_ok());
    assert_eq!(other.consolidator.last_consolidated("s").unwrap(), 3);
}

#[test]
fn consolidate_now_stores_the_given_transcript_only_on_success() {
    let home = tempfile::tempdir().unwrap();
    let summarizer = Arc::new(ScriptedSummarizer::default());
    let process = start(home.path(), summarizer.clone());
    let file = batch("file", 6);
    summarizer.push("{\"semantic\": [");
    assert!(process.consolidator.consolidate_now("cli", &file).is_err());
    assert!(process.db.transcript_state("cli").unwrap().is_none(), "a failed run stores nothing");

    summarizer.push(r#"{"semantic": []}"#);
    summarizer.push(HISTORY_REPLY);
    let (preferences, history) = process.consolidator.consolidate_now("cli", &file).unwrap();
    assert_eq!((preferences.messages, history.messages), (6, 6));
    let state = process.db.transcript_state("cli").unwrap().unwrap();
    assert_eq!((state.next_seq, state.history_marker, state.preferences_marker), (6, 6, 6));
    assert_eq!(process.consolidator.last_consolidated("cli").unwrap(), 6);
    // Nothing is pending for the idle path.
    assert!(process.consolidator.check_idle_sessions(10 * HOUR_MS).is_empty());
}

#[test]
fn two_handles_appending_to_one_session_lose_and_renumber_nothing() {
    let home = tempfile::tempdir().unwrap();
    let handles: Vec<Arc<MemoryDb>> =
        (0..2).map(|_| Arc::new(MemoryDb::open_in_home(home.path(), MemoryConfig::default()).unwrap())).collect();
    let barrier = Arc::new(Barrier::new(2));
    let threads: Vec<_> = handles
        .iter()
        .enumerate()
        .map(|(writer, db)| {
            let db = db.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                for index in 0..150 {
                    let message = TranscriptMessage::new("user", format!("writer {writer} message {index}"));
                    db.append_transcript_at("shared", &[message], index).unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let stored = handles[0].transcript("shared").unwrap();
    assert_eq!(stored.len(), 300);
    assert!(stored.iter().enumerate().all(|(position, row)| row.seq == position as u64), "seqs are contiguous");
    for writer in 0..2 {
        let own: Vec<String> = stored
            .iter()
            .map(|row| row.message.content.clone())
            .filter(|text| text.starts_with(&format!("writer {writer} ")))
            .collect();
        let expected: Vec<String> = (0..150).map(|index| format!("writer {writer} message {index}")).collect();
        assert_eq!(own, expected, "each writer's messages, all there and in order");
    }
    assert_eq!(handles[1].transcript_state("shared").unwrap().unwrap().next_seq, 300);
}

/// Blocks inside `summarize` until released, to hold a run open.
struct GateSummarizer {
    entered: Barrier,
    release: Barrier,
}

impl Summarizer for GateSummarizer {
    fn summarize(&self, _prompt: &str) -> Result<String, SummarizerError> {
        self.entered.wait();
        self.release.wait();
        Ok(HISTORY_REPLY.to_owned())
    }
}

#[test]
fn two_processes_never_consolidate_one_session_at_once() {
    let home = tempfile::tempdir().unwrap();
    let gate = Arc::new(GateSummarizer { entered: Barrier::new(2), release: Barrier::new(2) });
    let first = Arc::new(start(home.path(), gate.clone()));
    let second = start(home.path(), Arc::new(ScriptedSummarizer::default()));
    first.consolidator.record_messages("s", &batch("one", 3), 0).unwrap();
    let running = {
        let first = first.clone();
        std::thread::spawn(move || first.consolidator.check_idle_sessions(4 * HOUR_MS))
    };
    gate.entered.wait();
    // The other process's tick sees the claim and leaves the session alone
    // (its summarizer would fail: it has no reply).
    assert!(second.consolidator.check_idle_sessions(4 * HOUR_MS).is_empty());
    gate.release.wait();
    let results = running.join().unwrap();
    assert!(results[0].1.is_ok(), "{results:?}");
    assert_eq!(second.consolidator.last_consolidated("s").unwrap(), 3);
}

#[test]
fn stored_messages_are_redacted_bounded_and_keep_tool_calls() {
    let home = tempfile::tempdir().unwrap();
    let db = MemoryDb::open_in_home(home.path(), MemoryConfig::default()).unwrap();
    let secret = "AKIAZ7Q3W4E5R6T7Y8U9";
    let message = TranscriptMessage::new("user", format!("export AWS_ACCESS_KEY_ID={secret} then deploy"))
        .with_tool_calls(vec![ToolCall::new(
            "shell",
            json!({"command": format!("aws configure set aws_access_key_id {secret}"), "timeout": 30}),
        )]);
    db.append_transcript("s", &[message, TranscriptMessage::new("assistant", "done")]).unwrap();
    let stored = db.transcript("s").unwrap();
    let text = serde_json::to_string(&stored).unwrap();
    assert!(!text.contains(secret), "{text}");
    assert!(stored[0].message.content.contains("[REDACTED:"), "{:?}", stored[0].message.content);
    assert_eq!(stored[0].message.tool_calls.len(), 1);
    assert_eq!(stored[0].message.tool_calls[0].name, "shell");
    assert_eq!(stored[0].message.tool_calls[0].input["timeout"], json!(30));
    assert!(stored[1].message.tool_calls.is_empty());

    // A message longer than the cap is cut.
    let long = "x".repeat(constants::MAX_TRANSCRIPT_MESSAGE_CHARS + 10);
    db.append_transcript("long", &[TranscriptMessage::new("user", long)]).unwrap();
    assert_eq!(db.transcript("long").unwrap()[0].message.content.len(), constants::MAX_TRANSCRIPT_MESSAGE_CHARS);

    // A session never keeps more than the cap of rows, newest kept.
    let many = batch("row", constants::MAX_TRANSCRIPT_MESSAGES + 25);
    let append = db.append_transcript("big", &many).unwrap();
    assert_eq!(append.pruned, 25);
    let stored = db.transcript("big").unwrap();
    assert_eq!(stored.len(), constants::MAX_TRANSCRIPT_MESSAGES);
    assert_eq!(stored[0].seq, 25);
    assert_eq!(db.transcript_tail("big", 2).unwrap()[1].message.content, format!("row {}", many.len() - 1));
}

#[test]
fn consolidated_rows_are_pruned_down_to_the_kept_tail() {
    let home = tempfile::tempdir().unwrap();
    let summarizer = Arc::new(ScriptedSummarizer::default());
    let process = start(home.path(), summarizer.clone());
    summarizer.push(r#"{"semantic": []}"#);
    summarizer.push(r#"{"semantic": []}"#);
    summarizer.push(r#"{"semantic": []}"#);
    process.consolidator.record_messages("s", &batch("m", 90), 0).unwrap();
    // The preferences path consumed all 90; the history path none: all kept.
    assert_eq!(process.db.transcript("s").unwrap().len(), 90);
    summarizer.push(HISTORY_REPLY);
    process.consolidator.check_idle_sessions(4 * HOUR_MS);
    let stored = process.db.transcript("s").unwrap();
    assert_eq!(stored.len(), constants::TRANSCRIPT_KEEP_CONSOLIDATED, "both paths consolidated them");
    assert_eq!(stored.last().unwrap().seq, 89);
}

#[test]
fn a_bad_session_key_is_refused_and_the_old_message_shape_reads() {
    let home = tempfile::tempdir().unwrap();
    let db = MemoryDb::open_in_home(home.path(), MemoryConfig::default()).unwrap();
    for key in ["", "bad\nkey", &"k".repeat(constants::MAX_SESSION_KEY_CHARS + 1)] {
        let error = db.append_transcript(key, &batch("x", 1)).unwrap_err();
        assert!(matches!(error.rejection(), Some(Rejected::InvalidSessionKey { .. })), "{key:?}: {error}");
    }
    assert!(db.append_transcript(&"k".repeat(constants::MAX_SESSION_KEY_CHARS), &batch("x", 1)).is_ok());

    let old: TranscriptMessage = serde_json::from_str(r#"{"role": "user", "content": "hi"}"#).unwrap();
    assert_eq!(old, TranscriptMessage::new("user", "hi"));
    assert_eq!(serde_json::to_value(&old).unwrap(), json!({"role": "user", "content": "hi"}));
    let with_tools = old.with_tool_calls(vec![ToolCall::new("read", json!({"path": "a.txt"}))]);
    let text = serde_json::to_string(&with_tools).unwrap();
    assert_eq!(serde_json::from_str::<TranscriptMessage>(&text).unwrap(), with_tools);
}
