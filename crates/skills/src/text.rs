//! Word handling shared by trigger matching and search: case folding,
//! splitting on non-alphanumerics and English Snowball stemming.

use std::num::NonZeroUsize;
use std::sync::LazyLock;

use lru::LruCache;
use parking_lot::Mutex;
use rust_stemmers::{Algorithm, Stemmer};

use crate::constants::{STEM_CACHE_MAX_WORD_BYTES, STEM_CACHE_WORDS};

static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// The words of `text`: maximal runs of alphanumeric characters.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|ch: char| !ch.is_alphanumeric()).filter(|word| !word.is_empty())
}

/// Writes the case-folded `word` into `out` (replacing its contents).
fn fold_into(word: &str, out: &mut String) {
    out.clear();
    if word.is_ascii() {
        out.push_str(word);
        out.make_ascii_lowercase();
    } else {
        out.extend(word.chars().flat_map(char::to_lowercase));
    }
}

/// Calls `each` with the stem of every word of `text`, in order.
pub(crate) fn for_each_stem(text: &str, mut each: impl FnMut(String)) {
    let mut lowered = String::new();
    for word in words(text) {
        fold_into(word, &mut lowered);
        each(STEMMER.stem(&lowered).into_owned());
    }
}

/// A bounded, least-recently-used memo of case-folded word → stem.
///
/// Stemming is a pure function of the word, so an entry never goes stale:
/// the cache holds no catalog state and needs no invalidation when skills
/// change. Words longer than [`STEM_CACHE_MAX_WORD_BYTES`] are stemmed
/// without being remembered.
#[derive(Debug)]
pub(crate) struct StemCache {
    stems: Mutex<LruCache<Box<str>, Box<str>>>,
}

impl Default for StemCache {
    fn default() -> Self {
        Self::with_capacity(STEM_CACHE_WORDS)
    }
}

impl StemCache {
    /// A cache remembering at most `words` words (at least one).
    pub(crate) fn with_capacity(words: usize) -> Self {
        let capacity = NonZeroUsize::new(words).unwrap_or(NonZeroUsize::MIN);
        Self { stems: Mutex::new(LruCache::new(capacity)) }
    }

    /// Calls `each` with the stem of every word of `text`, in order: the
    /// same stems as [`for_each_stem`], served from the cache when known.
    pub(crate) fn for_each_stem(&self, text: &str, mut each: impl FnMut(&str)) {
        let mut lowered = String::new();
        let mut stems = self.stems.lock();
        for word in words(text) {
            fold_into(word, &mut lowered);
            if let Some(stem) = stems.get(lowered.as_str()) {
                each(stem);
                continue;
            }
            let stem = STEMMER.stem(&lowered);
            each(&stem);
            if lowered.len() <= STEM_CACHE_MAX_WORD_BYTES {
                stems.put(lowered.as_str().into(), stem.into());
            }
        }
    }

    /// Number of words remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.stems.lock().len()
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
    fn cached_stems_equal_direct_stems() {
        let cache = StemCache::with_capacity(4);
        let text = "Deploying deploys DEPLOYED Résumés naïvely running runs ran \
                    a-very-long-hyphenated-identifier supercalifragilisticexpialidociousnessesly";
        let mut direct = Vec::new();
        for_each_stem(text, |stem| direct.push(stem));
        // Twice: the second pass is served partly from the (small, evicting) cache.
        for _ in 0..2 {
            let mut cached = Vec::new();
            cache.for_each_stem(text, |stem| cached.push(stem.to_owned()));
            assert_eq!(cached, direct);
        }
        assert_eq!(cache.len(), 4);
    }

    #[test]
    fn long_words_are_not_remembered() {
        let cache = StemCache::with_capacity(8);
        let long = "x".repeat(STEM_CACHE_MAX_WORD_BYTES + 1);
        let mut seen = Vec::new();
        cache.for_each_stem(&format!("{long} short"), |stem| seen.push(stem.to_owned()));
        assert_eq!(seen, [long.as_str(), "short"]);
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn truncation_marks_the_cut() {
        assert_eq!(truncate_chars("short", 10), "short");
        assert_eq!(truncate_chars("abcdefghij", 5), "abcd…");
        assert_eq!(truncate_chars("ééééé", 5), "ééééé");
    }
}
