//! Words, stems and keyword sets: the keyword half of semantic retrieval
//! and the topic test of lesson dedup.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};

use crate::constants::FTS_MIN_TERM_CHARS;

static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// English function words: too common to say anything about a topic, and
/// matching nearly every text, so a keyword search spends its time on them
/// while their inverse document frequency adds almost nothing to a ranking.
///
/// This is the Snowball project's English stop list (`algorithms/english/stop.txt`
/// of snowball-website), the list published with the stemmer [`stem`] uses:
/// pronouns, the forms of *be*, *have* and *do*, *would*, *should*, *could*,
/// *ought*, articles, prepositions, conjunctions and a few adverbs. Like that
/// list it leaves out words with a common content homonym (*can*, *will*,
/// *may*, *must*, *might*, *us*). Its contractions are entered as the pieces
/// [`words`] cuts them into at the apostrophe (`don't` → `don`, `t`;
/// `you're` → `you`, `re`): one-letter pieces are dropped by length anyway,
/// and the pieces that are everyday words by themselves (`can`, `let`,
/// `won`) stay out for the same homonym reason. Sorted, for binary search.
// Kept as a block: rustfmt would give each word a line of its own.
#[rustfmt::skip]
const STOPWORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "aren", "as", "at",
    "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "cannot", "could", "couldn",
    "did", "didn", "do", "does", "doesn", "doing", "don", "down", "during", "each", "few", "for", "from", "further",
    "had", "hadn", "has", "hasn", "have", "haven", "having", "he", "her", "here", "hers", "herself", "him", "himself",
    "his", "how", "i", "if", "in", "into", "is", "isn", "it", "its", "itself", "ll", "me", "more", "most", "mustn",
    "my", "myself", "no", "nor", "not", "of", "off", "on", "once", "only", "or", "other", "ought", "our", "ours",
    "ourselves", "out", "over", "own", "re", "same", "shan", "she", "should", "shouldn", "so", "some", "such", "than",
    "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those",
    "through", "to", "too", "under", "until", "up", "ve", "very", "was", "wasn", "we", "were", "weren", "what", "when",
    "where", "which", "while", "who", "whom", "why", "with", "would", "wouldn", "you", "your", "yours", "yourself",
    "yourselves",
];

/// Whether `word` (lower case) is a stopword.
pub(crate) fn is_stopword(word: &str) -> bool {
    STOPWORDS.binary_search(&word).is_ok()
}

/// Whether `word` (lower case) is too weak to stand in a keyword query next
/// to other words: a stopword, or shorter than [`FTS_MIN_TERM_CHARS`].
fn is_weak(word: &str) -> bool {
    word.chars().count() < FTS_MIN_TERM_CHARS || is_stopword(word)
}

/// What [`fts_query`] makes of text whose every word is weak (stopwords and
/// one-letter words only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnlyStopwords {
    /// No query: such text matches nothing.
    MatchNothing,
    /// A query of those words, so a search for `the` still finds chunks
    /// holding `the` (FTS5 ranks them itself).
    Search,
}

/// Turns free text into an FTS5 expression that can only be a disjunction
/// of quoted terms, so no user text is FTS5 syntax: the distinct lower-cased
/// runs of letters and digits, each quoted, joined with `OR`. Stopwords and
/// words shorter than [`FTS_MIN_TERM_CHARS`] are dropped; when nothing else
/// is left, `only_stopwords` says whether they are searched instead. At most
/// `max_terms` terms, the first ones in text order. `None` when no term is left.
pub(crate) fn fts_query(text: &str, max_terms: usize, only_stopwords: OnlyStopwords) -> Option<String> {
    let mut terms: Vec<String> = Vec::new();
    let mut weak: Vec<String> = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|word| !word.is_empty()) {
        if terms.len() >= max_terms {
            break;
        }
        let word = word.to_lowercase();
        let list = if is_weak(&word) { &mut weak } else { &mut terms };
        if list.len() < max_terms && !list.contains(&word) {
            list.push(word);
        }
    }
    if terms.is_empty() && only_stopwords == OnlyStopwords::Search {
        terms = weak;
    }
    if terms.is_empty() {
        return None;
    }
    Some(terms.iter().map(|term| format!("\"{term}\"")).collect::<Vec<_>>().join(" OR "))
}

/// The words of a query [`fts_query`] made, unquoted.
#[cfg(any(test, feature = "postgres"))]
pub(crate) fn fts_query_words(query: &str) -> impl Iterator<Item = &str> {
    query.split(" OR ").map(|term| term.trim_matches('"')).filter(|word| !word.is_empty())
}

/// A word and its snowball stem; two terms match when either form matches.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Term {
    pub(crate) word: String,
    pub(crate) stem: String,
}

/// Lower-cased alphanumeric words of `text`, stopwords and words shorter
/// than [`FTS_MIN_TERM_CHARS`] dropped: the terms [`fts_query`] keeps.
pub(crate) fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).map(str::to_lowercase).filter(|word| !is_weak(word))
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
    fn contractions_leave_no_stopword_pieces() {
        assert_eq!(
            words("I don't think they're here, isn't it? We'll see; you've won").collect::<Vec<_>>(),
            ["think", "see", "won"]
        );
        assert!(words("Can Will use US English?").eq(["can", "will", "use", "us", "english"]));
    }

    #[test]
    fn fts_queries_are_quoted_terms_and_stopwords_only_when_alone() {
        let query = |text, only| fts_query(text, 4, only);
        assert_eq!(
            query("Deploy the gateway, deploy!", OnlyStopwords::MatchNothing).as_deref(),
            Some("\"deploy\" OR \"gateway\"")
        );
        assert_eq!(query("NEAR(x* OR col:y)", OnlyStopwords::Search).as_deref(), Some("\"near\" OR \"col\""));
        assert_eq!(query("what is it? x", OnlyStopwords::MatchNothing), None);
        assert_eq!(
            query("What is it? x", OnlyStopwords::Search).as_deref(),
            Some("\"what\" OR \"is\" OR \"it\" OR \"x\"")
        );
        assert_eq!(query("\"\" ** ()", OnlyStopwords::Search), None);
        // The limit counts kept terms: stopwords and repeats take no place in it.
        assert_eq!(
            query("the one and the two of three, one, four five", OnlyStopwords::MatchNothing).as_deref(),
            Some("\"one\" OR \"two\" OR \"three\" OR \"four\"")
        );
        assert_eq!(query("a b c d e f", OnlyStopwords::Search).as_deref(), Some("\"a\" OR \"b\" OR \"c\" OR \"d\""));
        assert_eq!(fts_query("tea", 0, OnlyStopwords::Search), None);
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
        assert_eq!(overlap(&light, &dark), 2.0 / 3.0);
        assert_eq!(overlap(&stems("the light mode"), &stems("a dark mode")), 0.5);
        assert_eq!(overlap(&stems("cargo"), &stems("cargo clippy fmt")), 1.0);
        assert_eq!(overlap(&stems(""), &stems("cargo")), 0.0);
    }
}
