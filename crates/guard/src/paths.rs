//! Sensitive-path classification and the one guarded file read.
//!
//! A path is resolved the way the operating system would see it (`~`
//! expanded, made absolute, `..` folded, symlinks followed where the file
//! exists) and then checked against credential stores (wherever they lie:
//! the user's home, another user's, a project's copy), kernel interfaces,
//! system secrets and the gateway's own secrets. The home directory serves
//! only to expand `~`; the guard never looks it up: its caller passes it. Both the
//! path as written and the resolved target are checked, so neither a
//! symlink *to* `~/.ssh` nor a link *named* `.env` gets through.

use std::path::{Component, Path, PathBuf};
use std::sync::{LazyLock, RwLock};

use regex::RegexSet;

use crate::error::{GuardError, Result};

/// Credential stores, as they lie in a home directory; refused at any depth.
const HOME_SECRETS: &[(&str, &str)] = &[
    (".aws", "AWS credentials"),
    (".ssh", "SSH keys"),
    (".gnupg", "GnuPG keyring"),
    (".netrc", "netrc credentials"),
    (".git-credentials", "git credential store"),
    (".config/gh", "GitHub CLI token"),
    (".docker/config.json", "Docker registry credentials"),
    (".kube/config", "Kubernetes credentials"),
    (".config/gcloud", "Google Cloud credentials"),
    (".azure", "Azure credentials"),
    (".pgpass", "PostgreSQL passwords"),
    (".pypirc", "PyPI credentials"),
    (".npmrc", "npm token"),
    (".cargo/credentials", "crates.io token"),
    (".cargo/credentials.toml", "crates.io token"),
    (".password-store", "pass password store"),
];

/// Absolute system locations.
const SYSTEM_SECRETS: &[(&str, &str)] = &[
    ("/proc", "kernel process interface"),
    ("/sys", "kernel sysfs interface"),
    ("/dev", "device files"),
    ("/etc/shadow", "system password hashes"),
    ("/etc/gshadow", "system group password hashes"),
    ("/etc/sudoers", "sudo policy"),
    ("/etc/ssh", "SSH host keys"),
];

/// Files inside the gateway's home that hold its own secrets: credentials,
/// its settings (an LLM key, a storage URL) and its raw memory stores.
/// Every entry point that names the home (the binary and the library front
/// door alike) gets the same set.
const GATEWAY_SECRETS: &[(&str, &str)] = &[
    ("secrets", "gateway secrets directory"),
    (".env", "gateway environment file"),
    ("credentials.json", "gateway credentials"),
    ("auth.json", "gateway auth tokens"),
    ("server.token", "gateway API token"),
    ("config.json", "gateway settings"),
    ("mcp.json", "gateway MCP server definitions"),
    ("memory.db", "raw memory database"),
    ("memory.db-wal", "raw memory database"),
    ("memory.db-shm", "raw memory database"),
    ("memory.db-journal", "raw memory database"),
    ("memory_index.db", "raw memory index"),
    ("memory_index.db-wal", "raw memory index"),
    ("memory_index.db-shm", "raw memory index"),
];

/// Which paths no Cairn component may read on a model's behalf.
///
/// Credential stores, system secrets and secret file names are covered
/// everywhere; [`SensitivePaths::for_user`] adds the home `~` expands to
/// (without one a `~` path is refused), and
/// [`SensitivePaths::with_gateway_home`] the gateway's own secrets. The
/// free functions [`is_sensitive_path`] and [`safe_read_file`] use a
/// process-wide instance that the binary replaces with
/// [`SensitivePaths::install`].
#[derive(Debug, Clone, Default)]
pub struct SensitivePaths {
    home: Option<PathBuf>,
    gateway_home: Option<PathBuf>,
    extra: Vec<PathBuf>,
}

static GLOBAL: LazyLock<RwLock<SensitivePaths>> = LazyLock::new(|| RwLock::new(SensitivePaths::default()));

impl SensitivePaths {
    /// Rules for the user whose home directory is `home`, when it is known
    /// (the binary looks it up once; without one a `~` path is refused).
    pub fn for_user(home: Option<PathBuf>) -> Self {
        Self { home, ..Self::default() }
    }

    /// Rules for an explicit home directory (tests, other users).
    pub fn with_home(home: impl Into<PathBuf>) -> Self {
        Self::for_user(Some(home.into()))
    }

    /// Also protects the gateway's own secrets under `gateway_home`.
    #[must_use]
    pub fn with_gateway_home(mut self, gateway_home: impl Into<PathBuf>) -> Self {
        self.gateway_home = Some(gateway_home.into());
        self
    }

    /// Also protects `path` and everything below it.
    #[must_use]
    pub fn with_extra(mut self, path: impl Into<PathBuf>) -> Self {
        self.extra.push(path.into());
        self
    }

    /// Makes this the rule set used by [`is_sensitive_path`] and
    /// [`safe_read_file`] for the rest of the process.
    pub fn install(self) {
        *GLOBAL.write().unwrap_or_else(std::sync::PoisonError::into_inner) = self;
    }

    /// Why `path` is sensitive, or `None` when it may be read.
    pub fn classify(&self, path: &Path) -> Result<Option<&'static str>> {
        let lexical = self.absolute(path)?;
        if let Some(reason) = self.classify_resolved(&lexical) {
            return Ok(Some(reason));
        }
        let resolved = resolve_existing(&lexical);
        Ok(self.classify_resolved(&resolved))
    }

    /// True when `path` must not be read. A path that cannot be resolved
    /// counts as sensitive.
    pub fn is_sensitive(&self, path: &Path) -> bool {
        self.classify(path).map_or(true, |reason| reason.is_some())
    }

    /// Reads `path` as UTF-8 text unless it is sensitive, not a regular
    /// file or larger than [`MAX_READ_BYTES`].
    pub fn read_to_string(&self, path: &Path) -> Result<String> {
        self.read_to_string_bounded(path, MAX_READ_BYTES)
    }

    /// Reads `path` as UTF-8 text unless it is sensitive, not a regular
    /// file or larger than `max_bytes` (at most `max_bytes` are read).
    pub fn read_to_string_bounded(&self, path: &Path, max_bytes: u64) -> Result<String> {
        let (resolved, bytes) = self.read_resolved(path, max_bytes)?;
        String::from_utf8(bytes).map_err(|_| GuardError::NotUtf8 { path: resolved })
    }

    /// Reads `path` as bytes unless it is sensitive, not a regular file or
    /// larger than [`MAX_READ_BYTES`].
    pub fn read(&self, path: &Path) -> Result<Vec<u8>> {
        self.read_bounded(path, MAX_READ_BYTES)
    }

    /// Reads `path` as bytes unless it is sensitive, not a regular file or
    /// larger than `max_bytes` (at most `max_bytes` are read).
    pub fn read_bounded(&self, path: &Path, max_bytes: u64) -> Result<Vec<u8>> {
        self.read_resolved(path, max_bytes).map(|(_, bytes)| bytes)
    }

    /// The last `max_bytes` of `path` as text (lossy UTF-8), unless it is
    /// sensitive or not a regular file; a tail that starts inside the file
    /// begins after its first line break, so no partial line is returned.
    /// Also returns how many bytes before the tail were skipped.
    pub fn read_tail_bounded(&self, path: &Path, max_bytes: u64) -> Result<(String, u64)> {
        use std::io::{Read as _, Seek as _, SeekFrom};
        let (resolved, refusal) = self.check(path)?;
        if let Some(reason) = refusal {
            return Err(GuardError::SensitivePath { path: resolved, reason });
        }
        let io_error = |source| GuardError::Io { path: resolved.clone(), source };
        let mut file = open_nonblocking(&resolved).map_err(io_error)?;
        let metadata = file.metadata().map_err(io_error)?;
        if !metadata.is_file() {
            return Err(GuardError::NotRegularFile { path: resolved.clone(), kind: file_kind(&metadata.file_type()) });
        }
        let skipped = metadata.len().saturating_sub(max_bytes);
        file.seek(SeekFrom::Start(skipped)).map_err(io_error)?;
        let mut bytes = Vec::new();
        file.take(max_bytes).read_to_end(&mut bytes).map_err(io_error)?;
        let mut start = 0;
        if skipped > 0 {
            start = bytes.iter().position(|byte| *byte == b'\n').map_or(bytes.len(), |at| at + 1);
        }
        Ok((String::from_utf8_lossy(&bytes[start..]).into_owned(), skipped + start as u64))
    }

    /// The resolved path and why it may not be read, if it may not.
    fn check(&self, path: &Path) -> Result<(PathBuf, Option<&'static str>)> {
        let lexical = self.absolute(path)?;
        let resolved = resolve_existing(&lexical);
        let refusal = self.classify_resolved(&lexical).or_else(|| self.classify_resolved(&resolved));
        Ok((resolved, refusal))
    }

    fn read_resolved(&self, path: &Path, max_bytes: u64) -> Result<(PathBuf, Vec<u8>)> {
        let lexical = self.absolute(path)?;
        let resolved = resolve_existing(&lexical);
        let refusal = self.classify_resolved(&lexical).or_else(|| self.classify_resolved(&resolved));
        if let Some(reason) = refusal {
            tracing::debug!(path = %resolved.display(), reason, "refused sensitive read");
            return Err(GuardError::SensitivePath { path: resolved, reason });
        }
        // Read the resolved target, so a symlink swapped after the check
        // still points at the file that was classified.
        let bytes = read_regular_file(&resolved, max_bytes)?;
        Ok((resolved, bytes))
    }

    fn absolute(&self, path: &Path) -> Result<PathBuf> {
        let unresolvable = |reason| GuardError::Unresolvable { path: path.to_path_buf(), reason };
        let expanded = match path.strip_prefix("~") {
            Ok(rest) => self.home.as_ref().ok_or_else(|| unresolvable("no home directory to expand `~`"))?.join(rest),
            Err(_) => path.to_path_buf(),
        };
        let absolute = if expanded.is_absolute() {
            expanded
        } else {
            std::env::current_dir().map_err(|_| unresolvable("no current directory"))?.join(expanded)
        };
        Ok(lexical_normalize(&absolute))
    }

    fn classify_resolved(&self, path: &Path) -> Option<&'static str> {
        if let Some(reason) = classify_credential_store(path) {
            return Some(reason);
        }
        if let Some(gateway_home) = &self.gateway_home {
            let gateway_home = lexical_normalize(gateway_home);
            for (relative, reason) in GATEWAY_SECRETS {
                if path.starts_with(gateway_home.join(relative)) {
                    return Some(reason);
                }
            }
        }
        for (root, reason) in SYSTEM_SECRETS {
            if path.starts_with(root) {
                return Some(reason);
            }
        }
        if self.extra.iter().any(|extra| path.starts_with(lexical_normalize(extra))) {
            return Some("configured sensitive path");
        }
        classify_file_name(path)
    }
}

/// A credential store ([`HOME_SECRETS`]) at any depth: in the user's home,
/// another user's, or a copy inside a project.
fn classify_credential_store(path: &Path) -> Option<&'static str> {
    let names: Vec<&std::ffi::OsStr> = path
        .components()
        .filter_map(|component| match component {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect();
    HOME_SECRETS.iter().find_map(|(relative, reason)| {
        let wanted: Vec<&std::ffi::OsStr> = Path::new(relative).iter().collect();
        names.windows(wanted.len()).any(|window| window == wanted.as_slice()).then_some(*reason)
    })
}

/// Sensitive by file name wherever they live.
fn classify_file_name(path: &Path) -> Option<&'static str> {
    for component in path.components() {
        let Component::Normal(name) = component else { continue };
        let Some(name) = name.to_str() else { continue };
        if name == ".env" || (name.starts_with(".env.") && !is_env_template(name)) {
            return Some("environment file");
        }
    }
    let name = path.file_name()?.to_str()?;
    let is_private_key = ["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_ecdsa_sk", "id_ed25519_sk"].contains(&name);
    is_private_key.then_some("SSH private key")
}

fn is_env_template(name: &str) -> bool {
    matches!(name, ".env.example" | ".env.sample" | ".env.template" | ".env.dist")
}

/// Folds `.` and `..` without touching the file system (no symlinks are
/// followed; `..` at the root stays at the root).
pub fn lexical_normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Follows symlinks for the longest existing prefix of `path` and appends
/// the rest, so a not-yet-existing file below a symlinked directory is
/// classified by where it would really land.
fn resolve_existing(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(canonical) = existing.canonicalize() {
            let mut resolved = canonical;
            for part in rest.iter().rev() {
                resolved.push(part);
            }
            return resolved;
        }
        match (existing.file_name().map(ToOwned::to_owned), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// The cap of a guarded read unless the caller names a smaller one: 8 MiB,
/// far above any prompt, skill or spec a person writes, and small enough
/// that a hostile file costs little memory.
pub const MAX_READ_BYTES: u64 = 8 * 1024 * 1024;

/// Reads at most `max_bytes` of the regular file at `path`, refusing any
/// other kind of file before a byte is read.
///
/// The file is opened without blocking (a FIFO with no writer would hang a
/// plain open) and its type and size are taken from the open handle, so a
/// file swapped between a check and the open is still checked.
pub fn read_regular_file(path: &Path, max_bytes: u64) -> Result<Vec<u8>> {
    use std::io::Read as _;
    let io_error = |source| GuardError::Io { path: path.to_path_buf(), source };
    let file = open_nonblocking(path).map_err(io_error)?;
    let metadata = file.metadata().map_err(io_error)?;
    if !metadata.is_file() {
        return Err(GuardError::NotRegularFile { path: path.to_path_buf(), kind: file_kind(&metadata.file_type()) });
    }
    let too_large = |bytes| GuardError::TooLarge { path: path.to_path_buf(), bytes, limit: max_bytes };
    if metadata.len() > max_bytes {
        return Err(too_large(metadata.len()));
    }
    let capacity = usize::try_from(metadata.len()).unwrap_or(0);
    let mut bytes = Vec::with_capacity(capacity);
    // One byte past the cap tells a file that grew since the stat.
    file.take(max_bytes.saturating_add(1)).read_to_end(&mut bytes).map_err(io_error)?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

#[cfg(unix)]
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let flags = rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY;
    std::fs::OpenOptions::new().read(true).custom_flags(flags.bits() as i32).open(path)
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}

/// A file type's name for an error message.
fn file_kind(kind: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if kind.is_fifo() {
            return "FIFO";
        }
        if kind.is_socket() {
            return "socket";
        }
        if kind.is_char_device() {
            return "character device";
        }
        if kind.is_block_device() {
            return "block device";
        }
    }
    if kind.is_dir() {
        "directory"
    } else if kind.is_symlink() {
        "symbolic link"
    } else {
        "special file"
    }
}

/// True when `path` must not be read, under the process-wide rules.
pub fn is_sensitive_path(path: impl AsRef<Path>) -> bool {
    GLOBAL.read().unwrap_or_else(std::sync::PoisonError::into_inner).is_sensitive(path.as_ref())
}

/// The one guarded read: refuses a sensitive path with
/// [`GuardError::SensitivePath`], anything but a regular file with
/// [`GuardError::NotRegularFile`] and a file over [`MAX_READ_BYTES`] with
/// [`GuardError::TooLarge`], and reads UTF-8 text otherwise.
pub fn safe_read_file(path: impl AsRef<Path>) -> Result<String> {
    safe_read_file_bounded(path, MAX_READ_BYTES)
}

/// [`safe_read_file`] with a cap of `max_bytes` (at most that many bytes
/// are read).
pub fn safe_read_file_bounded(path: impl AsRef<Path>, max_bytes: u64) -> Result<String> {
    GLOBAL.read().unwrap_or_else(std::sync::PoisonError::into_inner).read_to_string_bounded(path.as_ref(), max_bytes)
}

/// References to credential stores and cloud metadata endpoints inside tool
/// names or tool inputs (a shell command, a URL, a file argument).
const SENSITIVE_MENTIONS: &[(&str, &str)] = &[
    ("aws-credentials", r"(?:~|\$HOME|/home/[^/\s]+|/root)/\.aws\b|\.aws/credentials"),
    ("ssh-keys", r"(?:~|\$HOME|/home/[^/\s]+|/root)/\.ssh\b|\bid_(?:rsa|dsa|ecdsa|ed25519)\b"),
    ("gnupg", r"(?:~|\$HOME|/home/[^/\s]+|/root)/\.gnupg\b"),
    ("netrc", r"\.netrc\b|\.git-credentials\b"),
    ("env-file", r"(?:^|[\s/'\x22=])\.env(?:\.[a-z]+)?(?:$|[\s'\x22;|&])"),
    ("instance-metadata", r"169\.254\.169\.254|\[?fd00:ec2::254\]?|metadata\.google\.internal|100\.100\.100\.200"),
    ("kube-config", r"\.kube/config\b"),
    ("docker-config", r"\.docker/config\.json\b"),
    ("shadow", r"/etc/(?:g?shadow|sudoers)\b"),
];

static MENTIONS: LazyLock<RegexSet> = LazyLock::new(|| {
    RegexSet::new(SENSITIVE_MENTIONS.iter().map(|(_, pattern)| crate::normalize::ascii_pattern(pattern)))
        .expect("built-in mention patterns compile")
});

/// Names the first credential store or metadata endpoint that `text` (a
/// tool name or tool input) refers to, or `None`.
///
/// ```
/// assert_eq!(cairn_guard::mentions_sensitive_location("cat ~/.aws/credentials"), Some("aws-credentials"));
/// assert_eq!(cairn_guard::mentions_sensitive_location("curl http://169.254.169.254/latest/"), Some("instance-metadata"));
/// assert_eq!(cairn_guard::mentions_sensitive_location("ls -la src/"), None);
/// ```
pub fn mentions_sensitive_location(text: &str) -> Option<&'static str> {
    MENTIONS.matches(text).iter().next().map(|index| SENSITIVE_MENTIONS[index].0)
}

#[cfg(test)]
mod tests;
