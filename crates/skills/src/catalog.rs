//! The catalog: roots, discovery, the parse cache, listing and writes.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::{Mutex, RwLock};
use serde::Serialize;
use tracing::{debug, trace, warn};

use crate::audit::{AuditSink, NullAudit, SkillAuditAction, SkillAuditEvent};
use crate::clock::{SkillClock, SystemSkillClock};
use crate::constants::{ITER_CACHE_TTL_MS, MAX_DISCOVERY_DEPTH, MAX_SKILL_FILE_BYTES, MAX_TRIGGERED, USAGE_FILENAME};
use crate::edit::{EditError, FieldUpdate, apply_update, set_inject_on_trigger};
use crate::error::{Result, SkillsError};
use crate::frontmatter::{FrontmatterError, parse_lenient, split};
use crate::fsutil::{atomic_write, copy_dir_atomic};
use crate::ledger::UsageLedger;
use crate::name::{sanitize_name, validate_name};
use crate::skill::{Skill, SkillSource};
use crate::text::StemCache;
use crate::triggers::TriggerIndex;

/// How the catalog is set up. The binary fills it from its own settings;
/// this crate reads no environment or config file.
#[derive(Debug, Clone)]
pub struct SkillsConfig {
    /// The Cairn home. Skills live in `<home>/skills`, the ledger in
    /// `<home>/skill-usage.json`.
    pub home: PathBuf,
    /// A project directory whose `skills/` outranks every other root.
    pub project_dir: Option<PathBuf>,
    /// Bundled skills, copied into the home by [`SkillCatalog::seed_builtins`].
    pub builtin_dir: Option<PathBuf>,
    /// More skill roots, listed after the others and never written.
    pub extra_paths: Vec<PathBuf>,
    /// Cap of the per-message trigger pass (0 turns it off).
    pub max_triggered: usize,
    /// Rank and budget the on-demand index instead of listing everything.
    pub lazy_load: bool,
    /// How long a discovered file list is reused (milliseconds).
    pub cache_ttl_millis: u64,
    /// Persist the usage ledger (off: in-memory only).
    pub persist_usage: bool,
}

impl SkillsConfig {
    /// Defaults for a home directory.
    pub fn new(home: impl Into<PathBuf>) -> Self {
        Self {
            home: home.into(),
            project_dir: None,
            builtin_dir: None,
            extra_paths: Vec::new(),
            max_triggered: MAX_TRIGGERED,
            lazy_load: false,
            cache_ttl_millis: ITER_CACHE_TTL_MS,
            persist_usage: true,
        }
    }

    /// The directory the catalog owns and writes: `<home>/skills`.
    pub fn owned_dir(&self) -> PathBuf {
        self.home.join("skills")
    }

    fn roots(&self) -> Vec<(SkillSource, PathBuf)> {
        let mut roots = Vec::new();
        if let Some(project) = &self.project_dir {
            roots.push((SkillSource::Project, project.join("skills")));
        }
        roots.push((SkillSource::Home, self.owned_dir()));
        if let Some(builtin) = &self.builtin_dir {
            roots.push((SkillSource::Builtin, builtin.clone()));
        }
        roots.extend(self.extra_paths.iter().map(|path| (SkillSource::Extra, path.clone())));
        roots
    }
}

/// One row of [`SkillCatalog::list_skills`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillListing {
    /// SkillCatalog name.
    pub name: String,
    /// Description (empty when there is none).
    pub description: String,
    /// Root it came from.
    pub source: SkillSource,
    /// Skill directory.
    pub dir: PathBuf,
    /// `SKILL.md` path.
    pub path: PathBuf,
    /// `always: true`.
    pub always: bool,
    /// `inject_on_trigger` (absent means `true`).
    pub inject_on_trigger: bool,
    /// Size of `SKILL.md`.
    pub size_bytes: u64,
    /// Bodies delivered to prompts in the ledger window; `None` when the
    /// ledger has no entry, which is not the same as zero.
    pub deliveries: Option<u64>,
    /// Whether the catalog may edit it.
    pub owned: bool,
    /// A load problem worth showing (broken frontmatter).
    pub warning: Option<String>,
}

/// The discovered, parsed skill set at one moment.
#[derive(Debug)]
pub(crate) struct Snapshot {
    taken_millis: u64,
    pub(crate) skills: Vec<Arc<Skill>>,
    pub(crate) by_name: HashMap<String, usize>,
    pub(crate) triggers: TriggerIndex,
}

impl Snapshot {
    pub(crate) fn get(&self, name: &str) -> Option<&Arc<Skill>> {
        self.by_name.get(name).map(|&index| &self.skills[index])
    }
}

/// What [`SkillCatalog::seed_builtins`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SeedReport {
    /// Bundled skills copied into the home.
    pub copied: Vec<String>,
    /// Bundled skills left alone (already in the home, or seeded before and
    /// since removed by the user).
    pub skipped: Vec<String>,
}

const SEED_MARKER: &str = ".builtin-seeded";

/// The skill catalog. Cheap to share (`Arc<SkillCatalog>`); every method takes
/// `&self` and is safe to call from many threads.
#[derive(Debug)]
pub struct SkillCatalog {
    pub(crate) config: SkillsConfig,
    pub(crate) ledger: UsageLedger,
    pub(crate) audit: Arc<dyn AuditSink>,
    pub(crate) clock: Arc<dyn SkillClock>,
    snapshot: RwLock<Option<Arc<Snapshot>>>,
    refresh_lock: Mutex<()>,
    write_lock: Mutex<()>,
    generation: AtomicU64,
    parsed: Mutex<HashMap<PathBuf, Arc<Skill>>>,
    pub(crate) stems: StemCache,
}

impl SkillCatalog {
    /// A catalog over `config` with the system clock and no audit sink.
    pub fn open(config: SkillsConfig) -> Self {
        Self::with_parts(config, Arc::new(SystemSkillClock), Arc::new(NullAudit))
    }

    /// A catalog with an explicit clock and audit sink.
    pub fn with_parts(config: SkillsConfig, clock: Arc<dyn SkillClock>, audit: Arc<dyn AuditSink>) -> Self {
        let ledger = if config.persist_usage {
            UsageLedger::open(config.home.join(USAGE_FILENAME), clock.clone()).0
        } else {
            UsageLedger::in_memory(clock.clone())
        };
        Self {
            config,
            ledger,
            audit,
            clock,
            snapshot: RwLock::new(None),
            refresh_lock: Mutex::new(()),
            write_lock: Mutex::new(()),
            generation: AtomicU64::new(0),
            parsed: Mutex::new(HashMap::new()),
            stems: StemCache::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &SkillsConfig {
        &self.config
    }

    /// The usage ledger.
    pub fn ledger(&self) -> &UsageLedger {
        &self.ledger
    }

    /// Forgets the cached file list; the next read walks the roots again.
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        *self.snapshot.write() = None;
    }

    /// The current snapshot, rebuilt when older than the TTL.
    pub(crate) fn snapshot(&self) -> Arc<Snapshot> {
        let now = self.clock.now_millis();
        if let Some(snapshot) = self.fresh(now) {
            return snapshot;
        }
        let _refresh = self.refresh_lock.lock();
        let now = self.clock.now_millis();
        if let Some(snapshot) = self.fresh(now) {
            return snapshot;
        }
        let generation = self.generation.load(Ordering::SeqCst);
        let snapshot = Arc::new(self.build(now));
        if self.generation.load(Ordering::SeqCst) == generation {
            *self.snapshot.write() = Some(snapshot.clone());
        }
        snapshot
    }

    fn fresh(&self, now: u64) -> Option<Arc<Snapshot>> {
        let guard = self.snapshot.read();
        let snapshot = guard.as_ref()?;
        (now.saturating_sub(snapshot.taken_millis) < self.config.cache_ttl_millis).then(|| snapshot.clone())
    }

    fn build(&self, now: u64) -> Snapshot {
        let span = tracing::debug_span!("skills.discover");
        let _enter = span.enter();
        let mut skills: Vec<Arc<Skill>> = Vec::new();
        let mut by_name: HashMap<String, usize> = HashMap::new();
        let seeded = self.seeded_names();
        let mut seen_paths = HashSet::new();
        for (source, root) in self.config.roots() {
            let mut found = Vec::new();
            let mut visited = HashSet::new();
            discover(&root, &root, 0, &mut visited, &mut found);
            // Links are followed inside a root; a skill that resolves out
            // of it (a checkout's link to a token, `/etc/passwd`, a folder
            // elsewhere) is refused.
            let canonical_root = fs::canonicalize(&root).ok();
            for (name, dir, path) in found {
                if let Some(target) = outside_root(canonical_root.as_deref(), &path) {
                    warn!(
                        skill = %name,
                        path = %path.display(),
                        target = %target.display(),
                        "skill {name} resolves outside its root {}; refused",
                        root.display()
                    );
                    continue;
                }
                if source == SkillSource::Builtin && seeded.contains(&name) {
                    debug!(skill = %name, "bundled skill was copied into the home before; not listed from the bundle");
                    continue;
                }
                if by_name.contains_key(&name) {
                    debug!(skill = %name, ?source, "shadowed by a higher-precedence root");
                    continue;
                }
                if !seen_paths.insert(path.clone()) {
                    continue;
                }
                if let Some(skill) = self.load(&name, source, dir, path) {
                    by_name.insert(name, skills.len());
                    skills.push(skill);
                }
            }
        }
        // Drop parse-cache entries for files that are gone.
        self.parsed.lock().retain(|path, _| seen_paths.contains(path));
        let triggers = TriggerIndex::build(&skills);
        debug!(skills = skills.len(), "skill catalog rebuilt");
        Snapshot { taken_millis: now, skills, by_name, triggers }
    }

    fn load(&self, name: &str, source: SkillSource, dir: PathBuf, path: PathBuf) -> Option<Arc<Skill>> {
        let metadata = match fs::metadata(&path) {
            Ok(metadata) => metadata,
            Err(error) => {
                warn!(path = %path.display(), %error, "skipping unreadable skill");
                return None;
            }
        };
        let modified = metadata.modified().ok().and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok());
        let stamp = (modified.map_or(0, |elapsed| elapsed.as_nanos() as u64), metadata.len());
        if let Some(cached) = self.parsed.lock().get(&path)
            && cached.stamp == stamp
            && cached.name == name
            && cached.source == source
        {
            return Some(cached.clone());
        }
        let text = match cairn_guard::safe_read_file_bounded(&path, MAX_SKILL_FILE_BYTES as u64) {
            Ok(text) => text,
            Err(error) => {
                warn!(path = %path.display(), %error, "skipping skill that cannot be read");
                return None;
            }
        };
        let parsed = parse_lenient(&text);
        let warning = parsed.problem.map(|problem| {
            warn!(skill = %name, path = %path.display(), %problem, "skill loaded without frontmatter metadata");
            problem.to_string()
        });
        trace!(skill = %name, bytes = text.len(), "parsed skill");
        let skill = Arc::new(Skill {
            name: name.to_owned(),
            source,
            dir,
            path: path.clone(),
            meta: parsed.meta,
            size_bytes: metadata.len(),
            modified_secs: modified.map_or(0, |elapsed| elapsed.as_secs()),
            warning,
            text,
            body_start: parsed.body_start,
            stamp,
            screened_body: OnceLock::new(),
            screened_description: OnceLock::new(),
        });
        self.parsed.lock().insert(path, skill.clone());
        Some(skill)
    }

    /// Every skill, precedence applied, sorted by name.
    pub fn skills(&self) -> Vec<Arc<Skill>> {
        let mut skills = self.snapshot().skills.clone();
        skills.sort_by(|a, b| a.name.cmp(&b.name));
        skills
    }

    /// The skill called `name`, if any.
    pub fn get(&self, name: &str) -> Option<Arc<Skill>> {
        self.snapshot().get(name).cloned()
    }

    /// The listing a management surface shows.
    pub fn list_skills(&self) -> Vec<SkillListing> {
        let span = tracing::debug_span!("skills.list");
        let _enter = span.enter();
        let snapshot = self.snapshot();
        let usage = self.ledger.snapshot();
        let mut rows: Vec<SkillListing> = snapshot
            .skills
            .iter()
            .map(|skill| SkillListing {
                name: skill.name.clone(),
                description: skill.description().to_owned(),
                source: skill.source,
                dir: skill.dir.clone(),
                path: skill.path.clone(),
                always: skill.meta.always,
                inject_on_trigger: skill.meta.inject_on_trigger,
                size_bytes: skill.size_bytes,
                deliveries: usage.get(&skill.name).map(|entry| entry.deliveries),
                owned: skill.owned(),
                warning: skill.warning.clone(),
            })
            .collect();
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        rows
    }

    // ---------------------------------------------------------------- writes

    fn owned_root(&self, create: bool) -> Result<PathBuf> {
        let root = self.config.owned_dir();
        match fs::symlink_metadata(&root) {
            Ok(metadata) if metadata.file_type().is_symlink() => return Err(SkillsError::Symlink { path: root }),
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound && create => {
                fs::create_dir_all(&root).map_err(|source| SkillsError::io("creating", &root, source))?;
            }
            Err(error) => return Err(SkillsError::io("inspecting", &root, error)),
        }
        fs::canonicalize(&root).map_err(|source| SkillsError::io("resolving", &root, source))
    }

    /// Resolves an existing owned skill: its directory and `SKILL.md`, both
    /// checked to resolve inside the owned directory.
    fn resolve_owned(&self, name: &str) -> Result<(PathBuf, PathBuf)> {
        validate_name(name)?;
        let root = self.owned_root(false)?;
        let dir = self.config.owned_dir().join(name);
        match fs::symlink_metadata(&dir) {
            Ok(metadata) if metadata.file_type().is_symlink() => return Err(SkillsError::Symlink { path: dir }),
            Ok(metadata) if metadata.is_dir() => {}
            Ok(_) => return Err(SkillsError::NotFound { name: name.to_owned() }),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(SkillsError::NotFound { name: name.to_owned() });
            }
            Err(error) => return Err(SkillsError::io("inspecting", &dir, error)),
        }
        let resolved_dir = fs::canonicalize(&dir).map_err(|source| SkillsError::io("resolving", &dir, source))?;
        if !resolved_dir.starts_with(&root) || resolved_dir == root {
            return Err(SkillsError::NotOwned { name: name.to_owned(), path: resolved_dir });
        }
        let file = skill_file_in(&dir).ok_or_else(|| SkillsError::NotFound { name: name.to_owned() })?;
        let resolved_file = fs::canonicalize(&file).map_err(|source| SkillsError::io("resolving", &file, source))?;
        if !resolved_file.starts_with(&resolved_dir) {
            return Err(SkillsError::NotOwned { name: name.to_owned(), path: resolved_file });
        }
        Ok((resolved_dir, resolved_file))
    }

    fn check_content(name: &str, content: &str) -> Result<()> {
        if content.len() > MAX_SKILL_FILE_BYTES {
            return Err(SkillsError::TooLarge {
                name: name.to_owned(),
                bytes: content.len(),
                max: MAX_SKILL_FILE_BYTES,
            });
        }
        let findings = cairn_guard::find_credentials(content);
        if !findings.is_empty() {
            let mut rules: Vec<&str> = findings.iter().map(|finding| finding.rule).collect();
            rules.dedup();
            return Err(SkillsError::Credentials { name: name.to_owned(), rules: rules.join(", ") });
        }
        if content.trim_start_matches('\u{feff}').starts_with("---") {
            match split(content).and_then(|split| crate::frontmatter::parse_mapping(&content[split.yaml])) {
                Ok(_) => {}
                Err(FrontmatterError::Missing) => {}
                Err(error) => {
                    return Err(SkillsError::MalformedFrontmatter { name: name.to_owned(), reason: error.to_string() });
                }
            }
        }
        Ok(())
    }

    fn audit<T>(&self, action: SkillAuditAction, skills: Vec<String>, outcome: &Result<T>, detail: &str) {
        let (ok, detail) = match outcome {
            Ok(_) => (true, detail.to_owned()),
            Err(error) => (false, cairn_guard::redact_all(format!("{detail} {error}").trim_start()).into_owned()),
        };
        self.audit.record(SkillAuditEvent { action, skills, ok, detail });
    }

    /// Creates `<home>/skills/<name>/SKILL.md`. The name is sanitised first
    /// (lower case, hyphens, slashes); the sanitised name is returned.
    pub fn create(&self, name: &str, content: &str) -> Result<String> {
        let span = tracing::debug_span!("skills.create", name);
        let _enter = span.enter();
        let result = self.create_inner(name, content);
        let label = result.as_ref().map_or_else(|_| name.to_owned(), Clone::clone);
        self.audit(SkillAuditAction::Create, vec![label], &result, "");
        result
    }

    /// What [`create`](Self::create) would decide, writing nothing: the
    /// sanitised name, or the refusal (name rules, size, credentials,
    /// frontmatter, a skill already there).
    pub fn check_create(&self, name: &str, content: &str) -> Result<String> {
        let name = sanitize_name(name)?;
        Self::check_content(&name, content)?;
        if fs::symlink_metadata(self.config.owned_dir().join(&name)).is_ok() {
            return Err(SkillsError::AlreadyExists { name });
        }
        Ok(name)
    }

    fn create_inner(&self, name: &str, content: &str) -> Result<String> {
        let name = sanitize_name(name)?;
        Self::check_content(&name, content)?;
        let _write = self.write_lock.lock();
        let root = self.owned_root(true)?;
        let dir = self.config.owned_dir().join(&name);
        if fs::symlink_metadata(&dir).is_ok() {
            return Err(SkillsError::AlreadyExists { name });
        }
        // Every existing ancestor must resolve inside the owned directory,
        // and none may be a skill: discovery never looks inside one.
        let mut ancestor = self.config.owned_dir();
        let components: Vec<&str> = name.split('/').collect();
        for (index, component) in components.iter().enumerate() {
            ancestor.push(component);
            match fs::symlink_metadata(&ancestor) {
                Ok(metadata) if metadata.file_type().is_symlink() => {
                    return Err(SkillsError::Symlink { path: ancestor });
                }
                Ok(_) => {
                    let resolved = fs::canonicalize(&ancestor)
                        .map_err(|source| SkillsError::io("resolving", &ancestor, source))?;
                    if !resolved.starts_with(&root) {
                        return Err(SkillsError::NotOwned { name, path: resolved });
                    }
                    if index + 1 < components.len() && skill_file_in(&ancestor).is_some() {
                        let skill = components[..=index].join("/");
                        return Err(SkillsError::InsideSkill { name, skill });
                    }
                }
                Err(_) => break,
            }
        }
        let parent = dir.parent().expect("a joined name has a parent").to_path_buf();
        fs::create_dir_all(&parent).map_err(|source| SkillsError::io("creating", &parent, source))?;
        // Stage the directory, then rename it into place: a failure leaves
        // no half-made skill behind.
        let staging = tempfile::Builder::new()
            .prefix(".cairn-new-")
            .tempdir_in(&parent)
            .map_err(|source| SkillsError::io("creating a staging directory in", &parent, source))?;
        atomic_write(&staging.path().join("SKILL.md"), content.as_bytes())?;
        let staged = staging.keep();
        if let Err(source) = fs::rename(&staged, &dir) {
            let _ = fs::remove_dir_all(&staged);
            return Err(SkillsError::io("renaming into place", &dir, source));
        }
        self.invalidate();
        debug!(skill = %name, "skill created");
        Ok(name)
    }

    /// Replaces an owned skill's `SKILL.md` atomically.
    pub fn update(&self, name: &str, content: &str) -> Result<()> {
        let span = tracing::debug_span!("skills.update", name);
        let _enter = span.enter();
        let result = (|| {
            Self::check_content(name, content)?;
            let _write = self.write_lock.lock();
            let (_, file) = self.resolve_owned(name)?;
            atomic_write(&file, content.as_bytes())?;
            self.invalidate();
            Ok(())
        })();
        self.audit(SkillAuditAction::Update, vec![name.to_owned()], &result, "");
        result
    }

    /// Removes an owned skill's whole directory.
    pub fn delete(&self, name: &str) -> Result<()> {
        let span = tracing::debug_span!("skills.delete", name);
        let _enter = span.enter();
        let result = (|| {
            let _write = self.write_lock.lock();
            let (dir, _) = self.resolve_owned(name)?;
            fs::remove_dir_all(&dir).map_err(|source| SkillsError::io("removing", &dir, source))?;
            self.invalidate();
            Ok(())
        })();
        self.audit(SkillAuditAction::Delete, vec![name.to_owned()], &result, "");
        result
    }

    /// Checks that the effective skill called `name` is the owned one and
    /// returns its resolved `SKILL.md`.
    fn owned_effective(&self, name: &str) -> Result<PathBuf> {
        validate_name(name)?;
        let skill = self.get(name).ok_or_else(|| SkillsError::NotFound { name: name.to_owned() })?;
        if !skill.owned() {
            return Err(SkillsError::NotOwned { name: name.to_owned(), path: skill.path.clone() });
        }
        Ok(self.resolve_owned(name)?.1)
    }

    fn edit_with(&self, name: &str, edit: impl FnOnce(&str) -> std::result::Result<String, EditError>) -> Result<bool> {
        let _write = self.write_lock.lock();
        let file = self.owned_effective(name)?;
        let text = fs::read_to_string(&file).map_err(|source| SkillsError::io("reading", &file, source))?;
        let new_text = edit(&text).map_err(|error| match error {
            EditError::Frontmatter(FrontmatterError::Missing) => SkillsError::NoFrontmatter { name: name.to_owned() },
            EditError::Frontmatter(problem) => {
                SkillsError::MalformedFrontmatter { name: name.to_owned(), reason: problem.to_string() }
            }
            EditError::NotApplied(reason) => SkillsError::EditNotApplied { name: name.to_owned(), reason },
        })?;
        if new_text == text {
            return Ok(false);
        }
        Self::check_content(name, &new_text)?;
        atomic_write(&file, new_text.as_bytes())?;
        self.invalidate();
        Ok(true)
    }

    /// Sets `inject_on_trigger` for an owned skill by editing that one
    /// frontmatter line: `false` writes it, `true` removes the key.
    /// Returns whether the file changed.
    pub fn set_inject_on_trigger(&self, name: &str, inject: bool) -> Result<bool> {
        let span = tracing::debug_span!("skills.set_inject_on_trigger", name, inject);
        let _enter = span.enter();
        let result = self.edit_with(name, |text| set_inject_on_trigger(text, inject));
        let detail = format!("inject_on_trigger={inject}");
        self.audit(SkillAuditAction::SetInjectOnTrigger, vec![name.to_owned()], &result, &detail);
        debug!(skill = name, inject, ok = result.is_ok(), "set inject_on_trigger");
        result
    }

    /// Edits modelled frontmatter fields of an owned skill; every other
    /// frontmatter line stays byte-identical. Returns whether the file changed.
    pub fn update_fields(&self, name: &str, update: &FieldUpdate) -> Result<bool> {
        let span = tracing::debug_span!("skills.update_fields", name);
        let _enter = span.enter();
        let result = self.edit_with(name, |text| apply_update(text, update));
        self.audit(SkillAuditAction::EditFields, vec![name.to_owned()], &result, "");
        result
    }

    fn seeded_names(&self) -> HashSet<String> {
        fs::read_to_string(self.config.owned_dir().join(SEED_MARKER))
            .map(|text| text.lines().map(str::trim).filter(|line| !line.is_empty()).map(str::to_owned).collect())
            .unwrap_or_default()
    }

    /// Copies each bundled skill directory (scripts and assets included)
    /// into the home, once: a skill already in the home is never
    /// overwritten, and one the user deleted after it was copied is not
    /// brought back.
    pub fn seed_builtins(&self) -> Result<SeedReport> {
        let span = tracing::debug_span!("skills.seed_builtins");
        let _enter = span.enter();
        let Some(builtin) = &self.config.builtin_dir else { return Ok(SeedReport::default()) };
        let _write = self.write_lock.lock();
        let root = self.owned_root(true)?;
        let mut seeded = self.seeded_names();
        let mut found = Vec::new();
        discover(builtin, builtin, 0, &mut HashSet::new(), &mut found);
        let mut report = SeedReport::default();
        for (name, dir, _) in found {
            let target = root.join(&name);
            if seeded.contains(&name) || fs::symlink_metadata(&target).is_ok() {
                report.skipped.push(name.clone());
            } else {
                copy_dir_atomic(&dir, &target)?;
                report.copied.push(name.clone());
            }
            seeded.insert(name);
        }
        let mut names: Vec<&String> = seeded.iter().collect();
        names.sort();
        let marker = names.iter().map(|name| format!("{name}\n")).collect::<String>();
        atomic_write(&root.join(SEED_MARKER), marker.as_bytes())?;
        self.invalidate();
        if !report.copied.is_empty() {
            self.audit.record(SkillAuditEvent {
                action: SkillAuditAction::SeedBuiltins,
                skills: report.copied.clone(),
                ok: true,
                detail: String::new(),
            });
        }
        Ok(report)
    }
}

/// `SKILL.md`, or the lower-case `skill.md` fallback.
pub(crate) fn skill_file_in(dir: &Path) -> Option<PathBuf> {
    ["SKILL.md", "skill.md"].into_iter().map(|file| dir.join(file)).find(|path| path.is_file())
}

/// Where `path` really lands when that is outside `root` (already
/// canonical), or when it cannot be resolved at all.
fn outside_root(root: Option<&Path>, path: &Path) -> Option<PathBuf> {
    match (root, fs::canonicalize(path)) {
        (Some(root), Ok(target)) if target.starts_with(root) => None,
        (_, Ok(target)) => Some(target),
        (_, Err(_)) => Some(path.to_path_buf()),
    }
}

/// Walks `dir` for skill directories. A directory holding `SKILL.md` is a
/// skill and is not searched further; hidden entries are skipped; symbolic
/// links to directories are followed once (loops are cut).
fn discover(
    root: &Path,
    dir: &Path,
    depth: usize,
    visited: &mut HashSet<PathBuf>,
    found: &mut Vec<(String, PathBuf, PathBuf)>,
) {
    if depth > MAX_DISCOVERY_DEPTH {
        return;
    }
    let Ok(entries) = fs::read_dir(dir) else { return };
    let mut subdirs = Vec::new();
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(text) = file_name.to_str() else { continue };
        if text.starts_with('.') {
            continue;
        }
        let Ok(kind) = entry.file_type() else { continue };
        let path = entry.path();
        let is_dir = if kind.is_symlink() {
            match fs::canonicalize(&path) {
                Ok(target) if target.is_dir() => visited.insert(target),
                _ => false,
            }
        } else {
            kind.is_dir()
        };
        if is_dir {
            subdirs.push(path);
        }
    }
    subdirs.sort();
    for sub in subdirs {
        if let Some(file) = skill_file_in(&sub) {
            let Ok(relative) = sub.strip_prefix(root) else { continue };
            let name: Option<Vec<&str>> =
                relative.components().map(|component| component.as_os_str().to_str()).collect();
            let Some(name) = name.map(|parts| parts.join("/")) else { continue };
            if validate_name(&name).is_ok() {
                found.push((name, sub, file));
            }
        } else {
            discover(root, &sub, depth + 1, visited, found);
        }
    }
}
