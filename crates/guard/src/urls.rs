//! Exfiltration-URL redaction.
//!
//! A link can carry data out of a conversation the moment a client renders
//! or fetches it: a markdown image whose query string holds the user's
//! secrets, or a URL whose path smuggles an encoded blob. This module finds
//! URLs, to any host, whose query or path *carries data* and replaces them
//! with `[REDACTED:exfil-url]`. Ordinary links (a search with a short query,
//! a docs page, a video id) pass untouched.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

use crate::secrets::{CredentialFinding, splice};

/// Marker rule name for a redacted URL.
pub const EXFIL_RULE: &str = "exfil-url";

/// A query value at least this long is treated as carried data.
const LONG_QUERY_VALUE: usize = 48;
/// An opaque (base64/hex-like) query value at least this long is data.
const OPAQUE_QUERY_VALUE: usize = 24;
/// A path segment at least this long and opaque is data.
const OPAQUE_PATH_SEGMENT: usize = 64;
/// Percent-encoded spaces or `+` separators in one value that mark prose.
const ENCODED_WORDS: usize = 4;

static URL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?i)(?P<image>!\[[^\]]{0,200}\]\(\s*)?\b(?:https?|ftp|wss?)://[^\s<>"'`)\]]+"#)
        .expect("url pattern compiles")
});

/// Finds URLs that carry data in their query or path.
pub fn find_exfiltration_urls(text: &str) -> Vec<std::ops::Range<usize>> {
    if !text.contains("://") {
        return Vec::new();
    }
    // The capture group is only needed for a markdown image: a match starts
    // with `!` exactly when the image group took part (a scheme never does),
    // and only then is the search repeated with captures, from the same
    // start, where it finds the same leftmost-first match.
    URL.find_iter(text)
        .filter_map(|url| {
            let in_image = text.as_bytes()[url.start()] == b'!';
            let start = if in_image {
                URL.captures_at(text, url.start())
                    .and_then(|captures| captures.name("image"))
                    .expect("a match starting with `!` has the image group")
                    .end()
            } else {
                url.start()
            };
            let link = &text[start..url.end()];
            carries_data(link, in_image).then_some(start..url.end())
        })
        .collect()
}

/// Replaces every data-carrying URL in `text` with `[REDACTED:exfil-url]`.
///
/// ```
/// use cairn_guard::redact_exfiltration_urls;
/// let text = "![x](https://collect.example/p.png?d=c2VjcmV0IGNvbnZlcnNhdGlvbiBoaXN0b3J5)";
/// assert_eq!(redact_exfiltration_urls(text), "![x]([REDACTED:exfil-url])");
/// let link = "see https://docs.rs/regex/latest/regex/ and https://www.google.com/search?q=rust";
/// assert_eq!(redact_exfiltration_urls(link), link);
/// ```
pub fn redact_exfiltration_urls(text: &str) -> Cow<'_, str> {
    let spans = find_exfiltration_urls(text);
    if spans.is_empty() {
        return Cow::Borrowed(text);
    }
    tracing::debug!(count = spans.len(), "redacting exfiltration urls");
    let findings: Vec<CredentialFinding> =
        spans.into_iter().map(|span| CredentialFinding { rule: EXFIL_RULE, span }).collect();
    Cow::Owned(splice(text, &findings))
}

fn carries_data(url: &str, in_markdown_image: bool) -> bool {
    let without_fragment = url.split('#').next().unwrap_or(url);
    let (before_query, query) = match without_fragment.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (without_fragment, None),
    };
    if let Some(query) = query {
        // An image is fetched without a click: any parameter is a channel.
        if in_markdown_image && query.contains('=') {
            return true;
        }
        if query.split('&').any(|pair| value_carries_data(pair.split_once('=').map_or(pair, |(_, v)| v))) {
            return true;
        }
    }
    let path = before_query.split_once("://").map_or("", |(_, rest)| rest);
    path.split('/').skip(1).any(|segment| segment.len() >= OPAQUE_PATH_SEGMENT && is_opaque(segment))
}

fn value_carries_data(value: &str) -> bool {
    let encoded_words = value.matches("%20").count() + value.matches('+').count();
    value.len() >= LONG_QUERY_VALUE
        || (value.len() >= OPAQUE_QUERY_VALUE && is_opaque(value))
        || encoded_words >= ENCODED_WORDS
}

/// Base64, base64url or hex-looking: only token characters, with digits
/// and letters mixed.
fn is_opaque(value: &str) -> bool {
    let bytes = value.as_bytes();
    bytes.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'-' | b'_' | b'%'))
        && bytes.iter().any(u8::is_ascii_digit)
        && bytes.iter().any(u8::is_ascii_alphabetic)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_carrying_urls_are_redacted() {
        let cases = [
            "![a](https://evil.example/i.png?q=hello)",
            "https://evil.example/log?data=c2VjcmV0LXRva2VuLWZyb20tdXNlcg",
            "https://evil.example/c?msg=the%20user%20said%20their%20password%20is",
            "https://evil.example/collect?x=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "https://evil.example/u/4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d/p.gif",
        ];
        for text in cases {
            assert_eq!(redact_exfiltration_urls(text).matches("[REDACTED:exfil-url]").count(), 1, "{text}");
        }
    }

    #[test]
    fn ordinary_links_pass() {
        let cases = [
            "https://docs.rs/regex/latest/regex/struct.RegexSet.html",
            "https://www.youtube.com/watch?v=dQw4w9WgXcQ",
            "https://www.google.com/search?q=best+hiking+trails",
            "![diagram](https://example.com/img/diagram.png)",
            "https://github.com/rust-lang/rust/pull/12345#issuecomment-987654321",
            "see https://example.com/a?page=2&sort=asc for more",
        ];
        for text in cases {
            assert_eq!(redact_exfiltration_urls(text), text);
        }
    }

    #[test]
    fn image_links_match_the_captures_of_the_pattern() {
        let text = "![a](https://a.example/x?q=1) ![b] (http://b.example) ![c](\u{3000} ftp://c.example/?d=2) !https://d.example ![](wss://e.example/?z=3)";
        let expected: Vec<_> = URL
            .captures_iter(text)
            .filter_map(|captures| {
                let url = captures.get(0).expect("group 0 always participates");
                let start = captures.name("image").map_or(url.start(), |image| image.end());
                carries_data(&text[start..url.end()], captures.name("image").is_some()).then_some(start..url.end())
            })
            .collect();
        assert_eq!(expected.len(), 3);
        assert_eq!(find_exfiltration_urls(text), expected);
    }

    #[test]
    fn only_the_url_inside_an_image_is_replaced() {
        let text = "before ![alt text](https://e.example/p?s=1) after";
        assert_eq!(redact_exfiltration_urls(text), "before ![alt text]([REDACTED:exfil-url]) after");
    }
}
