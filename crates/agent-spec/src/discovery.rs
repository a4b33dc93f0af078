//! Discovery: which file a name means, across a user agents directory and
//! a project's `.kiro/agents`, with pins, twins and shadowing.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use cairn_guard::SensitivePaths;
use serde::Serialize;

use crate::constants::{JSON_EXTENSION, MARKDOWN_EXTENSION, PROJECT_AGENTS_DIR};
use crate::error::{AgentSpecError, Result};
use crate::spec::{AgentSpec, SpecFormat};

/// Which agents directory a spec came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The user's agents directory (trusted).
    User,
    /// A project checkout's `.kiro/agents` (untrusted; shadows the user's).
    Project,
}

/// Where agents are looked up. The caller decides the paths; this crate
/// reads no configuration of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDirs {
    /// The user's agents directory (`~/.kiro/agents`).
    pub user: PathBuf,
    /// The project checkout, whose `.kiro/agents` is searched first.
    pub project: Option<PathBuf>,
}

impl AgentDirs {
    /// Only a user directory.
    pub fn user(user: impl Into<PathBuf>) -> Self {
        Self { user: user.into(), project: None }
    }

    /// Adds a project checkout.
    #[must_use]
    pub fn with_project(mut self, project: impl Into<PathBuf>) -> Self {
        self.project = Some(project.into());
        self
    }

    /// The project's agents directory, if a project is set.
    pub fn project_agents_dir(&self) -> Option<PathBuf> {
        self.project.as_ref().map(|project| project.join(PROJECT_AGENTS_DIR))
    }

    fn scoped(&self) -> Vec<(Scope, PathBuf)> {
        let mut dirs = Vec::new();
        if let Some(project) = self.project_agents_dir() {
            dirs.push((Scope::Project, project));
        }
        dirs.push((Scope::User, self.user.clone()));
        dirs
    }
}

/// Pins: agent name → the bare file name every reader must use.
pub type Pins = BTreeMap<String, String>;

/// Checks that a pin is a bare spec file name.
///
/// # Errors
///
/// [`AgentSpecError::InvalidPin`] for a path, an empty name or another
/// extension.
pub fn validate_pin(file_name: &str) -> Result<()> {
    let path = Path::new(file_name);
    let bare = path.file_name().is_some_and(|name| name == path.as_os_str());
    let extension_ok = path.extension().is_some_and(|ext| ext == JSON_EXTENSION || ext == MARKDOWN_EXTENSION);
    if bare && extension_ok && !file_name.starts_with('.') {
        Ok(())
    } else {
        Err(AgentSpecError::InvalidPin { pinned: file_name.to_owned() })
    }
}

/// One spec file found in an agents directory.
#[derive(Debug)]
pub struct LoadedFile {
    /// The file.
    pub path: PathBuf,
    /// Which directory it is in.
    pub scope: Scope,
    /// The parse, or why it failed.
    pub spec: Result<AgentSpec>,
    /// True when a `.json` twin of the same stem wins over this `.md`.
    pub dropped_for_twin: bool,
}

impl LoadedFile {
    fn load(path: PathBuf, scope: Scope, sensitive: &SensitivePaths) -> Self {
        let spec = AgentSpec::read(&path, sensitive);
        Self { path, scope, spec, dropped_for_twin: false }
    }

    fn file_name(&self) -> &str {
        self.path.file_name().and_then(|name| name.to_str()).unwrap_or_default()
    }

    fn stem(&self) -> &str {
        self.path.file_stem().and_then(|stem| stem.to_str()).unwrap_or_default()
    }

    fn usable(&self) -> Option<&AgentSpec> {
        if self.dropped_for_twin { None } else { self.spec.as_ref().ok() }
    }
}

/// The spec a name resolved to.
#[derive(Debug, Clone)]
pub struct ResolvedSpec {
    /// The requested name.
    pub name: String,
    /// The file that will be used and edited: for a symbolic link in an
    /// agents directory, the file it points at.
    pub path: PathBuf,
    /// Which directory it is in.
    pub scope: Scope,
    /// The parsed spec.
    pub spec: AgentSpec,
    /// Admitted-with-a-warning cases: identical twins, shadowing, pins.
    pub warnings: Vec<String>,
}

/// One line of `agent list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListEntry {
    /// The agent name (declared, else file stem).
    pub name: String,
    /// The file that name resolves to, when it resolves.
    pub path: Option<PathBuf>,
    /// Its directory.
    pub scope: Option<Scope>,
    /// Its serialisation.
    pub format: Option<SpecFormat>,
    /// `description`, when set.
    pub description: Option<String>,
    /// Why it does not resolve, when it does not.
    pub error: Option<String>,
    /// Warnings of the resolution (shadowing, identical twins, pins).
    pub warnings: Vec<String>,
}

/// Every spec file of the configured directories, parsed.
#[derive(Debug)]
pub struct AgentCatalog {
    dirs: AgentDirs,
    files: Vec<Arc<LoadedFile>>,
    notes: Vec<String>,
}

impl AgentCatalog {
    /// Lists and parses both directories. A missing directory is empty.
    ///
    /// # Errors
    ///
    /// [`AgentSpecError::ReadDir`] when a directory exists but cannot be
    /// listed.
    pub fn load(dirs: &AgentDirs, sensitive: &SensitivePaths) -> Result<Self> {
        let _span = tracing::debug_span!("catalog_load").entered();
        let mut files = Vec::new();
        for (scope, dir) in dirs.scoped() {
            for (path, _) in list_spec_files(&dir)? {
                files.push(Arc::new(LoadedFile::load(path, scope, sensitive)));
            }
        }
        Ok(Self::assemble(dirs.clone(), files))
    }

    fn assemble(dirs: AgentDirs, files: Vec<Arc<LoadedFile>>) -> Self {
        let mut notes = Vec::new();
        let json_stems: BTreeSet<(Scope, String)> = files
            .iter()
            .filter(|file| file.path.extension().is_some_and(|ext| ext == JSON_EXTENSION))
            .map(|file| (file.scope, file.stem().to_owned()))
            .collect();
        let files = files
            .into_iter()
            .map(|file| {
                let is_markdown = file.path.extension().is_some_and(|ext| ext == MARKDOWN_EXTENSION);
                if is_markdown && json_stems.contains(&(file.scope, file.stem().to_owned())) && !file.dropped_for_twin {
                    notes.push(format!(
                        "{} is ignored: {}.json beside it wins; remove one of the two",
                        file.path.display(),
                        file.stem()
                    ));
                    tracing::debug!(path = %file.path.display(), "markdown twin dropped for json");
                    let spec = match &file.spec {
                        Ok(spec) => Ok(spec.clone()),
                        Err(error) => Err(AgentSpecError::Broken {
                            name: file.stem().to_owned(),
                            path: file.path.clone(),
                            problem: error.to_string(),
                        }),
                    };
                    Arc::new(LoadedFile { path: file.path.clone(), scope: file.scope, spec, dropped_for_twin: true })
                } else {
                    file
                }
            })
            .collect();
        Self { dirs, files, notes }
    }

    /// The directories this catalog was read from.
    pub fn dirs(&self) -> &AgentDirs {
        &self.dirs
    }

    /// Every file found, parsed or not.
    pub fn files(&self) -> impl Iterator<Item = &LoadedFile> {
        self.files.iter().map(AsRef::as_ref)
    }

    /// AgentCatalog-wide warnings (Markdown twins dropped).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Files that cannot be read as specs, with the reason.
    pub fn unreadable(&self) -> impl Iterator<Item = (&Path, &AgentSpecError)> {
        self.files().filter_map(|file| file.spec.as_ref().err().map(|error| (file.path.as_path(), error)))
    }

    /// Every agent name some usable file declares (or is named after).
    pub fn names(&self) -> BTreeSet<String> {
        self.files().filter_map(LoadedFile::usable).filter_map(|spec| spec.name().map(str::to_owned)).collect()
    }

    fn claimants(&self, name: &str, scope: Scope) -> Vec<&LoadedFile> {
        let mut claimants: Vec<&LoadedFile> = self
            .files()
            .filter(|file| file.scope == scope && file.usable().and_then(AgentSpec::name) == Some(name))
            .collect();
        claimants.sort_by(|a, b| a.file_name().cmp(b.file_name()));
        claimants
    }

    /// Resolves a name: the project directory first (a project spec
    /// shadows a user spec of the same name, as kiro-cli resolves), the
    /// declared `name` outranking the file name. Several claimants in one
    /// directory are refused unless their parsed content is identical or a
    /// pin picks one; a pin naming none of them is refused.
    ///
    /// # Errors
    ///
    /// [`AgentSpecError::NotFound`], [`AgentSpecError::Ambiguous`],
    /// [`AgentSpecError::PinMismatch`], [`AgentSpecError::Broken`].
    pub fn resolve(&self, name: &str, pins: &Pins) -> Result<ResolvedSpec> {
        let _span = tracing::debug_span!("resolve_agent", name).entered();
        let scopes = [Scope::Project, Scope::User];
        for (index, scope) in scopes.into_iter().enumerate() {
            let claimants = self.claimants(name, scope);
            if claimants.is_empty() {
                continue;
            }
            let mut resolved = pick(name, &claimants, pins.get(name))?;
            for later in &scopes[index + 1..] {
                for shadowed in self.claimants(name, *later) {
                    resolved.warnings.push(format!(
                        "project spec {} shadows {} (the project directory is searched first)",
                        resolved.path.display(),
                        shadowed.path.display()
                    ));
                }
            }
            tracing::debug!(path = %resolved.path.display(), ?scope, "agent resolved");
            return Ok(resolved);
        }
        if let Some(file) = self.files().find(|file| file.stem() == name && file.spec.is_err()) {
            let problem = file.spec.as_ref().err().map(ToString::to_string).unwrap_or_default();
            return Err(AgentSpecError::Broken { name: name.to_owned(), path: file.path.clone(), problem });
        }
        let searched = self.dirs.scoped().into_iter().map(|(_, dir)| dir).collect();
        Err(AgentSpecError::NotFound { name: name.to_owned(), searched })
    }

    /// One entry per agent name, resolved, in name order.
    pub fn list(&self, pins: &Pins) -> Vec<ListEntry> {
        self.names()
            .into_iter()
            .map(|name| match self.resolve(&name, pins) {
                Ok(resolved) => ListEntry {
                    description: resolved.spec.description().map(str::to_owned),
                    format: Some(resolved.spec.format()),
                    path: Some(resolved.path),
                    scope: Some(resolved.scope),
                    warnings: resolved.warnings,
                    error: None,
                    name,
                },
                Err(error) => ListEntry {
                    name,
                    path: None,
                    scope: None,
                    format: None,
                    description: None,
                    error: Some(error.to_string()),
                    warnings: Vec::new(),
                },
            })
            .collect()
    }

    /// The files that declare `name`, in both directories (for `pin`).
    pub fn claimant_paths(&self, name: &str) -> Vec<PathBuf> {
        [Scope::Project, Scope::User]
            .into_iter()
            .flat_map(|scope| self.claimants(name, scope))
            .map(|file| file.path.clone())
            .collect()
    }
}

fn pick(name: &str, claimants: &[&LoadedFile], pin: Option<&String>) -> Result<ResolvedSpec> {
    let paths = || claimants.iter().map(|file| file.path.clone()).collect::<Vec<_>>();
    let resolved = |file: &LoadedFile, warnings: Vec<String>| ResolvedSpec {
        name: name.to_owned(),
        path: edit_target(&file.path),
        scope: file.scope,
        spec: file.usable().cloned().expect("claimants are usable files"),
        warnings,
    };
    if let Some(pin) = pin {
        return match claimants.iter().find(|file| file.file_name() == pin) {
            Some(file) => {
                let warnings = if claimants.len() > 1 {
                    vec![format!("`{name}` is declared by {} files; the pin selects {pin}", claimants.len())]
                } else {
                    Vec::new()
                };
                Ok(resolved(file, warnings))
            }
            None => Err(AgentSpecError::PinMismatch { name: name.to_owned(), pinned: pin.clone(), claimants: paths() }),
        };
    }
    let first = claimants[0];
    if claimants.len() == 1 {
        return Ok(resolved(first, Vec::new()));
    }
    let first_spec = first.usable().expect("claimants are usable files");
    let identical = claimants[1..].iter().all(|file| file.usable().is_some_and(|spec| spec.same_content(first_spec)));
    if identical {
        let listed = paths().iter().map(|path| path.display().to_string()).collect::<Vec<_>>().join(", ");
        let warning = format!(
            "`{name}` is declared by {} files with identical content ({listed}); using {}",
            claimants.len(),
            first.file_name()
        );
        return Ok(resolved(first, vec![warning]));
    }
    Err(AgentSpecError::Ambiguous { name: name.to_owned(), files: paths() })
}

/// The file a spec's edits must reach: the spec file itself, or, for a
/// symbolic link (a spec kept in a dotfiles checkout), the file it points
/// at, so an edit rewrites that file in place instead of replacing the
/// link with a copy. A link that no longer resolves stays as it is (its
/// edit then fails to read it).
fn edit_target(path: &Path) -> PathBuf {
    match std::fs::symlink_metadata(path) {
        Ok(metadata) if metadata.file_type().is_symlink() => {
            std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
        }
        _ => path.to_path_buf(),
    }
}

/// What identifies one version of a file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

impl FileStamp {
    fn of(metadata: &std::fs::Metadata) -> Self {
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(metadata);
        #[cfg(not(unix))]
        let inode = 0;
        Self { len: metadata.len(), modified: metadata.modified().ok(), inode }
    }
}

/// Spec files of one directory with their stamps, sorted by path. A
/// missing directory is empty.
fn list_spec_files(dir: &Path) -> Result<Vec<(PathBuf, FileStamp)>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(AgentSpecError::ReadDir { path: dir.to_path_buf(), source }),
    };
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let wanted = path.extension().is_some_and(|ext| ext == JSON_EXTENSION || ext == MARKDOWN_EXTENSION);
        let hidden = path.file_name().and_then(|name| name.to_str()).is_some_and(|name| name.starts_with('.'));
        if !wanted || hidden {
            continue;
        }
        // Follows symlinks: a linked spec counts as the file it points at.
        let Ok(metadata) = std::fs::metadata(&path) else { continue };
        if metadata.is_file() {
            files.push((path, FileStamp::of(&metadata)));
        }
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(files)
}

/// Serves the [`AgentCatalog`] again without re-reading anything while no spec
/// file's metadata (size, modification time, inode) changed, and re-parses
/// only the files that did change.
#[derive(Debug)]
pub struct CatalogCache {
    dirs: AgentDirs,
    sensitive: SensitivePaths,
    stamps: Vec<(PathBuf, FileStamp)>,
    loaded: HashMap<PathBuf, (FileStamp, Arc<LoadedFile>)>,
    catalog: Option<Arc<AgentCatalog>>,
}

impl CatalogCache {
    /// An empty cache over `dirs`.
    pub fn new(dirs: AgentDirs, sensitive: SensitivePaths) -> Self {
        Self { dirs, sensitive, stamps: Vec::new(), loaded: HashMap::new(), catalog: None }
    }

    /// The current catalog: the cached one when nothing changed on disk.
    ///
    /// # Errors
    ///
    /// [`AgentSpecError::ReadDir`] when a directory cannot be listed.
    pub fn catalog(&mut self) -> Result<Arc<AgentCatalog>> {
        let mut stamps = Vec::new();
        let mut scoped = Vec::new();
        for (scope, dir) in self.dirs.scoped() {
            for (path, stamp) in list_spec_files(&dir)? {
                scoped.push((scope, path.clone(), stamp));
                stamps.push((path, stamp));
            }
        }
        if let Some(catalog) = &self.catalog
            && stamps == self.stamps
        {
            return Ok(Arc::clone(catalog));
        }
        let mut loaded = HashMap::with_capacity(scoped.len());
        let mut files = Vec::with_capacity(scoped.len());
        let mut reparsed = 0usize;
        for (scope, path, stamp) in scoped {
            let file = match self.loaded.remove(&path) {
                Some((old, file)) if old == stamp && file.scope == scope => file,
                _ => {
                    reparsed += 1;
                    Arc::new(LoadedFile::load(path.clone(), scope, &self.sensitive))
                }
            };
            loaded.insert(path, (stamp, Arc::clone(&file)));
            files.push(file);
        }
        tracing::debug!(files = files.len(), reparsed, "agent catalog refreshed");
        let catalog = Arc::new(AgentCatalog::assemble(self.dirs.clone(), files));
        self.loaded = loaded;
        self.stamps = stamps;
        self.catalog = Some(Arc::clone(&catalog));
        Ok(catalog)
    }
}
