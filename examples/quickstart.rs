//! Cairn in twenty lines: open a home, store a fact, a lesson and a
//! fragment, and print what a model would see at the start of a session
//! and around one message.
//!
//! ```sh
//! cargo run --example quickstart
//! ```

use cairn_host::{Cairn, Config};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let home = tempfile::tempdir()?;
    let cairn = Cairn::open(Config::new(home.path()))?;

    cairn.remember("user.name", "Ada")?;
    cairn.learn("Keep answers short", Some("long preambles"))?;
    cairn.note("On Monday we moved the billing service from Postgres 13 to Postgres 16.")?;
    cairn.record_turn("chat-1", "user", "What changed in billing this week?")?;

    let session = cairn.session_context("chat-1", "billing")?;
    println!("--- session context ({} characters)\n{}", session.text.len(), session.text);
    let message = cairn.message_context("chat-1", "which postgres does billing run?")?;
    println!("--- message context\n{}", message.text);

    // What the model sees is what was stored.
    assert!(session.text.contains("Ada") && session.text.contains("Keep answers short"));
    assert!(message.text.contains("Postgres 16"), "episodic memory recalled");
    Ok(())
}
