//! Text normalisation applied before the injection screen, so trivial
//! obfuscation (full-width letters, zero-width joiners, bidi overrides,
//! curly quotes, odd spacing, case) does not evade a pattern.

use std::borrow::Cow;

use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfkc_quick};

/// True for characters that render as nothing or only reorder text:
/// zero-width spaces and joiners, bidi embeddings/overrides/isolates,
/// the word joiner family, the BOM and the soft hyphen.
fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}'
        | '\u{034F}'
        | '\u{061C}'
        | '\u{180E}'
        | '\u{200B}'..='\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{2069}'
        | '\u{FEFF}')
}

/// Maps typographic look-alikes onto their ASCII form.
fn fold_punctuation(c: char) -> char {
    match c {
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' | '`' => '\'',
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' | '«' | '»' => '"',
        '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
        _ => c,
    }
}

/// Normalises `text` for screening: Unicode NFKC, invisible characters
/// removed, typographic quotes and dashes folded to ASCII, lower case, and
/// every run of whitespace collapsed to one space.
///
/// ASCII input skips the NFKC pass (it is the identity there), and so does
/// text the quick check proves already in NFKC form, which keeps the common
/// cases cheap.
pub fn normalize(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        return fold_ascii(text);
    }
    if is_nfkc_quick(text.chars()) == IsNormalized::Yes {
        fold_unicode(text, text.chars())
    } else {
        fold_unicode(text, text.nfkc())
    }
}

/// Folds the (NFKC) characters `chars` of `text`.
fn fold_unicode(text: &str, chars: impl Iterator<Item = char>) -> Cow<'_, str> {
    let mut out = String::with_capacity(text.len());
    let mut pending_space = false;
    for c in chars {
        if is_invisible(c) {
            continue;
        }
        if c.is_whitespace() {
            pending_space = !out.is_empty();
            continue;
        }
        if pending_space {
            out.push(' ');
            pending_space = false;
        }
        let c = fold_punctuation(c);
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
        } else {
            out.extend(c.to_lowercase());
        }
    }
    Cow::Owned(out)
}

fn fold_ascii(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let already_folded = !bytes.iter().any(u8::is_ascii_uppercase)
        && !bytes.windows(2).any(|w| w[0].is_ascii_whitespace() && w[1].is_ascii_whitespace())
        && !bytes.iter().any(|&b| b.is_ascii_whitespace() && b != b' ')
        && !bytes.contains(&b'`')
        && bytes.first().is_none_or(|b| !b.is_ascii_whitespace());
    if already_folded {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut pending_space = false;
    for &b in bytes {
        if b.is_ascii_whitespace() {
            pending_space = !out.is_empty();
            continue;
        }
        if pending_space {
            out.push(' ');
            pending_space = false;
        }
        out.push(if b == b'`' { '\'' } else { b.to_ascii_lowercase() as char });
    }
    Cow::Owned(out)
}

/// Rewrites Unicode `\b` and `\w` into ASCII classes. The lazy DFA cannot
/// evaluate Unicode word boundaries on non-ASCII text and would hand the
/// whole search to a far slower engine; every pattern set in this crate goes
/// through this rewrite.
pub(crate) fn ascii_pattern(pattern: &str) -> String {
    pattern.replace(r"\b", r"(?-u:\b)").replace(r"\w", r"[0-9A-Za-z_]")
}

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn folds_case_space_and_obfuscation() {
        let cases = [
            ("Ignore   ALL\tprevious\n\ninstructions", "ignore all previous instructions"),
            ("ig\u{200B}nore pre\u{200D}vious", "ignore previous"),
            ("\u{FF29}\u{FF27}\u{FF2E}\u{FF2F}\u{FF32}\u{FF25}", "ignore"),
            ("\u{202E}system\u{202C} prompt", "system prompt"),
            ("don\u{2019}t tell", "don't tell"),
            ("  leading and trailing  ", "leading and trailing"),
            ("already folded", "already folded"),
            ("Réunion\u{00A0}À  Paris ﬁn", "réunion à paris fin"),
            ("Cafe\u{0301} déjà", "café déjà"),
            ("彼は毎朝　六時に", "彼は毎朝 六時に"),
            ("x\u{2019}y \u{FF21}\u{0301}", "x'y á"),
        ];
        for (input, expected) in cases {
            assert_eq!(normalize(input), expected, "input {input:?}");
        }
    }

    #[test]
    fn ascii_lowercase_input_is_borrowed() {
        assert!(matches!(normalize("plain text"), std::borrow::Cow::Borrowed(_)));
        assert!(matches!(normalize("Plain text"), std::borrow::Cow::Owned(_)));
    }
}
