//! The human-editable half of memory: `preferences.md`, `projects.md` and
//! one history file per day under `<home>/memory/`, rendered into context
//! with decaying age tiers and searchable through an FTS5 keyword index in
//! `<home>/memory_index.db`.
//!
//! Write guarantees:
//!
//! - `preferences.md` and `projects.md` are replaced wholesale through a
//!   temporary file in the same directory and a rename, so a reader sees the
//!   old file or the new one, never a torn one, and no other file is touched.
//! - A history entry is appended with one `write` on a file opened with
//!   `O_APPEND`, while holding an exclusive advisory lock on the day file.
//!   `O_APPEND` alone puts each `write` call at the end of the file, but a
//!   large entry may need several calls and some file systems do not honour
//!   it atomically; the lock makes the whole entry one unit among all Cairn
//!   writers, threads and processes alike, and lets the index read a day
//!   file without seeing half an entry. Hand edits that take no lock are
//!   still never clobbered: appends only ever add bytes at the end.

mod history;
mod index;

use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jiff::civil::Date;
use jiff::{SignedDuration, Timestamp, ToSpan, ZonedDateTime};
use parking_lot::Mutex;
use serde::Serialize;

pub use index::{FileHit, IndexReport};

use crate::constants::{
    HISTORY_CACHE_TTL_MS, HISTORY_CAP_CHARS, HISTORY_FULL_DAYS, HISTORY_WINDOW_DAYS, INDEX_FILE_NAME,
    PREFERENCES_CAP_CHARS, PROJECTS_CAP_CHARS, TRUNCATION_MARKER,
};
use crate::error::{MemoryError, Rejected, Result};
use crate::scope::ScopeFilter;
use history::{day_file_name, escape_entry_text, format_entry, render_day, tier_for_age};
use index::KeywordIndex;

pub(crate) use history::{parse_day_file_name, preamble_notes, split_chunks};

/// Directory of the Markdown files inside Cairn's home.
pub const MEMORY_DIR: &str = "memory";
/// The preferences file inside the memory directory.
pub const PREFERENCES_FILE: &str = "preferences.md";
/// The projects file inside the memory directory.
pub const PROJECTS_FILE: &str = "projects.md";
/// The directory of day files inside the memory directory.
pub const HISTORY_DIR: &str = "history";

/// Where the files' notion of "now" comes from: local wall-clock time with
/// its time zone. Day files and entry headers use this clock's local date
/// and time; the history cache ages by it.
pub trait ZonedClock: Send + Sync {
    /// The current instant in the local time zone.
    fn now(&self) -> ZonedDateTime;
}

/// The system clock in the system time zone.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemZonedClock;

impl ZonedClock for SystemZonedClock {
    fn now(&self) -> ZonedDateTime {
        ZonedDateTime::now()
    }
}

/// A clock that stands still until it is set or advanced: the test double
/// for cache expiry and midnight.
#[derive(Debug)]
pub struct ManualZonedClock {
    now: Mutex<ZonedDateTime>,
}

impl ManualZonedClock {
    /// A clock showing `now`.
    pub fn new(now: ZonedDateTime) -> Self {
        ManualZonedClock { now: Mutex::new(now) }
    }

    /// Moves the clock to `now`.
    pub fn set(&self, now: ZonedDateTime) {
        *self.now.lock() = now;
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: SignedDuration) {
        let mut now = self.now.lock();
        *now = now.checked_add(by).expect("a test clock stays within jiff's range");
    }
}

impl ZonedClock for ManualZonedClock {
    fn now(&self) -> ZonedDateTime {
        self.now.lock().clone()
    }
}

/// The rendered history window, as [`MemoryFiles::recent_history`] returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecentHistory {
    /// Newest day first; days separated by a blank line.
    pub text: String,
    /// The day the window was rendered for (day 0).
    pub today: Date,
    /// Dates of the day files that contributed, newest first.
    pub days: Vec<Date>,
}

/// Character caps of the three sections of [`MemoryFiles::get_context`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilesContextCaps {
    /// Cap of the preferences section.
    pub preferences: usize,
    /// Cap of the projects section.
    pub projects: usize,
    /// Cap of the history section.
    pub history: usize,
    /// Days of history shown in full (the rest decays).
    pub history_days: u32,
}

impl Default for FilesContextCaps {
    fn default() -> Self {
        FilesContextCaps {
            preferences: PREFERENCES_CAP_CHARS,
            projects: PROJECTS_CAP_CHARS,
            history: HISTORY_CAP_CHARS,
            history_days: HISTORY_FULL_DAYS,
        }
    }
}

/// One section of the files context with the citation of where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContextSection {
    /// `Preferences`, `Projects` or `Recent history`.
    pub title: &'static str,
    /// Which file(s) and days the body came from.
    pub source: String,
    /// The screened, capped text.
    pub body: String,
    /// True when the body was cut to its cap.
    pub truncated: bool,
}

impl ContextSection {
    /// `[Title] (source: …)` followed by the body.
    pub fn render(&self) -> String {
        format!("[{}] (source: {})\n{}", self.title, self.source, self.body)
    }
}

/// The Markdown memory ready for a prompt: each present section screened,
/// capped and cited.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FilesContext {
    /// From `preferences.md`.
    pub preferences: Option<ContextSection>,
    /// From `projects.md`.
    pub projects: Option<ContextSection>,
    /// From the day files, decayed by age.
    pub history: Option<ContextSection>,
}

impl FilesContext {
    /// The present sections, in order.
    pub fn sections(&self) -> impl Iterator<Item = &ContextSection> {
        [&self.preferences, &self.projects, &self.history].into_iter().flatten()
    }

    /// The present sections rendered and separated by blank lines.
    pub fn render(&self) -> String {
        self.sections().map(ContextSection::render).collect::<Vec<_>>().join("\n\n")
    }
}

/// Where an appended history entry went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistoryAppend {
    /// The day file, relative to the memory directory.
    pub file: String,
    /// Local date of the entry.
    pub date: String,
    /// Local `HH:MM` of its header.
    pub time: String,
}

/// What [`MemoryFiles::prune_history`] deleted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PruneReport {
    /// Dates of the deleted day files, oldest first.
    pub deleted: Vec<String>,
    /// Day files kept.
    pub kept: usize,
}

struct CachedHistory {
    days: u32,
    scopes: ScopeFilter,
    today: Date,
    rendered_at: Timestamp,
    value: Arc<RecentHistory>,
}

/// The Markdown memory files of one Cairn home. Shared by threads (`Sync`);
/// several processes may use the same home at once.
pub struct MemoryFiles {
    memory_dir: PathBuf,
    history_dir: PathBuf,
    clock: Arc<dyn ZonedClock>,
    cache: Mutex<Option<CachedHistory>>,
    index: KeywordIndex,
}

impl std::fmt::Debug for MemoryFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryFiles")
            .field("memory_dir", &self.memory_dir)
            .field("index", &self.index.path())
            .finish_non_exhaustive()
    }
}

impl MemoryFiles {
    /// Opens the files of `home` (`<home>/memory/…` and
    /// `<home>/memory_index.db`), creating the directories. The index is
    /// opened, and built if missing, on first use.
    pub fn open(home: &Path) -> Result<Self> {
        let memory_dir = home.join(MEMORY_DIR);
        let history_dir = memory_dir.join(HISTORY_DIR);
        std::fs::create_dir_all(&history_dir).map_err(|source| MemoryError::Io {
            operation: "creating the history directory",
            path: history_dir.clone(),
            source,
        })?;
        Ok(MemoryFiles {
            index: KeywordIndex::new(home.join(INDEX_FILE_NAME), memory_dir.clone()),
            memory_dir,
            history_dir,
            clock: Arc::new(SystemZonedClock),
            cache: Mutex::new(None),
        })
    }

    /// Uses `clock` instead of the system clock.
    pub fn with_clock(mut self, clock: Arc<dyn ZonedClock>) -> Self {
        self.clock = clock;
        self
    }

    /// `<home>/memory`.
    pub fn memory_dir(&self) -> &Path {
        &self.memory_dir
    }

    /// `<home>/memory_index.db`.
    pub fn index_path(&self) -> &Path {
        self.index.path()
    }

    /// The local date and time of the clock.
    pub fn now(&self) -> ZonedDateTime {
        self.clock.now()
    }

    /// The text of `preferences.md` (empty when the file does not exist).
    pub fn preferences(&self) -> Result<String> {
        self.read_top_level(PREFERENCES_FILE)
    }

    /// The text of `projects.md` (empty when the file does not exist).
    pub fn projects(&self) -> Result<String> {
        self.read_top_level(PROJECTS_FILE)
    }

    /// Replaces `preferences.md` wholesale (temp file + rename).
    pub fn write_preferences(&self, text: &str) -> Result<()> {
        self.replace_top_level(PREFERENCES_FILE, text)
    }

    /// Replaces `projects.md` wholesale (temp file + rename).
    pub fn write_projects(&self, text: &str) -> Result<()> {
        self.replace_top_level(PROJECTS_FILE, text)
    }

    fn read_top_level(&self, name: &str) -> Result<String> {
        let path = self.memory_dir.join(name);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
            Err(source) => Err(MemoryError::Io { operation: "reading", path, source }),
        }
    }

    fn replace_top_level(&self, name: &str, text: &str) -> Result<()> {
        let _span = tracing::debug_span!("memory_files_replace", file = name).entered();
        let body = top_level_body(text)?;
        self.write_top_level(name, &body)?;
        self.index_after_write(name);
        Ok(())
    }

    /// Writes a top-level file whole: a synced temporary file renamed onto it.
    fn write_top_level(&self, name: &str, text: &str) -> Result<()> {
        cairn_files::write_atomic(&self.memory_dir.join(name), text.as_bytes()).map_err(MemoryError::files)
    }

    /// Appends one entry to today's day file under a `#### HH:MM` header in
    /// the clock's local time. The text is trimmed, credentials in it are
    /// redacted, lines that would forge a header are escaped, and text the
    /// injection screen flags is refused.
    pub fn append_history(&self, text: &str) -> Result<HistoryAppend> {
        self.append_history_in(&crate::scope::Scope::Global, text)
    }

    /// [`append_history`](Self::append_history) for a session of `scope`:
    /// a project's entry carries its name in a tag line, and readers of
    /// other projects do not see it.
    pub fn append_history_in(&self, scope: &crate::scope::Scope, text: &str) -> Result<HistoryAppend> {
        let _span = tracing::debug_span!("memory_files_append").entered();
        let text = screen_for_storage(text, false)?;
        let now = self.clock.now();
        let date = now.date();
        let time = format!("{:02}:{:02}", now.time().hour(), now.time().minute());
        let name = day_file_name(date);
        let path = self.history_dir.join(&name);
        let body = match history::scope_tag(scope) {
            Some(tag) => format!("{tag}\n{}", escape_entry_text(&text)),
            None => escape_entry_text(&text),
        };
        let entry = format_entry(&time, &body);
        let io = |operation: &'static str| {
            let path = path.clone();
            move |source| MemoryError::Io { operation, path, source }
        };
        let mut file = OpenOptions::new().create(true).read(true).append(true).open(&path).map_err(io("opening"))?;
        file.lock().map_err(io("locking"))?;
        // Under the lock: where the entry starts, one buffer in one
        // write_all, and the file's stamp before and after. No other Cairn
        // writer can interleave its bytes with this entry.
        let written = (|| {
            let before = file_stamp(&file)?;
            let mut existing = Vec::new();
            std::io::Read::read_to_end(&mut file, &mut existing)?;
            let header_line = existing.iter().filter(|byte| **byte == b'\n').count() + 2;
            file.write_all(entry.as_bytes())?;
            file.flush()?;
            Ok::<_, std::io::Error>((header_line, before, file_stamp(&file)?))
        })();
        let unlocked = file.unlock();
        let (header_line, before, after) = written.map_err(io("appending to"))?;
        unlocked.map_err(io("unlocking"))?;
        drop(file);
        self.invalidate_history_cache();
        let relative = format!("{HISTORY_DIR}/{name}");
        let chunk = entry.trim();
        let indexed = self.index.add_entry(&relative, &date.to_string(), &time, header_line, chunk, before, after);
        if let Err(error) = indexed {
            tracing::warn!(file = %relative, %error, "keyword index not updated; the next rebuild picks the entry up");
        }
        tracing::debug!(file = %relative, %time, "history entry appended");
        Ok(HistoryAppend { file: relative, date: date.to_string(), time })
    }

    /// The exact text of a top-level file (`preferences.md`,
    /// `projects.md`), `None` when it does not exist: what a revert puts back.
    pub(crate) fn top_level_raw(&self, name: &str) -> Result<Option<String>> {
        let path = self.memory_dir.join(name);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(MemoryError::Io { operation: "reading", path, source }),
        }
    }

    /// Puts a top-level file back exactly as `text` (temp file + rename),
    /// or removes it for `None`.
    pub(crate) fn restore_top_level(&self, name: &str, text: Option<&str>) -> Result<()> {
        let path = self.memory_dir.join(name);
        match text {
            None => match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(MemoryError::Io { operation: "removing", path, source }),
            },
            Some(text) => self.write_top_level(name, text)?,
        }
        self.index_after_write(name);
        Ok(())
    }

    /// Today's day file, relative to the memory directory (where the next
    /// [`append_history`](Self::append_history) goes).
    pub(crate) fn today_history_file(&self) -> String {
        format!("{HISTORY_DIR}/{}", day_file_name(self.clock.now().date()))
    }

    /// The length in bytes of a day file (`history/<date>.md`), `None`
    /// when it does not exist.
    pub(crate) fn history_len(&self, relative: &str) -> Result<Option<u64>> {
        let path = self.memory_dir.join(relative);
        match std::fs::metadata(&path) {
            Ok(meta) => Ok(Some(meta.len())),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(MemoryError::Io { operation: "reading", path, source }),
        }
    }

    /// Cuts a day file back to `len` bytes (removes it for `None`) under
    /// the lock appends take, when it is still `expected` bytes long;
    /// answers whether it was.
    pub(crate) fn truncate_history(&self, relative: &str, expected: u64, len: Option<u64>) -> Result<bool> {
        let path = self.memory_dir.join(relative);
        let io = |operation: &'static str| {
            let path = path.clone();
            move |source| MemoryError::Io { operation, path, source }
        };
        let file = OpenOptions::new().read(true).write(true).open(&path).map_err(io("opening"))?;
        file.lock().map_err(io("locking"))?;
        let cut = (|| {
            if file.metadata()?.len() != expected {
                return Ok(false);
            }
            match len {
                Some(len) => file.set_len(len)?,
                None => std::fs::remove_file(&path)?,
            }
            file.sync_all()?;
            Ok::<_, std::io::Error>(true)
        })();
        let unlocked = file.unlock();
        let cut = cut.map_err(io("reverting"))?;
        unlocked.map_err(io("unlocking"))?;
        if cut {
            self.invalidate_history_cache();
            self.index_after_write(relative);
        }
        Ok(cut)
    }

    /// Keeps the index in step with a write; a failure is logged, never
    /// returned, because the file write itself succeeded and the next
    /// rebuild catches up.
    fn index_after_write(&self, relative: &str) {
        if let Err(error) = self.index.update_file(relative) {
            tracing::warn!(file = relative, %error, "keyword index not updated; the next rebuild picks the write up");
        }
    }

    /// Forgets the daily-history entries that contain `query` (case and
    /// spacing ignored) and were written in `[from, until)` (Unix
    /// milliseconds, local entry times); every entry when both are open
    /// and there is no query is refused by the caller, not here. Each day
    /// file is rewritten in place under the same lock appends take, so no
    /// appended entry is lost. Answers `(date, scope, entry text)` of each entry,
    /// and changes nothing with `dry_run`.
    pub fn forget_history(
        &self,
        query: Option<&str>,
        from: Option<i64>,
        until: Option<i64>,
        scopes: &ScopeFilter,
        dry_run: bool,
    ) -> Result<Vec<(String, String, String)>> {
        let normalise = |text: &str| {
            text.split(|c: char| !c.is_alphanumeric())
                .filter(|word| !word.is_empty())
                .map(str::to_lowercase)
                .collect::<Vec<_>>()
                .join(" ")
        };
        let query = query.map(normalise).filter(|query| !query.is_empty());
        let zone = self.clock.now().time_zone().clone();
        let mut forgotten = Vec::new();
        for date in self.history_days()? {
            let name = day_file_name(date);
            let path = self.history_dir.join(&name);
            let io = |operation: &'static str| {
                let path = path.clone();
                move |source| MemoryError::Io { operation, path, source }
            };
            let mut file = OpenOptions::new().read(true).write(true).open(&path).map_err(io("opening"))?;
            file.lock().map_err(io("locking"))?;
            let rewritten = (|| {
                let mut content = String::new();
                std::io::Read::read_to_string(&mut file, &mut content)?;
                let mut kept = String::with_capacity(content.len());
                let mut dropped = Vec::new();
                let mut last = 0usize;
                for entry in history::split_entries(&content) {
                    let at = entry.time().and_then(|time| {
                        let (hour, minute) = time.split_once(':')?;
                        let time = jiff::civil::time(hour.parse().ok()?, minute.parse().ok()?, 0, 0);
                        date.to_datetime(time)
                            .to_zoned_datetime(zone.clone())
                            .ok()
                            .map(|zoned| zoned.timestamp().as_millisecond())
                    });
                    let in_range = match at {
                        Some(at) => from.is_none_or(|from| at >= from) && until.is_none_or(|until| at < until),
                        None => from.is_none() && until.is_none(),
                    };
                    let (scope, shown) = history::entry_scope(entry.text);
                    let matches = query.as_ref().is_none_or(|query| normalise(&shown).contains(query.as_str()));
                    if in_range && matches && scopes.admits(scope) {
                        let start = content[last..].find(entry.text).map_or(last, |offset| last + offset);
                        let end = start + entry.text.len();
                        kept.push_str(&content[last..start]);
                        last = end;
                        dropped.push((scope.to_owned(), shown));
                    }
                }
                kept.push_str(&content[last..]);
                if !dropped.is_empty() && !dry_run {
                    std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(0))?;
                    file.set_len(0)?;
                    file.write_all(kept.as_bytes())?;
                    file.sync_all()?;
                }
                Ok::<_, std::io::Error>(dropped)
            })();
            let unlocked = file.unlock();
            let dropped = rewritten.map_err(io("rewriting"))?;
            unlocked.map_err(io("unlocking"))?;
            if !dropped.is_empty() && !dry_run {
                self.invalidate_history_cache();
                self.index_after_write(&format!("{HISTORY_DIR}/{name}"));
            }
            forgotten.extend(dropped.into_iter().map(|(scope, text)| (date.to_string(), scope, text)));
        }
        Ok(forgotten)
    }

    /// Dates of every day file, oldest first.
    pub fn history_days(&self) -> Result<Vec<Date>> {
        let entries = std::fs::read_dir(&self.history_dir).map_err(|source| MemoryError::Io {
            operation: "listing",
            path: self.history_dir.clone(),
            source,
        })?;
        let mut days: Vec<Date> =
            entries.flatten().filter_map(|entry| entry.file_name().to_str().and_then(parse_day_file_name)).collect();
        days.sort();
        Ok(days)
    }

    /// The history window rendered with decaying detail: for `days` = 14,
    /// days 0–13 in full with timestamps, 14–60 the day header, first entry
    /// and `…N more entries`, 61–180 the date and entry count only; older
    /// days are not read. Newest day first.
    ///
    /// Cached for 5 s keyed on `(days, today)`, so the window moves at
    /// midnight even inside the 5 s; [`append_history`](Self::append_history)
    /// and [`prune_history`](Self::prune_history) invalidate the cache.
    pub fn recent_history(&self, days: u32) -> Result<Arc<RecentHistory>> {
        self.recent_history_in(days, &ScopeFilter::All)
    }

    /// [`recent_history`](Self::recent_history) of the entries `scopes`
    /// admits (an entry written for a project's session names it).
    pub fn recent_history_in(&self, days: u32, scopes: &ScopeFilter) -> Result<Arc<RecentHistory>> {
        let now = self.clock.now();
        let today = now.date();
        let now_ts = now.timestamp();
        {
            let cache = self.cache.lock();
            if let Some(cached) = cache.as_ref()
                && cached.days == days
                && cached.scopes == *scopes
                && cached.today == today
                && now_ts.duration_since(cached.rendered_at) < SignedDuration::from_millis(HISTORY_CACHE_TTL_MS)
                && now_ts >= cached.rendered_at
            {
                return Ok(cached.value.clone());
            }
        }
        let value = Arc::new(self.render_history(days, today, scopes)?);
        *self.cache.lock() =
            Some(CachedHistory { days, scopes: scopes.clone(), today, rendered_at: now_ts, value: value.clone() });
        Ok(value)
    }

    /// Drops the cached history rendering.
    pub fn invalidate_history_cache(&self) {
        *self.cache.lock() = None;
    }

    fn render_history(&self, days: u32, today: Date, scopes: &ScopeFilter) -> Result<RecentHistory> {
        let _span = tracing::debug_span!("memory_files_render_history", days).entered();
        let mut text = String::new();
        let mut contributed = Vec::new();
        let mut date = today;
        for age in 0..HISTORY_WINDOW_DAYS {
            if age > 0 {
                date = date.yesterday().map_err(|source| MemoryError::Date { operation: "walking back", source })?;
            }
            let Some(tier) = tier_for_age(age, days) else { break };
            let path = self.history_dir.join(day_file_name(date));
            let content = match std::fs::read(&path) {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => return Err(MemoryError::Io { operation: "reading", path, source }),
            };
            if render_day(&mut text, date, &content, tier, scopes) {
                contributed.push(date);
            }
        }
        Ok(RecentHistory { text, today, days: contributed })
    }

    /// Deletes day files older than `keep_days` days before the clock's
    /// today. Only `YYYY-MM-DD.md` names are considered; anything else in
    /// the history directory is left alone.
    pub fn prune_history(&self, keep_days: u32) -> Result<PruneReport> {
        let _span = tracing::debug_span!("memory_files_prune", keep_days).entered();
        let today = self.clock.now().date();
        let cutoff = today
            .checked_sub(i64::from(keep_days).days())
            .map_err(|source| MemoryError::Date { operation: "computing the prune cutoff", source })?;
        let mut report = PruneReport::default();
        let mut removed = Vec::new();
        for date in self.history_days()? {
            if date >= cutoff {
                report.kept += 1;
                continue;
            }
            let path = self.history_dir.join(day_file_name(date));
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(MemoryError::Io { operation: "deleting", path, source }),
            }
            removed.push(format!("{HISTORY_DIR}/{}", day_file_name(date)));
            report.deleted.push(date.to_string());
        }
        self.invalidate_history_cache();
        if let Err(error) = self.index.remove_files(&removed) {
            tracing::warn!(%error, "keyword index not updated after pruning; the next rebuild catches up");
        }
        tracing::debug!(deleted = report.deleted.len(), kept = report.kept, "history pruned");
        Ok(report)
    }

    /// Preferences, projects and the decayed history, each screened
    /// (credentials and exfiltration links redacted, paragraphs the
    /// injection screen flags withheld), cut to its cap and cited with its
    /// source file and days. Empty files give no section.
    pub fn get_context(&self, caps: &FilesContextCaps) -> Result<FilesContext> {
        self.get_context_in(caps, &ScopeFilter::All)
    }

    /// [`get_context`](Self::get_context) with the history entries `scopes` admits.
    pub fn get_context_in(&self, caps: &FilesContextCaps, scopes: &ScopeFilter) -> Result<FilesContext> {
        let _span = tracing::debug_span!("memory_files_context").entered();
        let top_level = |name: &str, title: &'static str, text: String, cap: usize| {
            let text = text.trim();
            (!text.is_empty()).then(|| section(title, format!("{MEMORY_DIR}/{name}"), text, cap))
        };
        let preferences = top_level(PREFERENCES_FILE, "Preferences", self.preferences()?, caps.preferences);
        let projects = top_level(PROJECTS_FILE, "Projects", self.projects()?, caps.projects);
        let recent = self.recent_history_in(caps.history_days, scopes)?;
        let history = (!recent.text.is_empty()).then(|| {
            let mut source = format!("{MEMORY_DIR}/{HISTORY_DIR}/");
            match (recent.days.last(), recent.days.first()) {
                (Some(oldest), Some(newest)) if oldest != newest => {
                    let _ = write!(source, " {oldest} to {newest}, {} day files", recent.days.len());
                }
                (Some(day), _) => {
                    let _ = write!(source, " {day}");
                }
                _ => {}
            }
            section("Recent history", source, &recent.text, caps.history)
        });
        Ok(FilesContext { preferences, projects, history })
    }

    /// Keyword search over the files: bm25-ranked snippets with file, date
    /// and line. The query is reduced to plain terms (never FTS5 syntax) and
    /// matched with porter stemming; a damaged index is rebuilt on the way.
    pub fn search_files(&self, query: &str, limit: usize) -> Result<Vec<FileHit>> {
        let _span = tracing::debug_span!("memory_files_search", limit).entered();
        let (hits, healed) = self.index.search(query, limit)?;
        if healed {
            tracing::debug!("keyword index was rebuilt before searching");
        }
        Ok(hits)
    }

    /// Rebuilds the keyword index from every file (what the heartbeat runs).
    pub fn rebuild_index(&self) -> Result<IndexReport> {
        self.index.rebuild(true)
    }

    /// Brings the index up to date with files changed outside Cairn: only
    /// files whose size or modification time differ are re-read, and rows
    /// of deleted files are dropped.
    pub fn refresh_index(&self) -> Result<IndexReport> {
        self.index.rebuild(false)
    }
}

fn file_stamp(file: &std::fs::File) -> std::io::Result<(i64, i64)> {
    let metadata = file.metadata()?;
    let modified = metadata.modified()?.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Ok((modified.as_nanos() as i64, metadata.len() as i64))
}

/// Checks text Cairn is about to store in a Markdown file: refuses injected
/// instructions, redacts credentials and exfiltration links, and removes
/// control characters other than line breaks and tabs (an ESC or BEL kept
/// in a file would reach a terminal through `cairn memory files show`).
/// Every writer of `MemoryFiles` goes through here.
fn screen_for_storage(text: &str, allow_empty: bool) -> Result<String> {
    let unmarked = cairn_guard::strip_private(text);
    let trimmed = unmarked.trim();
    if trimmed.is_empty() && !allow_empty {
        return Err(Rejected::EmptyEntry.into());
    }
    if let Some(finding) = cairn_guard::screen(trimmed) {
        return Err(Rejected::Injection { rule: finding.rule }.into());
    }
    Ok(stored_markdown(trimmed).trim().to_owned())
}

/// What `preferences.md` or `projects.md` holds after a replacement with
/// `text`: screened, scrubbed, one final line break.
pub(crate) fn top_level_body(text: &str) -> Result<String> {
    let mut body = screen_for_storage(text, true)?.trim_end().to_owned();
    body.push('\n');
    Ok(body)
}

/// Markdown memory text as it is stored (also by a restore): credentials
/// and exfiltration links redacted, control characters other than line
/// breaks and tabs removed.
pub(crate) fn stored_markdown(text: &str) -> std::borrow::Cow<'_, str> {
    match crate::validate::scrub_text(text) {
        Some(scrubbed) => std::borrow::Cow::Owned(scrubbed),
        None => std::borrow::Cow::Borrowed(text),
    }
}

/// Screens and caps one context section.
fn section(title: &'static str, source: String, text: &str, cap: usize) -> ContextSection {
    let mut screened = String::with_capacity(text.len().min(cap + 64));
    for (index, paragraph) in text.split("\n\n").enumerate() {
        if index > 0 {
            screened.push_str("\n\n");
        }
        match cairn_guard::screen(paragraph) {
            Some(finding) => {
                tracing::warn!(
                    section = title,
                    rule = finding.rule,
                    "withheld a paragraph the injection screen flagged"
                );
                let _ = write!(screened, "[withheld: flagged by the injection screen ({})]", finding.rule);
            }
            None => screened.push_str(&cairn_guard::redact_all(paragraph)),
        }
    }
    let (body, truncated) = truncate(&screened, cap);
    ContextSection { title, source, body, truncated }
}

/// Cuts `text` to at most `cap` characters, at a line boundary when one is
/// near, ending with the truncation marker.
fn truncate(text: &str, cap: usize) -> (String, bool) {
    if text.chars().count() <= cap {
        return (text.to_owned(), false);
    }
    let marker_chars = TRUNCATION_MARKER.chars().count() + 1;
    let keep = cap.saturating_sub(marker_chars);
    let end = text.char_indices().nth(keep).map(|(byte, _)| byte).unwrap_or(text.len());
    let mut cut = &text[..end];
    if let Some(newline) = cut.rfind('\n')
        && newline >= cut.len() / 2
    {
        cut = &cut[..newline];
    }
    if cap < marker_chars {
        return (text.chars().take(cap).collect(), true);
    }
    (format!("{}\n{TRUNCATION_MARKER}", cut.trim_end()), true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_respects_the_cap_and_marks_the_cut() {
        let text = "line one\nline two\nline three\n".repeat(20);
        for cap in [0, 5, 40, 100, 300] {
            let (body, truncated) = truncate(&text, cap);
            assert!(truncated);
            assert!(body.chars().count() <= cap, "cap {cap}: {} chars", body.chars().count());
            if cap >= 40 {
                assert!(body.ends_with(TRUNCATION_MARKER));
            }
        }
        assert_eq!(truncate("short", 10), ("short".to_owned(), false));
        let (multibyte, _) = truncate(&"äöü ".repeat(50), 30);
        assert!(multibyte.chars().count() <= 30);
    }
}
