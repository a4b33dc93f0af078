//! The skills audit trail, `<home>/skills-audit.jsonl`: written by
//! [`JsonlAudit`] (one JSON object a line, stamped with `at`) and read back
//! by `cairn skills audit` and `GET /api/skills/-/audit`.
//!
//! The reader treats the file as untrusted input: anyone who can write to
//! the home can append to it. Only its last [`MAX_READ_BYTES`] are read;
//! a line longer than [`MAX_LINE_BYTES`], not UTF-8, not a JSON object of
//! the record's shape, or with fields out of bounds is skipped and
//! counted; texts are cut and their control characters escaped.

use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

use cairn_skills::{AuditSink, SkillAuditEvent};
use serde::{Deserialize, Serialize};

/// Bytes read from the end of the file at most.
pub(crate) const MAX_READ_BYTES: u64 = 4 * 1024 * 1024;
/// Longest line kept.
pub(crate) const MAX_LINE_BYTES: usize = 16 * 1024;
/// Records returned at most (`--limit`, `?limit=`).
pub(crate) const MAX_LIMIT: usize = 1000;
/// Records returned when no limit is given.
pub(crate) const DEFAULT_LIMIT: usize = 50;
/// Longest `detail` returned (characters).
const MAX_DETAIL_CHARS: usize = 2000;
/// Most skill names kept per record, and the longest name.
const MAX_SKILLS: usize = 50;
const MAX_SKILL_NAME_CHARS: usize = 200;

/// Appends skill audit records to `<home>/skills-audit.jsonl`.
#[derive(Debug)]
pub(crate) struct JsonlAudit {
    pub(crate) path: PathBuf,
}

#[derive(Serialize)]
struct Stamped<'a> {
    at: String,
    #[serde(flatten)]
    event: &'a SkillAuditEvent,
}

impl AuditSink for JsonlAudit {
    fn record(&self, event: SkillAuditEvent) {
        let stamped = Stamped { at: jiff::Timestamp::now().to_string(), event: &event };
        let line = match serde_json::to_string(&stamped) {
            Ok(line) => line,
            Err(error) => {
                tracing::warn!(%error, "cannot encode a skills audit record");
                return;
            }
        };
        let mut options = std::fs::OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let result = options.open(&self.path).and_then(|mut file| writeln!(file, "{line}"));
        if let Err(error) = result {
            tracing::warn!(%error, path = %self.path.display(), "cannot append a skills audit record");
        }
    }
}

/// One record as read back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AuditRecord {
    /// When it was written (RFC 3339); `null` for records written before
    /// the stamp existed.
    #[serde(default)]
    pub(crate) at: Option<String>,
    /// `auto_skill_create`, `trigger_match`, ...
    pub(crate) action: String,
    /// The skills involved.
    pub(crate) skills: Vec<String>,
    /// Whether the action took effect.
    pub(crate) ok: bool,
    /// Extra facts.
    #[serde(default)]
    pub(crate) detail: String,
}

/// The newest records of the trail.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct AuditLog {
    /// Newest first.
    pub(crate) events: Vec<AuditRecord>,
    /// Lines that were not records (malformed, too long, out of bounds).
    pub(crate) skipped: usize,
    /// Older lines exist that were not read (the file is over the read bound).
    pub(crate) truncated: bool,
}

/// Control characters escaped, cut to `max` characters.
fn clean(text: &str, max: usize) -> String {
    let mut out = String::new();
    for (index, character) in text.chars().enumerate() {
        if index == max {
            out.push('…');
            break;
        }
        if character.is_control() {
            out.extend(character.escape_default());
        } else {
            out.push(character);
        }
    }
    out
}

fn parse_line(line: &[u8]) -> Option<AuditRecord> {
    if line.len() > MAX_LINE_BYTES {
        return None;
    }
    let record: AuditRecord = serde_json::from_slice(line).ok()?;
    let action_ok = !record.action.is_empty()
        && record.action.len() <= 64
        && record.action.bytes().all(|byte| byte.is_ascii_lowercase() || byte == b'_');
    let at_ok = record.at.as_deref().is_none_or(|at| at.parse::<jiff::Timestamp>().is_ok());
    if !action_ok || !at_ok || record.skills.len() > MAX_SKILLS {
        return None;
    }
    Some(AuditRecord {
        skills: record.skills.iter().map(|name| clean(name, MAX_SKILL_NAME_CHARS)).collect(),
        detail: clean(&record.detail, MAX_DETAIL_CHARS),
        ..record
    })
}

/// The newest `limit` records of the trail at `path` (none when it does
/// not exist). A link in its place is refused.
pub(crate) fn read(path: &Path, limit: usize) -> std::io::Result<AuditLog> {
    let metadata = match std::fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(AuditLog::default()),
        Err(error) => return Err(error),
    };
    if !metadata.file_type().is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{} is not a regular file", path.display()),
        ));
    }
    let mut file = std::fs::File::open(path)?;
    let length = file.metadata()?.len();
    let start = length.saturating_sub(MAX_READ_BYTES);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(MAX_READ_BYTES).read_to_end(&mut bytes)?;
    let mut log = AuditLog { truncated: start > 0, ..AuditLog::default() };
    let mut lines: Vec<&[u8]> = bytes.split(|byte| *byte == b'\n').collect();
    if start > 0 && !lines.is_empty() {
        // The first line was cut by the read bound.
        lines.remove(0);
    }
    for line in lines.iter().rev() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match parse_line(line) {
            Some(record) if log.events.len() < limit => log.events.push(record),
            Some(_) => {}
            None => log.skipped += 1,
        }
    }
    Ok(log)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_lines_are_skipped_and_counted_and_texts_cleaned() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("skills-audit.jsonl");
        let long = format!(
            "{{\"action\":\"create\",\"skills\":[],\"ok\":true,\"detail\":\"{}\"}}",
            "x".repeat(MAX_LINE_BYTES)
        );
        let lines = [
            r#"{"action":"create","skills":["a"],"ok":true,"detail":"old, unstamped"}"#,
            "not json",
            r#"{"action":"Bad Action","skills":[],"ok":true,"detail":""}"#,
            r#"{"at":"yesterday","action":"create","skills":[],"ok":true,"detail":""}"#,
            r#"[1,2]"#,
            &long,
            "",
            r#"{"at":"2026-12-05T10:00:00Z","action":"auto_skill_refine","skills":["auto/x"],"ok":false,"detail":"a\u001b[31mred"}"#,
        ];
        std::fs::write(&path, lines.join("\n")).unwrap();
        let log = read(&path, 10).unwrap();
        assert_eq!((log.skipped, log.truncated, log.events.len()), (5, false, 2));
        assert_eq!(log.events[0].action, "auto_skill_refine");
        assert_eq!(log.events[0].detail, "a\\u{1b}[31mred");
        assert_eq!((log.events[1].at.as_deref(), log.events[1].skills.as_slice()), (None, ["a".to_owned()].as_slice()));
        assert_eq!(read(&path, 1).unwrap().events.len(), 1);
        assert_eq!(read(&dir.path().join("missing"), 5).unwrap(), AuditLog::default());
    }

    #[test]
    fn only_the_tail_of_a_huge_file_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("skills-audit.jsonl");
        let line = r#"{"action":"trigger_match","skills":["a"],"ok":true,"detail":"padding padding padding"}"#;
        let count = (MAX_READ_BYTES as usize / line.len()) + 100;
        std::fs::write(&path, format!("{}\n", vec![line; count].join("\n"))).unwrap();
        let log = read(&path, MAX_LIMIT).unwrap();
        assert!(log.truncated);
        assert_eq!((log.events.len(), log.skipped), (MAX_LIMIT, 0));
    }

    #[cfg(unix)]
    #[test]
    fn a_link_in_place_of_the_trail_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("elsewhere"), "{}").unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), dir.path().join("skills-audit.jsonl")).unwrap();
        assert!(read(&dir.path().join("skills-audit.jsonl"), 5).is_err());
    }
}
