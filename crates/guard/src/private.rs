//! `<private>…</private>` spans: text the user marked as never to be kept.
//!
//! A user wraps part of a prompt, a tool output or a remembered value in
//! `<private>` tags; every store, log line and audit row receives the text
//! with each span replaced by [`PRIVATE_PLACEHOLDER`], so a reader sees
//! that something was withheld and never what.
//!
//! The tags are matched case-insensitively, across lines, with whitespace
//! and attributes inside them (`<private>`, `<PRIVATE >`, `< private
//! reason="x">`, `</ Private >`). Where the markup is broken, the rule is
//! to withhold more rather than less:
//!
//! - an opening tag with no closing tag withholds everything after it;
//! - spans nest (`<private>a <private>b</private> c</private>` withholds
//!   `c` too), and an inner opening tag left open withholds the rest;
//! - a closing tag with no opening tag withholds everything before it
//!   (back to the end of the previous span, or the start of the text): the
//!   opening tag was lost, not the intent.
//!
//! `<privateer>` and `<private_note>` are other words, not the tag.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

/// What a withheld span becomes.
pub const PRIVATE_PLACEHOLDER: &str = "[private]";

/// One opening or closing tag: `<`, optional `/`, `private` as a whole
/// word, anything up to the next `>` (attributes, whitespace, line breaks).
static TAG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)<\s*(/\s*)?private\b[^>]*>").expect("private tag pattern compiles"));

/// Whether `text` holds an opening or closing `<private>` tag, that is,
/// whether [`strip_private`] would change it.
pub fn has_private(text: &str) -> bool {
    TAG.is_match(text)
}

/// `text` with every `<private>…</private>` span (tags included) replaced
/// by [`PRIVATE_PLACEHOLDER`]; borrowed when there is none. See the module
/// documentation for broken markup: an unclosed span runs to the end of
/// the text.
///
/// ```
/// use cairn_guard::strip_private;
///
/// assert_eq!(strip_private("deploy to <private>10.0.0.7</private> now"), "deploy to [private] now");
/// assert_eq!(strip_private("token: <PRIVATE>abc\ndef"), "token: [private]");
/// assert_eq!(strip_private("nothing marked"), "nothing marked");
/// ```
pub fn strip_private(text: &str) -> Cow<'_, str> {
    if !has_private(text) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    // Start of the text not yet copied or withheld.
    let mut kept_from = 0;
    let mut depth = 0usize;
    for tag in TAG.captures_iter(text) {
        let whole = tag.get(0).expect("group 0 always matches");
        let closing = tag.get(1).is_some();
        match (closing, depth) {
            (false, 0) => {
                out.push_str(&text[kept_from..whole.start()]);
                out.push_str(PRIVATE_PLACEHOLDER);
                depth = 1;
            }
            (false, _) => depth += 1,
            (true, 0) => {
                // A closing tag whose opening tag is missing: what came
                // before it (since the last span) is withheld.
                if !out.ends_with(PRIVATE_PLACEHOLDER) || kept_from < whole.start() {
                    out.push_str(PRIVATE_PLACEHOLDER);
                }
                kept_from = whole.end();
            }
            (true, _) => {
                depth -= 1;
                if depth == 0 {
                    kept_from = whole.end();
                }
            }
        }
    }
    if depth == 0 {
        out.push_str(&text[kept_from..]);
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each input and what is kept of it.
    fn check(cases: &[(&str, &str)]) {
        for (input, expected) in cases {
            assert_eq!(strip_private(input), *expected, "input {input:?}");
            assert_eq!(has_private(input), input != expected, "has_private({input:?})");
        }
    }

    #[test]
    fn spans_are_replaced_by_the_placeholder() {
        check(&[
            ("a <private>secret</private> b", "a [private] b"),
            ("<private>secret</private>", "[private]"),
            ("<private></private>", "[private]"),
            ("a<private>x</private>b<private>y</private>c", "a[private]b[private]c"),
            ("a <private>x</private><private>y</private> b", "a [private][private] b"),
            ("line one\n<private>two\nthree</private>\nfour", "line one\n[private]\nfour"),
        ]);
    }

    #[test]
    fn tags_match_in_any_case_with_whitespace_and_attributes() {
        check(&[
            ("a <PRIVATE>x</PRIVATE> b", "a [private] b"),
            ("a <Private>x</pRiVaTe> b", "a [private] b"),
            ("a <private >x</private > b", "a [private] b"),
            ("a < private>x< / private> b", "a [private] b"),
            ("a <private reason=\"ssn\">x</private> b", "a [private] b"),
            ("a <private\n>x</private\n> b", "a [private] b"),
            ("a <private-note>x</private-note> b", "a [private] b"),
        ]);
    }

    #[test]
    fn broken_markup_withholds_more_never_less() {
        check(&[
            // Unclosed: the tail is never kept.
            ("keep <private>secret and the rest", "keep [private]"),
            ("keep <private>secret\nmore lines\n", "keep [private]"),
            ("keep <private", "keep <private"),
            // Nested: the outer span ends at its own closing tag.
            ("a <private>x <private>y</private> z</private> b", "a [private] b"),
            ("a <private>x <private>y</private> z", "a [private]"),
            // A closing tag with no opening: what precedes it is withheld.
            ("secret</private> kept", "[private] kept"),
            ("a <private>x</private> y</private> z", "a [private][private] z"),
            ("a <private>x</private></private> z", "a [private] z"),
        ]);
    }

    #[test]
    fn other_words_and_text_without_tags_pass_untouched() {
        check(&[
            ("", ""),
            ("plain text", "plain text"),
            ("a private matter, <b>bold</b>", "a private matter, <b>bold</b>"),
            ("<privateer>arr</privateer>", "<privateer>arr</privateer>"),
            ("<private_note>x</private_note>", "<private_note>x</private_note>"),
            ("[private] already withheld", "[private] already withheld"),
            ("&lt;private&gt;x&lt;/private&gt;", "&lt;private&gt;x&lt;/private&gt;"),
        ]);
    }

    #[test]
    fn the_result_has_no_tag_left_and_stripping_twice_changes_nothing() {
        let inputs = [
            "a <private>x</private> b",
            "x</private>y<private>z",
            "<private><private></private>",
            "</private></private><private>",
            "é <PRIVATE>ü\u{200b}</private> ß",
        ];
        for input in inputs {
            let once = strip_private(input).into_owned();
            assert!(!has_private(&once), "{input:?} -> {once:?}");
            assert_eq!(strip_private(&once), once.as_str(), "{input:?}");
        }
    }

    #[test]
    fn a_marker_anywhere_in_random_markup_never_survives() {
        let mut next = crate::xorshift(0x9e37_79b9_7f4a_7c15);
        let pieces = ["<private>", "</private>", "<PRIVATE >", "</ private>", "MARKER", "text ", "\n", "<"];
        for _ in 0..2_000 {
            let mut input = String::new();
            let mut inside = 0usize;
            let length = (next() % 12) as usize;
            for _ in 0..length {
                let piece = pieces[(next() % pieces.len() as u64) as usize];
                // The marker only ever goes inside an open span.
                if piece == "MARKER" && inside == 0 {
                    continue;
                }
                input.push_str(piece);
                match piece.to_ascii_lowercase().replace(' ', "").as_str() {
                    "<private>" => inside += 1,
                    "</private>" => inside = inside.saturating_sub(1),
                    _ => {}
                }
            }
            let kept = strip_private(&input);
            assert!(!kept.contains("MARKER"), "{input:?} kept {kept:?}");
        }
    }
}
