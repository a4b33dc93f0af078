//! Lines of an untrusted text stream (JSONL imports, batch screening).
//!
//! One bad line must not end a bulk read: a line that is not UTF-8 or is
//! longer than the cap comes back as a [`LineProblem`] with its number, and
//! reading goes on with the next line. A UTF-8 byte order mark at the start
//! is dropped, and so is a `\r` before each `\n`. At most the cap is kept
//! of any line, so a file without line breaks costs no more than that.

use std::io::{self, BufRead};

/// The longest line kept unless the caller names another cap: 4 MiB.
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Why a line could not be read as text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LineProblem {
    /// The bytes are not valid UTF-8.
    #[error("line is not valid UTF-8 (invalid byte at offset {offset})")]
    NotUtf8 {
        /// Offset of the first invalid byte in the line.
        offset: usize,
    },
    /// The line is longer than the cap; it was skipped.
    #[error("line is longer than the {limit}-byte limit")]
    TooLong {
        /// The cap.
        limit: usize,
    },
}

/// One line: its 1-based number and its text or what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// 1-based line number.
    pub number: usize,
    /// The text without its line break, or the problem.
    pub text: Result<String, LineProblem>,
}

/// Iterates the lines of `reader`; see the module docs.
///
/// ```
/// let input: &[u8] = b"\xEF\xBB\xBFfirst\n\xFF\n third\r\n";
/// let lines: Vec<_> = cairn_guard::UntrustedLines::new(input).map(Result::unwrap).collect();
/// assert_eq!(lines[0].text.as_deref(), Ok("first"));
/// assert!(lines[1].text.is_err());
/// assert_eq!((lines[2].number, lines[2].text.as_deref()), (3, Ok(" third")));
/// ```
#[derive(Debug)]
pub struct UntrustedLines<R> {
    reader: R,
    number: usize,
    limit: usize,
    buffer: Vec<u8>,
}

impl<R: BufRead> UntrustedLines<R> {
    /// Lines of `reader`, each capped at [`MAX_LINE_BYTES`].
    pub fn new(reader: R) -> Self {
        Self::with_limit(reader, MAX_LINE_BYTES)
    }

    /// Lines of `reader`, each capped at `limit` bytes.
    pub fn with_limit(reader: R, limit: usize) -> Self {
        Self { reader, number: 0, limit, buffer: Vec::new() }
    }

    /// Drops the rest of an over-long line, up to and including its `\n`.
    fn skip_rest_of_line(&mut self) -> io::Result<()> {
        loop {
            let available = self.reader.fill_buf()?;
            if available.is_empty() {
                return Ok(());
            }
            match memchr_newline(available) {
                Some(at) => {
                    self.reader.consume(at + 1);
                    return Ok(());
                }
                None => {
                    let length = available.len();
                    self.reader.consume(length);
                }
            }
        }
    }
}

fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|byte| *byte == b'\n')
}

impl<R: BufRead> Iterator for UntrustedLines<R> {
    type Item = io::Result<Line>;

    fn next(&mut self) -> Option<Self::Item> {
        self.buffer.clear();
        let cap = (self.limit as u64).saturating_add(1);
        let read = match io::Read::take(&mut self.reader, cap).read_until(b'\n', &mut self.buffer) {
            Ok(read) => read,
            Err(error) => return Some(Err(error)),
        };
        if read == 0 {
            return None;
        }
        self.number += 1;
        let ended = self.buffer.last() == Some(&b'\n');
        if ended {
            self.buffer.pop();
        }
        if self.buffer.len() > self.limit {
            if !ended && let Err(error) = self.skip_rest_of_line() {
                return Some(Err(error));
            }
            return Some(Ok(Line { number: self.number, text: Err(LineProblem::TooLong { limit: self.limit }) }));
        }
        if self.buffer.last() == Some(&b'\r') {
            self.buffer.pop();
        }
        let mut bytes = std::mem::take(&mut self.buffer);
        if self.number == 1 && bytes.starts_with(BOM) {
            bytes.drain(..BOM.len());
        }
        let text =
            String::from_utf8(bytes).map_err(|error| LineProblem::NotUtf8 { offset: error.utf8_error().valid_up_to() });
        Some(Ok(Line { number: self.number, text }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], limit: usize) -> Vec<(usize, Result<String, LineProblem>)> {
        UntrustedLines::with_limit(input, limit)
            .map(|line| line.unwrap())
            .map(|line| (line.number, line.text))
            .collect()
    }

    #[test]
    fn a_bad_line_is_reported_and_reading_goes_on() {
        let input = b"\xEF\xBB\xBF{\"a\":1}\r\n{\"b\":\"\xC3\x28\"}\n0123456789ABCDEF\nlast";
        assert_eq!(
            lines(input, 12),
            [
                (1, Ok("{\"a\":1}".to_owned())),
                (2, Err(LineProblem::NotUtf8 { offset: 6 })),
                (3, Err(LineProblem::TooLong { limit: 12 })),
                (4, Ok("last".to_owned())),
            ]
        );
    }

    #[test]
    fn a_bom_is_only_dropped_at_the_start() {
        let input = b"one\n\xEF\xBB\xBFtwo\n";
        assert_eq!(lines(input, 100), [(1, Ok("one".to_owned())), (2, Ok("\u{feff}two".to_owned()))]);
    }
}
