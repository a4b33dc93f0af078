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
    match fold_bytes::<true>(text) {
        Some(folded) => Cow::Owned(folded),
        None => fold_unicode(text, text.nfkc()),
    }
}

/// Characters the NFKC quick check allows as they are with combining class
/// 0: ASCII, Latin-1 letters, kana, CJK punctuation and ideographs, Hangul
/// syllables. A test checks every one against the Unicode tables.
fn is_nfkc_starter(c: char) -> bool {
    matches!(c,
        '\0'..='\u{7F}'
        | '\u{C0}'..='\u{FF}'
        | '\u{3001}'..='\u{3002}'
        | '\u{3041}'..='\u{3096}'
        | '\u{30A1}'..='\u{30FA}'
        | '\u{4E00}'..='\u{9FFF}'
        | '\u{AC00}'..='\u{D7A3}')
}

/// Folds the (NFKC) characters `chars` of `text`. The reference form of the
/// fold; [`fold_bytes`] computes the same string faster when `chars` is
/// `text.chars()`.
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

/// Byte classes of [`fold_bytes`]: ASCII copied lower-cased, whitespace,
/// and everything else (backtick, non-ASCII) decoded and folded as a char.
const PLAIN: u8 = 0;
const SPACE: u8 = 1;
const OTHER: u8 = 2;

/// The byte classes of [`fold_bytes`]. `unicode_space` counts the vertical
/// tab as whitespace, as `char::is_whitespace` does and
/// `u8::is_ascii_whitespace` does not.
const fn byte_classes(unicode_space: bool) -> [u8; 256] {
    let mut table = [OTHER; 256];
    let mut b = 0;
    while b < 0x80 {
        table[b] = match b as u8 {
            b'\t' | b'\n' | 0x0C | b'\r' | b' ' => SPACE,
            0x0B if unicode_space => SPACE,
            b'`' => OTHER,
            _ => PLAIN,
        };
        b += 1;
    }
    table
}

const ASCII_CLASSES: [u8; 256] = byte_classes(false);
const UNICODE_CLASSES: [u8; 256] = byte_classes(true);

/// The fold of [`fold_unicode`] over `text.chars()` (with `UNICODE = true`),
/// or the ASCII fold of [`fold_ascii`] (with `UNICODE = false`, where only
/// ASCII whitespace counts). Runs of plain ASCII, single spaces included
/// (one space between two plain bytes folds to itself), are copied and
/// lower-cased in bulk.
///
/// With `UNICODE`, the same pass runs the NFKC quick check and returns
/// `None` unless `is_nfkc_quick(text.chars())` is `Yes` (the text then needs
/// the NFKC pass first). The check only looks at the runs of characters
/// other than ASCII and [`is_nfkc_starter`]: it resets its state on every
/// such character (allowed, combining class 0), so the runs between them
/// can be checked on their own.
fn fold_bytes<const UNICODE: bool>(text: &str) -> Option<String> {
    let run_is_yes = |run: &str| is_nfkc_quick(run.chars()) == IsNormalized::Yes;
    // Start of the current run of non-starters.
    let mut run_start: Option<usize> = None;
    let classes = if UNICODE { &UNICODE_CLASSES } else { &ASCII_CLASSES };
    let class = |index: usize| text.as_bytes().get(index).map(|&b| classes[usize::from(b)]);
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut pending_space = false;
    let mut index = 0;
    while let Some(current) = class(index) {
        if current == PLAIN {
            let mut end = index + 1;
            loop {
                match class(end) {
                    Some(PLAIN) => end += 1,
                    Some(SPACE) if bytes[end] == b' ' && class(end + 1) == Some(PLAIN) => end += 2,
                    _ => break,
                }
            }
            if let Some(start) = run_start.take()
                && !run_is_yes(&text[start..index])
            {
                return None;
            }
            if pending_space {
                out.push(' ');
                pending_space = false;
            }
            let start = out.len();
            out.push_str(&text[index..end]);
            out[start..].make_ascii_lowercase();
            index = end;
            continue;
        }
        if current == SPACE {
            if let Some(start) = run_start.take()
                && !run_is_yes(&text[start..index])
            {
                return None;
            }
            pending_space = !out.is_empty();
            index += 1;
            continue;
        }
        let c = text[index..].chars().next().expect("index is on a char boundary");
        if UNICODE {
            if is_nfkc_starter(c) {
                if let Some(start) = run_start.take()
                    && !run_is_yes(&text[start..index])
                {
                    return None;
                }
            } else if run_start.is_none() {
                run_start = Some(index);
            }
        }
        index += c.len_utf8();
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
        } else if is_caseless(c) {
            out.push(c);
        } else {
            out.extend(c.to_lowercase());
        }
    }
    if let Some(start) = run_start
        && !run_is_yes(&text[start..])
    {
        return None;
    }
    Some(out)
}

/// Blocks with no lower-case mapping (CJK punctuation, kana, CJK ideographs,
/// Yi, Hangul syllables): `to_lowercase` is the identity there, and skipping
/// its table search matters for CJK text. A test checks every char.
fn is_caseless(c: char) -> bool {
    matches!(c, '\u{3000}'..='\u{A63F}' | '\u{AC00}'..='\u{D7FF}')
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
    Cow::Owned(fold_bytes::<false>(text).expect("ASCII text is in NFKC form"))
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
    use std::borrow::Cow;

    use unicode_normalization::char::canonical_combining_class;
    use unicode_normalization::{IsNormalized, is_nfkc_quick};

    use super::{fold_bytes, fold_unicode, is_caseless, is_nfkc_starter, normalize};

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

    /// Texts that exercise every branch of the fold: ASCII and Unicode
    /// whitespace (the vertical tab included), invisibles, look-alike
    /// punctuation, multi-char lower-case mappings, caseless scripts.
    fn mixed_texts() -> Vec<String> {
        let atoms = [
            "a",
            "Z",
            "Ignore",
            " ",
            "  ",
            "\t",
            "\n",
            "\u{0B}",
            "\u{0C}",
            "\r",
            "\u{1C}",
            "\u{7F}",
            "`",
            "\u{85}",
            "\u{A0}",
            "\u{2028}",
            "\u{3000}",
            "\u{2019}",
            "\u{201C}",
            "\u{2014}",
            "\u{AB}",
            "\u{AD}",
            "\u{200B}",
            "\u{202E}",
            "\u{FEFF}",
            "\u{FF29}",
            "e\u{301}",
            "\u{327}\u{301}",
            "\u{FB01}",
            "\u{212A}",
            "\u{130}",
            "\u{1C5}",
            "\u{1E9E}",
            "\u{3A3}",
            "\u{2160}",
            "彼は",
            "ｶﾀｶﾅ",
            "\u{1D400}",
            "\u{1F600}",
            "À",
            "\u{10400}",
        ];
        let mut next = crate::xorshift(0x9E37_79B9_7F4A_7C15);
        (0..5000)
            .map(|_| (0..next() % 12).map(|_| atoms[(next() % atoms.len() as u64) as usize]).collect::<String>())
            .collect()
    }

    #[test]
    fn byte_fold_equals_char_fold_and_runs_the_quick_check() {
        for text in mixed_texts() {
            let expected =
                (is_nfkc_quick(text.chars()) == IsNormalized::Yes).then(|| fold_unicode(&text, text.chars()));
            assert_eq!(fold_bytes::<true>(&text).map(Cow::Owned), expected, "input {text:?}");
        }
    }

    #[test]
    fn ascii_byte_fold_equals_reference() {
        for text in mixed_texts().iter().map(|t| t.replace(|c: char| !c.is_ascii(), "")) {
            let mut expected = String::new();
            let mut pending_space = false;
            for b in text.bytes() {
                if b.is_ascii_whitespace() {
                    pending_space = !expected.is_empty();
                    continue;
                }
                if pending_space {
                    expected.push(' ');
                    pending_space = false;
                }
                expected.push(if b == b'`' { '\'' } else { b.to_ascii_lowercase() as char });
            }
            assert_eq!(fold_bytes::<false>(&text), Some(expected), "input {text:?}");
        }
    }

    #[test]
    fn nfkc_starters_are_allowed_with_combining_class_zero() {
        for c in (0..=u32::from(char::MAX)).filter_map(char::from_u32).filter(|&c| is_nfkc_starter(c)) {
            assert_eq!(is_nfkc_quick(std::iter::once(c)), IsNormalized::Yes, "{c:?}");
            assert_eq!(canonical_combining_class(c), 0, "{c:?}");
        }
    }

    #[test]
    fn caseless_blocks_have_no_lowercase_mapping() {
        for c in (0..=u32::from(char::MAX)).filter_map(char::from_u32).filter(|&c| is_caseless(c)) {
            assert!(c.to_lowercase().eq([c]), "{c:?}");
        }
    }
}
