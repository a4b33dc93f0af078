//! Where each source keeps its files and what each file's entries land as.
//! Discovery reads only through [`super::read`]; every decision is a rule
//! of [`super::parse`].

use std::path::Path;

use super::parse::{self, Block};
use super::read::{self, EntryKind, Refusal};
use super::{ForeignRoots, ForeignSource, ImportDiagnostic, Landing, RawItem};
use crate::constants::{EPISODIC_MAX_CHARS, MAX_FOREIGN_DIR_ENTRIES, MAX_HERMES_PROFILES};
use crate::files::parse_day_file_name;

/// Collects the items and diagnostics of one scan.
#[derive(Default)]
pub(crate) struct Collector {
    pub(crate) items: Vec<RawItem>,
    pub(crate) diagnostics: Vec<ImportDiagnostic>,
    pub(crate) files_read: usize,
}

impl Collector {
    /// Records a finding once: a symlinked directory above several files
    /// is one diagnostic, not one per file.
    fn diagnose(&mut self, source: ForeignSource, path: &Path, code: &str, message: impl Into<String>) {
        let diagnostic = ImportDiagnostic {
            source,
            path: path.display().to_string(),
            code: code.to_owned(),
            message: message.into(),
        };
        if !self.diagnostics.contains(&diagnostic) {
            self.diagnostics.push(diagnostic);
        }
    }

    fn item(&mut self, source: ForeignSource, path: &Path, locator: String, landing: Landing) {
        self.items.push(RawItem { source, path: path.display().to_string(), locator, landing, unsupported: None });
    }

    fn unsupported(&mut self, source: ForeignSource, path: &Path, locator: String, code: &str, message: &str) {
        self.items.push(RawItem {
            source,
            path: path.display().to_string(),
            locator,
            landing: Landing::None,
            unsupported: Some((code.to_owned(), message.to_owned())),
        });
    }

    /// Reads a file below `root` that may be absent: `None` (and nothing
    /// reported) when it does not exist, a diagnostic when it cannot be
    /// read or a directory between it and `root` is a symlink.
    fn read_optional(&mut self, source: ForeignSource, root: &Path, path: &Path) -> Option<String> {
        match read::kind_of(root, path) {
            Ok(None) => return None,
            Ok(Some(_)) => {}
            Err(refusal) => {
                self.refused(source, path, &refusal);
                return None;
            }
        }
        self.read_present(source, root, path)
    }

    fn read_present(&mut self, source: ForeignSource, root: &Path, path: &Path) -> Option<String> {
        match read::read_text(root, path) {
            Ok(text) => {
                self.files_read += 1;
                Some(text)
            }
            Err(refusal) => {
                self.refused(source, path, &refusal);
                None
            }
        }
    }

    /// Reports a refusal; a symlinked directory is reported at the link.
    fn refused(&mut self, source: ForeignSource, path: &Path, refusal: &Refusal) {
        let path = match refusal {
            Refusal::SymlinkedDirectory(link) => link.as_path(),
            _ => path,
        };
        self.diagnose(source, path, refusal.code(), refusal.message());
    }

    /// Lists a directory below `root` that may be absent; a symlinked or
    /// unreadable directory (or one under a symlinked directory) is a
    /// diagnostic. Returns at most `limit` entries and reports an overflow.
    fn list(
        &mut self,
        source: ForeignSource,
        root: &Path,
        dir: &Path,
        limit: usize,
        overflow_code: &str,
    ) -> Vec<read::Entry> {
        match read::kind_of(root, dir) {
            Ok(None) => return Vec::new(),
            Ok(Some(EntryKind::Dir)) => {}
            Ok(Some(EntryKind::Symlink)) => {
                self.refused(source, dir, &Refusal::Symlink);
                return Vec::new();
            }
            Ok(Some(_)) => {
                self.diagnose(source, dir, "not_a_directory", "expected a directory");
                return Vec::new();
            }
            Err(refusal) => {
                self.refused(source, dir, &refusal);
                return Vec::new();
            }
        }
        match read::list_dir(dir, limit + 1) {
            Ok(mut entries) => {
                if entries.len() > limit {
                    entries.truncate(limit);
                    self.diagnose(
                        source,
                        dir,
                        overflow_code,
                        format!("more than {limit} entries; only {limit} were scanned"),
                    );
                }
                entries
            }
            Err(error) => {
                self.diagnose(source, dir, "read_failed", error.to_string());
                Vec::new()
            }
        }
    }
}

/// Each directive paragraph or list item of an instruction document as a
/// lesson; `note` is appended to every rule (a rules file's `paths:`).
fn instruction_lessons(collector: &mut Collector, source: ForeignSource, path: &Path, body: &str, note: &str) {
    for (index, block) in parse::blocks(body).into_iter().enumerate() {
        let text = match block {
            Block::Paragraph(text) | Block::Bullet(text) => text,
            Block::Heading(_) | Block::Code => continue,
        };
        let locator = format!("block {}", index + 1);
        if parse::only_imports(&text) {
            collector.unsupported(
                source,
                path,
                locator,
                "file_reference",
                "an `@path` include; referenced files are not followed",
            );
            continue;
        }
        let rule = parse::one_line(&text);
        let rule = if note.is_empty() { rule } else { format!("{rule} {note}") };
        collector.item(source, path, locator, Landing::Lesson { rule });
    }
}

/// An instruction file (`CLAUDE.md`, `AGENTS.md`, a rules file).
fn instruction_file(collector: &mut Collector, source: ForeignSource, path: &Path, text: &str) {
    let (frontmatter, body) = parse::split_frontmatter(text);
    let note = match frontmatter {
        None => String::new(),
        Some(Ok(frontmatter)) => {
            let paths = parse::frontmatter_paths(&frontmatter);
            if paths.is_empty() { String::new() } else { format!("(applies to paths: {})", paths.join(", ")) }
        }
        Some(Err(error)) => {
            collector.diagnose(source, path, "invalid_frontmatter", error);
            return;
        }
    };
    instruction_lessons(collector, source, path, body, &note);
}

fn episodes(collector: &mut Collector, source: ForeignSource, path: &Path, body: &str) {
    for (index, chunk) in parse::chunk_paragraphs(body, EPISODIC_MAX_CHARS).into_iter().enumerate() {
        collector.item(source, path, format!("part {}", index + 1), Landing::Episode { text: chunk, created_at: None });
    }
}

/// A user-profile entry: a clear `label: value` is a `user.*` fact, a
/// preference a lesson, anything else an episodic row.
fn user_entry(collector: &mut Collector, source: ForeignSource, path: &Path, locator: String, text: &str) {
    if let Some((key, value)) = parse::key_value(text) {
        collector.item(source, path, locator, Landing::Fact { key, value });
    } else if parse::reads_as_preference(text) {
        collector.item(source, path, locator, Landing::Lesson { rule: parse::one_line(&parse::plain(text)) });
    } else {
        collector.item(source, path, locator, Landing::Episode { text: text.to_owned(), created_at: None });
    }
}

/// Entries of a Markdown memory file: `§` entries when the file uses them,
/// its paragraphs and list items otherwise.
fn memory_entries(text: &str) -> Vec<String> {
    if parse::has_section_marks(text) {
        return parse::section_entries(text);
    }
    parse::blocks(text)
        .into_iter()
        .filter_map(|block| match block {
            Block::Paragraph(text) | Block::Bullet(text) => Some(text),
            Block::Heading(_) | Block::Code => None,
        })
        .collect()
}

/// Claude Code: `~/.claude/CLAUDE.md`, `~/.claude/rules/*.md`, the auto
/// memory under `~/.claude/projects/<project>/memory/`, and each project's
/// `CLAUDE.md`, `CLAUDE.local.md`, `.claude/CLAUDE.md`, `AGENTS.md` and
/// `.claude/rules/*.md`.
pub(crate) fn claude_code(collector: &mut Collector, roots: &ForeignRoots) {
    let source = ForeignSource::ClaudeCode;
    if let Some(home) = &roots.claude_home {
        let path = home.join("CLAUDE.md");
        if let Some(text) = collector.read_optional(source, home, &path) {
            instruction_file(collector, source, &path, &text);
        }
        rules_dir(collector, home, &home.join("rules"));
        auto_memory(collector, home, &home.join("projects"));
        skills_dir(collector, source, home, &home.join("skills"));
    }
    for project in &roots.projects {
        for relative in ["CLAUDE.md", "CLAUDE.local.md", ".claude/CLAUDE.md", "AGENTS.md"] {
            let path = project.join(relative);
            if let Some(text) = collector.read_optional(source, project, &path) {
                instruction_file(collector, source, &path, &text);
            }
        }
        rules_dir(collector, project, &project.join(".claude").join("rules"));
        skills_dir(collector, source, project, &project.join(".claude").join("skills"));
    }
}

/// Skill folders (`<dir>/<name>/SKILL.md`): each `SKILL.md` is offered as
/// the skill `imported/<source>/<name>`. Only the `SKILL.md` is read;
/// other files of the folder (scripts, assets) are reported, never copied.
pub(crate) fn skills_dir(collector: &mut Collector, source: ForeignSource, root: &Path, dir: &Path) {
    for entry in collector.list(source, root, dir, MAX_FOREIGN_DIR_ENTRIES, "too_many_entries") {
        match entry.kind {
            EntryKind::Dir => {}
            EntryKind::Symlink => {
                collector.refused(source, &entry.path, &Refusal::Symlink);
                continue;
            }
            _ => continue,
        }
        let valid = entry.name.len() <= 64
            && entry.name.starts_with(|c: char| c.is_ascii_alphanumeric())
            && entry.name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
        if !valid {
            collector.diagnose(
                source,
                &entry.path,
                "skill_name",
                "a skill folder's name must be 1-64 of a-z 0-9 - _; the folder was not read",
            );
            continue;
        }
        let file = entry.path.join("SKILL.md");
        let Some(text) = collector.read_optional(source, root, &file) else { continue };
        let extras: Vec<String> = collector
            .list(source, root, &entry.path, MAX_FOREIGN_DIR_ENTRIES, "too_many_entries")
            .into_iter()
            .filter(|inner| inner.name != "SKILL.md")
            .map(|inner| inner.name)
            .collect();
        if !extras.is_empty() {
            collector.diagnose(
                source,
                &entry.path,
                "skill_files_not_imported",
                format!("only SKILL.md is imported; not copied: {}", extras.join(", ")),
            );
        }
        let name = format!("imported/{}/{}", source.as_str(), entry.name.replace('_', "-"));
        collector.item(source, &file, "skill".to_owned(), Landing::Skill { name, text });
    }
}

fn rules_dir(collector: &mut Collector, root: &Path, dir: &Path) {
    let source = ForeignSource::ClaudeCode;
    for entry in collector.list(source, root, dir, MAX_FOREIGN_DIR_ENTRIES, "too_many_entries") {
        if !entry.name.ends_with(".md") {
            continue;
        }
        if let Some(text) = collector.read_file_entry(source, root, &entry) {
            instruction_file(collector, source, &entry.path, &text);
        }
    }
}

impl Collector {
    /// Reads a listed entry: symlinks and special files (a FIFO, a socket,
    /// a device) are reported; a directory is skipped.
    fn read_file_entry(&mut self, source: ForeignSource, root: &Path, entry: &read::Entry) -> Option<String> {
        match entry.kind {
            EntryKind::File => self.read_present(source, root, &entry.path),
            EntryKind::Symlink => {
                self.refused(source, &entry.path, &Refusal::Symlink);
                None
            }
            EntryKind::Other => {
                self.refused(source, &entry.path, &Refusal::NotRegular);
                None
            }
            EntryKind::Dir => None,
        }
    }
}

fn auto_memory(collector: &mut Collector, root: &Path, projects: &Path) {
    let source = ForeignSource::ClaudeCode;
    for project in collector.list(source, root, projects, MAX_FOREIGN_DIR_ENTRIES, "too_many_entries") {
        match project.kind {
            EntryKind::Dir => {}
            EntryKind::Symlink => {
                collector.refused(source, &project.path, &Refusal::Symlink);
                continue;
            }
            _ => continue,
        }
        let mut transcripts = 0usize;
        for entry in collector.list(source, root, &project.path, MAX_FOREIGN_DIR_ENTRIES, "too_many_entries") {
            if entry.name.ends_with(".jsonl") {
                transcripts += 1;
            }
        }
        if transcripts > 0 {
            collector.diagnose(
                source,
                &project.path,
                "transcripts_not_imported",
                format!("{transcripts} session transcript(s) (*.jsonl) were not read: transcripts never become memory"),
            );
        }
        let memory_dir = project.path.join("memory");
        for entry in collector.list(source, root, &memory_dir, MAX_FOREIGN_DIR_ENTRIES, "too_many_entries") {
            if !entry.name.ends_with(".md") {
                continue;
            }
            let Some(text) = collector.read_file_entry(source, root, &entry) else { continue };
            if entry.name == "MEMORY.md" {
                memory_index(collector, &entry.path, &text);
            } else {
                topic_file(collector, &entry.path, &text);
            }
        }
    }
}

/// `MEMORY.md` of the auto memory: lines pointing at topic files are the
/// index (the topic files are read themselves); other entries are episodic.
fn memory_index(collector: &mut Collector, path: &Path, text: &str) {
    let source = ForeignSource::ClaudeCode;
    for (index, block) in parse::blocks(text).into_iter().enumerate() {
        let text = match block {
            Block::Paragraph(text) | Block::Bullet(text) => text,
            Block::Heading(_) | Block::Code => continue,
        };
        if parse::is_index_pointer(&text) {
            continue;
        }
        collector.item(source, path, format!("block {}", index + 1), Landing::Episode { text, created_at: None });
    }
}

/// A topic file of the auto memory, by its frontmatter `type`.
fn topic_file(collector: &mut Collector, path: &Path, text: &str) {
    let source = ForeignSource::ClaudeCode;
    let (frontmatter, body) = parse::split_frontmatter(text);
    let frontmatter = match frontmatter {
        Some(Ok(frontmatter)) => frontmatter,
        Some(Err(error)) => {
            collector.diagnose(source, path, "invalid_frontmatter", error);
            return;
        }
        None => serde_json::Value::Null,
    };
    let kind = parse::frontmatter_str(&frontmatter, "type").unwrap_or("");
    let body = body.trim();
    match kind {
        "feedback" => {
            let first = parse::blocks(body).into_iter().find_map(|block| match block {
                Block::Paragraph(text) | Block::Bullet(text) => Some(text),
                _ => None,
            });
            let rule = first.or_else(|| parse::frontmatter_str(&frontmatter, "description").map(str::to_owned));
            match rule {
                Some(rule) => collector.item(
                    source,
                    path,
                    "feedback".to_owned(),
                    Landing::Lesson { rule: parse::one_line(&parse::plain(&rule)) },
                ),
                None => collector.unsupported(source, path, "feedback".to_owned(), "empty", "the file has no text"),
            }
        }
        "user" => match parse::key_value(body) {
            Some((key, value)) => collector.item(source, path, "user".to_owned(), Landing::Fact { key, value }),
            None => episodes(collector, source, path, body),
        },
        "project" | "reference" => episodes(collector, source, path, body),
        other => {
            let message = if other.is_empty() {
                "no frontmatter `type` (user, feedback, project or reference)".to_owned()
            } else {
                format!("frontmatter type {other:?} is not user, feedback, project or reference")
            };
            collector.unsupported(source, path, "file".to_owned(), "unknown_type", &message);
        }
    }
}

/// Hermes: `memories/MEMORY.md` and `memories/USER.md` of the home and of
/// each profile (at most 50 profiles; 51 entries are read to see an
/// overflow). A `memory_store.db` is reported as unsupported, never opened.
pub(crate) fn hermes(collector: &mut Collector, roots: &ForeignRoots) {
    let source = ForeignSource::Hermes;
    let Some(home) = &roots.hermes_home else { return };
    hermes_home(collector, home, home);
    skills_dir(collector, source, home, &home.join("skills"));
    let profiles = home.join("profiles");
    match read::kind_of(home, &profiles) {
        Ok(None) => return,
        Ok(Some(EntryKind::Dir)) => {}
        Ok(Some(EntryKind::Symlink)) => {
            collector.refused(source, &profiles, &Refusal::Symlink);
            return;
        }
        Ok(Some(_)) => {
            collector.diagnose(source, &profiles, "profiles/read_failed", "`profiles` is not a directory");
            return;
        }
        Err(Refusal::Unreadable(error)) => {
            collector.diagnose(source, &profiles, "profiles/read_failed", error);
            return;
        }
        Err(refusal) => {
            collector.refused(source, &profiles, &refusal);
            return;
        }
    }
    let entries = match read::list_dir(&profiles, MAX_HERMES_PROFILES + 1) {
        Ok(entries) => entries,
        Err(error) => {
            collector.diagnose(source, &profiles, "profiles/read_failed", error.to_string());
            return;
        }
    };
    let mut entries = entries;
    if entries.len() > MAX_HERMES_PROFILES {
        entries.truncate(MAX_HERMES_PROFILES);
        collector.diagnose(
            source,
            &profiles,
            "profiles/profile_count_limit",
            format!("more than {MAX_HERMES_PROFILES} profiles; only {MAX_HERMES_PROFILES} were scanned"),
        );
    }
    for entry in entries {
        match entry.kind {
            EntryKind::Dir => hermes_home(collector, home, &entry.path),
            EntryKind::Symlink => collector.refused(source, &entry.path, &Refusal::Symlink),
            _ => {}
        }
    }
}

/// One Hermes home: the root itself or one of its profiles (`home` below `root`).
fn hermes_home(collector: &mut Collector, root: &Path, home: &Path) {
    let source = ForeignSource::Hermes;
    let store = home.join("memory_store.db");
    if let Ok(Some(_)) = read::kind_of(root, &store) {
        collector.diagnose(
            source,
            &store,
            "unsupported_store",
            "Hermes's memory_store.db is not a supported source; it was not opened",
        );
    }
    let memories = home.join("memories");
    match read::kind_of(root, &memories) {
        Ok(Some(EntryKind::Dir)) => {}
        Ok(Some(EntryKind::Symlink)) => {
            collector.refused(source, &memories, &Refusal::Symlink);
            return;
        }
        Err(refusal @ Refusal::SymlinkedDirectory(_)) => {
            collector.refused(source, &memories, &refusal);
            return;
        }
        _ => return,
    }
    let path = memories.join("MEMORY.md");
    if let Some(text) = collector.read_optional(source, root, &path) {
        for (index, entry) in parse::section_entries(&text).into_iter().enumerate() {
            collector.item(
                source,
                &path,
                format!("entry {}", index + 1),
                Landing::Episode { text: entry, created_at: None },
            );
        }
    }
    let path = memories.join("USER.md");
    if let Some(text) = collector.read_optional(source, root, &path) {
        for (index, entry) in parse::section_entries(&text).into_iter().enumerate() {
            user_entry(collector, source, &path, format!("entry {}", index + 1), &entry);
        }
    }
}

/// OpenClaw: a workspace's `MEMORY.md`, `USER.md`, `memory/YYYY-MM-DD.md`
/// daily logs and the directives of `SOUL.md`. `AGENTS.md`, `TOOLS.md`,
/// `HEARTBEAT.md`, `BOOTSTRAP.md` (the agent's own prompt and runtime
/// notes) and `IDENTITY.md` (a persona) are reported, never imported.
pub(crate) fn openclaw(collector: &mut Collector, roots: &ForeignRoots) {
    let source = ForeignSource::Openclaw;
    let Some(workspace) = &roots.openclaw_workspace else { return };
    let path = workspace.join("MEMORY.md");
    if let Some(text) = collector.read_optional(source, workspace, &path) {
        for (index, entry) in memory_entries(&text).into_iter().enumerate() {
            collector.item(
                source,
                &path,
                format!("entry {}", index + 1),
                Landing::Episode { text: entry, created_at: None },
            );
        }
    }
    let path = workspace.join("USER.md");
    if let Some(text) = collector.read_optional(source, workspace, &path) {
        for (index, entry) in memory_entries(&text).into_iter().enumerate() {
            user_entry(collector, source, &path, format!("entry {}", index + 1), &entry);
        }
    }
    let path = workspace.join("SOUL.md");
    if let Some(text) = collector.read_optional(source, workspace, &path) {
        soul(collector, &path, &text);
    }
    for (name, code, message) in [
        ("AGENTS.md", "system_prompt", "the agent's operating prompt; a foreign system prompt never becomes memory"),
        ("TOOLS.md", "runtime_record", "tool and environment notes of the agent's runtime"),
        ("HEARTBEAT.md", "runtime_record", "the agent's scheduled-check list"),
        ("BOOTSTRAP.md", "system_prompt", "the agent's first-run prompt"),
        ("IDENTITY.md", "persona", "a persona document; a foreign identity never becomes Cairn's"),
    ] {
        let path = workspace.join(name);
        if let Ok(Some(_)) = read::kind_of(workspace, &path) {
            collector.diagnose(source, &path, code, message);
        }
    }
    skills_dir(collector, source, workspace, &workspace.join("skills"));
    let memory_dir = workspace.join("memory");
    for entry in collector.list(source, workspace, &memory_dir, MAX_FOREIGN_DIR_ENTRIES, "too_many_entries") {
        let date = parse_day_file_name(&entry.name);
        match (entry.kind, date) {
            (EntryKind::Dir, _) => {
                collector.diagnose(source, &entry.path, "not_a_daily_log", "only memory/YYYY-MM-DD.md files are read")
            }
            (_, None) => {
                collector.diagnose(source, &entry.path, "not_a_daily_log", "only memory/YYYY-MM-DD.md files are read")
            }
            (_, Some(date)) => {
                let Some(midnight) = parse::day_start(date) else {
                    collector.diagnose(
                        source,
                        &entry.path,
                        "date_out_of_range",
                        format!("{date} is past the last date a timestamp holds; the file was not imported"),
                    );
                    continue;
                };
                let Some(text) = collector.read_file_entry(source, workspace, &entry) else { continue };
                for (index, daily) in parse::daily_entries(midnight, &text).into_iter().enumerate() {
                    collector.item(
                        source,
                        &entry.path,
                        format!("entry {}", index + 1),
                        Landing::Episode { text: daily.text, created_at: Some(daily.created_at) },
                    );
                }
            }
        }
    }
}

/// `SOUL.md`: each directive paragraph is a lesson; a paragraph stating
/// who the agent is stays out (a foreign persona never becomes Cairn's).
fn soul(collector: &mut Collector, path: &Path, text: &str) {
    let source = ForeignSource::Openclaw;
    let (_, body) = parse::split_frontmatter(text);
    for (index, block) in parse::blocks(body).into_iter().enumerate() {
        let text = match block {
            Block::Paragraph(text) | Block::Bullet(text) => text,
            Block::Heading(_) | Block::Code => continue,
        };
        let locator = format!("block {}", index + 1);
        if parse::states_identity(&text) {
            collector.unsupported(source, path, locator, "persona", "states a persona or identity, not a directive");
            continue;
        }
        collector.item(source, path, locator, Landing::Lesson { rule: parse::one_line(&parse::plain(&text)) });
    }
}

/// The default roots under a user's home directory.
pub(crate) fn default_roots(home: &Path) -> ForeignRoots {
    ForeignRoots {
        claude_home: Some(home.join(".claude")),
        projects: Vec::new(),
        hermes_home: Some(home.join(".hermes")),
        openclaw_workspace: Some(home.join(".openclaw").join("workspace")),
    }
}
