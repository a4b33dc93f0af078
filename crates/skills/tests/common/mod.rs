//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_skills::{ManualSkillClock, MemoryAudit, SkillCatalog, SkillsConfig};

/// 2026-01-01T00:00:00Z in milliseconds.
pub const T0: u64 = 1_767_225_600_000;

/// Field order matters: the catalog (whose ledger flushes on drop) goes
/// before the home directory is removed.
pub struct Fixture {
    pub catalog: SkillCatalog,
    pub clock: Arc<ManualSkillClock>,
    pub audit: Arc<MemoryAudit>,
    pub home: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Self {
        Self::with(|_| {})
    }

    pub fn with(configure: impl FnOnce(&mut SkillsConfig)) -> Self {
        let home = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualSkillClock::new(T0));
        let audit = Arc::new(MemoryAudit::default());
        let mut config = SkillsConfig::new(home.path());
        configure(&mut config);
        let catalog = SkillCatalog::with_parts(config, clock.clone(), audit.clone());
        Self { catalog, clock, audit, home }
    }

    pub fn skills_dir(&self) -> PathBuf {
        self.home.path().join("skills")
    }

    /// Writes `<home>/skills/<name>/SKILL.md` directly (bypassing the
    /// catalog, so its file-list cache is dropped as the TTL would).
    pub fn put(&self, name: &str, text: &str) -> PathBuf {
        let path = put(&self.skills_dir(), name, text);
        self.catalog.invalidate();
        path
    }
}

pub fn put(root: &Path, name: &str, text: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("SKILL.md");
    std::fs::write(&path, text).unwrap();
    path
}

pub fn skill(name: &str, description: &str, extra: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n{extra}---\n{body}\n")
}

/// `<manifest>/../../../shared/evaldata/skills-dev`, when present.
pub fn skills_dev() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/evaldata/skills-dev");
    require_fixture("the skills conformance data (it lives in ../shared beside the checkout)", dir)
}

/// `Some(path)` when the fixture at `path` exists. When it is missing the
/// test fails under `CI=true` (a fixture CI lacks is a broken setup, not a
/// pass) and otherwise says once on stderr that it is skipped.
pub fn require_fixture(what: &str, path: PathBuf) -> Option<PathBuf> {
    use std::io::Write as _;
    if path.exists() {
        return Some(path);
    }
    if std::env::var("CI").is_ok_and(|value| value.eq_ignore_ascii_case("true")) {
        panic!("CI=true and {what} is missing at {}", path.display());
    }
    // Straight to stderr, past the test harness's capture, so the skip is seen.
    let _ = writeln!(std::io::stderr(), "SKIPPED: {what} not found at {}", path.display());
    None
}
