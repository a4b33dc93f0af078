//! Context windows of known models.
//!
//! A window is a property of the model, not of the provider serving it, so
//! the lookup takes a model id only. An id nobody knows resolves to `None`,
//! which the caps treat as the reference window: only a model with a
//! confidently known smaller window scales the budget down.

use std::collections::HashMap;

/// Suffix some hosts append to a model id to select its 1M-token variant.
const ONE_MILLION_SUFFIX: &str = "[1m]";
const ONE_MILLION: u64 = 1_000_000;

/// Built-in windows, keyed by canonical id (see [`canonical_model_id`]).
const BUILTIN: &[(&str, u64)] = &[
    ("claude-opus-4", 200_000),
    ("claude-opus-4-1", 200_000),
    ("claude-opus-4-5", 200_000),
    ("claude-sonnet-4", 200_000),
    ("claude-sonnet-4-5", 200_000),
    ("claude-haiku-4-5", 200_000),
    ("claude-3-7-sonnet", 200_000),
    ("claude-3-5-sonnet", 200_000),
    ("claude-3-5-haiku", 200_000),
    ("gpt-4o", 128_000),
    ("gpt-4o-mini", 128_000),
    ("gpt-4-1", 1_047_576),
    ("gpt-4-1-mini", 1_047_576),
    ("gpt-5", 400_000),
    ("gpt-5-mini", 400_000),
    ("gemini-2-5-pro", 1_048_576),
    ("gemini-2-5-flash", 1_048_576),
];

/// A model-window registry: the built-in table plus entries the host adds
/// (from its own configuration or a provider's model list).
#[derive(Debug, Clone)]
pub struct ModelWindows {
    entries: HashMap<String, u64>,
}

impl Default for ModelWindows {
    fn default() -> Self {
        Self::builtin()
    }
}

impl ModelWindows {
    /// The built-in table.
    pub fn builtin() -> Self {
        Self { entries: BUILTIN.iter().map(|(id, window)| ((*id).to_owned(), *window)).collect() }
    }

    /// Adds or replaces one model's window. A zero window is ignored: it
    /// says nothing about the model.
    pub fn with(mut self, model: &str, window_tokens: u64) -> Self {
        if window_tokens > 0 {
            self.entries.insert(canonical_model_id(model), window_tokens);
        }
        self
    }

    /// The window of `model` in tokens: the registry first, then the
    /// `[1m]` suffix; `""`, `"auto"` and unknown ids give `None`.
    pub fn window(&self, model: &str) -> Option<u64> {
        let trimmed = model.trim();
        if trimmed.is_empty() || trimmed.eq_ignore_ascii_case("auto") {
            return None;
        }
        if let Some(window) = self.entries.get(&canonical_model_id(trimmed)) {
            return Some(*window);
        }
        if trimmed.to_ascii_lowercase().ends_with(ONE_MILLION_SUFFIX) {
            return Some(ONE_MILLION);
        }
        None
    }
}

/// The window of `model` from the built-in registry (see [`ModelWindows::window`]).
///
/// ```
/// use cairn_context::resolve_model_window;
///
/// assert_eq!(resolve_model_window("claude-sonnet-4.5"), Some(200_000));
/// assert_eq!(resolve_model_window("claude-sonnet-4.5[1m]"), Some(1_000_000));
/// assert_eq!(resolve_model_window("auto"), None);
/// assert_eq!(resolve_model_window("some-new-model"), None);
/// ```
pub fn resolve_model_window(model: &str) -> Option<u64> {
    static BUILTIN_WINDOWS: std::sync::LazyLock<ModelWindows> = std::sync::LazyLock::new(ModelWindows::builtin);
    BUILTIN_WINDOWS.window(model)
}

/// The registry key of a model id: lower case, provider prefix (`a/b`)
/// dropped, a trailing `-YYYYMMDD` date dropped, dots turned into dashes
/// (`claude-sonnet-4.5` and `anthropic/claude-sonnet-4-5-20250929` are the
/// same model).
pub fn canonical_model_id(model: &str) -> String {
    let lowered = model.trim().to_ascii_lowercase();
    let name = lowered.rsplit('/').next().unwrap_or(&lowered);
    let name = match name.rsplit_once('-') {
        Some((head, date)) if date.len() == 8 && date.bytes().all(|byte| byte.is_ascii_digit()) => head,
        _ => name,
    };
    name.replace('.', "-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_ids_resolve_in_every_spelling() {
        for id in [
            "claude-sonnet-4.5",
            "claude-sonnet-4-5",
            "Claude-Sonnet-4.5",
            "anthropic/claude-sonnet-4-5-20250929",
            "  claude-opus-4.1 ",
        ] {
            assert_eq!(resolve_model_window(id), Some(200_000), "{id}");
        }
        assert_eq!(resolve_model_window("gpt-4.1"), Some(1_047_576));
        assert_eq!(resolve_model_window("gpt-4o"), Some(128_000));
    }

    #[test]
    fn the_one_million_suffix_is_a_heuristic_after_the_registry() {
        assert_eq!(resolve_model_window("claude-sonnet-4[1m]"), Some(1_000_000));
        assert_eq!(resolve_model_window("future-model[1M]"), Some(1_000_000));
        let registry = ModelWindows::builtin().with("custom[1m]", 500_000);
        assert_eq!(registry.window("custom[1m]"), Some(500_000));
    }

    #[test]
    fn empty_auto_and_unknown_resolve_to_none() {
        for id in ["", "   ", "auto", "AUTO", "some-unknown-model", "claude", "claude-sonnet-4-5-preview"] {
            assert_eq!(resolve_model_window(id), None, "{id:?}");
        }
    }

    #[test]
    fn host_entries_extend_and_override_the_table() {
        let registry = ModelWindows::builtin().with("local/qwen3-32b", 32_768).with("gpt-4o", 64_000).with("zero", 0);
        assert_eq!(registry.window("qwen3-32b"), Some(32_768));
        assert_eq!(registry.window("gpt-4o"), Some(64_000));
        assert_eq!(registry.window("zero"), None);
    }

    #[test]
    fn canonical_ids_drop_prefix_date_and_dots() {
        assert_eq!(canonical_model_id("anthropic/Claude-Haiku-4.5-20251001"), "claude-haiku-4-5");
        assert_eq!(canonical_model_id("gpt-4o-2024"), "gpt-4o-2024");
    }
}
