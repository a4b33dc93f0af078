//! Character-counted truncation.

/// Number of characters (Unicode scalar values) in `text`.
pub(crate) fn chars(text: &str) -> usize {
    text.chars().count()
}

/// Byte index just past the first `count` characters of `text`.
fn byte_index(text: &str, count: usize) -> usize {
    text.char_indices().nth(count).map_or(text.len(), |(index, _)| index)
}

/// `text` cut to at most `max` characters, `marker` included when it had
/// to be cut. Returns the text and whether it was cut.
pub(crate) fn truncate(text: &str, max: usize, marker: &str) -> (String, bool) {
    if chars(text) <= max {
        return (text.to_owned(), false);
    }
    let marker_chars = chars(marker);
    if max <= marker_chars {
        return (text[..byte_index(text, max)].to_owned(), true);
    }
    let mut out = text[..byte_index(text, max - marker_chars)].trim_end().to_owned();
    out.push_str(marker);
    (out, true)
}

/// `text` cut at a line boundary to at most `max` characters, `marker` on
/// its own line when it had to be cut (a mid-line cut when not even one
/// line fits).
pub(crate) fn truncate_lines(text: &str, max: usize, marker: &str) -> (String, bool) {
    if chars(text) <= max {
        return (text.to_owned(), false);
    }
    let room = max.saturating_sub(chars(marker) + 1);
    let cut = &text[..byte_index(text, room)];
    match cut.rfind('\n') {
        Some(newline) if newline > 0 => {
            let mut out = cut[..newline].trim_end().to_owned();
            out.push('\n');
            out.push_str(marker);
            (out, true)
        }
        _ => truncate(text, max, marker),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_respects_the_limit_in_characters() {
        assert_eq!(truncate("héllo wörld", 20, "…"), ("héllo wörld".into(), false));
        assert_eq!(truncate("héllo wörld", 7, "…"), ("héllo…".into(), true));
        assert_eq!(truncate("héllo", 1, "…[x]"), ("h".into(), true));
        let (cut, was_cut) = truncate_lines("one\ntwo\nthree\nfour", 12, "…");
        assert_eq!((cut.as_str(), was_cut), ("one\ntwo\n…", true));
        assert!(chars(&cut) <= 12);
        assert_eq!(truncate_lines("a very long single line", 10, "…").0, "a very lo…");
    }
}
