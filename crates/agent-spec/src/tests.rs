//! Data-driven tests: fixtures under `test_data/` with expected siblings
//! (re-bless with `UPDATE_EXPECT=1`), plus tables for the tool questions.

mod discovery;
mod projection;
mod prompts;
mod resources;
mod specs;
mod tools;

use std::path::{Path, PathBuf};

/// `crates/agent-spec/test_data/<relative>`.
fn test_data(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data").join(relative)
}

/// Replaces a temp directory prefix with a stable placeholder.
fn scrub(text: &str, root: &Path, placeholder: &str) -> String {
    let mut text = text.replace(&root.display().to_string(), placeholder);
    if let Ok(real) = root.canonicalize() {
        text = text.replace(&real.display().to_string(), placeholder);
    }
    text
}
