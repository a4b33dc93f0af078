//! Words, stems and keyword sets: the keyword half of semantic retrieval
//! and the topic test of lesson dedup.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};

static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// Words too common to say anything about a topic.
const STOPWORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "always", "an", "and", "any", "are", "as", "at", "be", "been", "before",
    "but", "by", "can", "could", "do", "does", "don", "dont", "for", "from", "had", "has", "have", "how", "i", "if",
    "in", "into", "is", "it", "its", "just", "me", "my", "never", "no", "not", "of", "on", "only", "or", "our",
    "should", "so", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those", "to",
    "too", "use", "used", "using", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who",
    "will", "with", "would", "you", "your",
];

/// Whether `word` (lower case) is too common to say anything about a topic.
pub(crate) fn is_stopword(word: &str) -> bool {
    STOPWORDS.binary_search(&word).is_ok()
}

/// A word and its snowball stem; two terms match when either form matches.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Term {
    pub(crate) word: String,
    pub(crate) stem: String,
}

/// Lower-cased alphanumeric words of `text`, stopwords and one-letter words dropped.
pub(crate) fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| word.chars().count() > 1)
        .map(str::to_lowercase)
        .filter(|word| STOPWORDS.binary_search(&word.as_str()).is_err())
}

/// The Snowball stem of `word` (lower case).
pub(crate) fn stem(word: &str) -> String {
    STEMMER.stem(word).into_owned()
}

/// The distinct terms of `text`, in sorted order.
pub(crate) fn terms(text: &str) -> Vec<Term> {
    let set: BTreeSet<Term> = words(text)
        .map(|word| {
            let stem = STEMMER.stem(&word).into_owned();
            Term { word, stem }
        })
        .collect();
    set.into_iter().collect()
}

/// Every form (word and stem) of the terms of `text`.
pub(crate) fn forms(text: &str) -> BTreeSet<String> {
    let mut set = BTreeSet::new();
    for term in terms(text) {
        set.insert(term.stem);
        set.insert(term.word);
    }
    set
}

/// The stems of `text`: the keyword set of a lesson's topic.
pub(crate) fn stems(text: &str) -> BTreeSet<String> {
    terms(text).into_iter().map(|term| term.stem).collect()
}

/// Share of the smaller set found in the other (0 when either is empty).
pub(crate) fn overlap(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    let smaller = a.len().min(b.len());
    if smaller == 0 {
        return 0.0;
    }
    a.intersection(b).count() as f64 / smaller as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopwords_are_sorted_for_binary_search() {
        let mut sorted = STOPWORDS.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, STOPWORDS);
    }

    #[test]
    fn stems_join_inflections() {
        assert_eq!(stems("Running tests"), stems("run the test"));
        assert!(forms("editors").contains("editor"));
    }

    #[test]
    fn overlap_uses_the_smaller_set() {
        let light = stems("use light mode");
        let dark = stems("use dark mode");
        assert_eq!(overlap(&light, &dark), 0.5);
        assert_eq!(overlap(&stems("cargo"), &stems("cargo clippy fmt")), 1.0);
        assert_eq!(overlap(&stems(""), &stems("cargo")), 0.0);
    }
}
