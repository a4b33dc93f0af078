//! Word handling shared by trigger matching and search: case folding,
//! splitting on non-alphanumerics and English Snowball stemming.

use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};

static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// Calls `each` with the stem of every word of `text`, in order.
pub(crate) fn for_each_stem(text: &str, mut each: impl FnMut(String)) {
    let mut lowered = String::new();
    for word in text.split(|ch: char| !ch.is_alphanumeric()).filter(|word| !word.is_empty()) {
        lowered.clear();
        lowered.extend(word.chars().flat_map(char::to_lowercase));
        each(STEMMER.stem(&lowered).into_owned());
    }
}

/// The distinct stems of `text`, in first-seen order.
pub(crate) fn distinct_stems(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for_each_stem(text, |stem| {
        if !out.contains(&stem) {
            out.push(stem);
        }
    });
    out
}

/// Cuts `text` to at most `max` characters, ending with `…` when cut.
pub(crate) fn truncate_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some(_) => {
            let keep: String = text.chars().take(max.saturating_sub(1)).collect();
            format!("{}…", keep.trim_end())
        }
    }
}

/// Collapses whitespace runs (descriptions may be folded block scalars).
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_fold_case_and_inflection() {
        assert_eq!(distinct_stems("Deploying DEPLOYS deployed"), ["deploy"]);
        assert_eq!(distinct_stems("log-search, Logs!"), ["log", "search"]);
    }

    #[test]
    fn truncation_marks_the_cut() {
        assert_eq!(truncate_chars("short", 10), "short");
        assert_eq!(truncate_chars("abcdefghij", 5), "abcd…");
        assert_eq!(truncate_chars("ééééé", 5), "ééééé");
    }
}
