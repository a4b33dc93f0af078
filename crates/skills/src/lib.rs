//! The skill catalog for Cairn.
//!
//! Skills are Markdown files, `<root>/<name>/SKILL.md`, with YAML
//! frontmatter in the Agent Skills format plus Cairn's own keys (`always`,
//! `triggers`, `inject_on_trigger`, `pinned`, `version`), which may also sit
//! under `metadata:` so the skill stays valid for other hosts. A nested
//! directory gives a nested name (`utils/tiny-url`).
//!
//! [`SkillCatalog`] is the main type. It reads skills from ordered roots (the
//! project's `skills/`, the home's `skills/` with bundled skills copied in,
//! bundled skills not yet copied, configured extra paths) and answers the
//! questions an agent host asks on its hot path:
//!
//! - [`SkillCatalog::session_view`]: always-on bodies plus an index of on-demand
//!   skills (all of them, or with `lazy_load` the usage-ranked top-K that
//!   fits a character budget);
//! - [`SkillCatalog::match_message`]: the per-message trigger pass and `$name`
//!   tokens, delivering bodies or `[Relevant skills for this message]`
//!   pointers, recording usage in the [`UsageLedger`];
//! - [`SkillCatalog::search`], [`SkillCatalog::list_skills`];
//! - edits that never rewrite a byte they do not model:
//!   [`SkillCatalog::create`], [`SkillCatalog::update`], [`SkillCatalog::delete`],
//!   [`SkillCatalog::set_inject_on_trigger`], [`SkillCatalog::update_fields`];
//! - [`lint_path`]: Agent Skills portability next to Cairn's own needs.
//!
//! Every text that can reach a prompt goes through `cairn-guard`: bodies and
//! descriptions have credentials and exfiltration URLs redacted, and a skill
//! whose text trips the injection screen is withheld and reported instead.
//!
//! ```
//! use cairn_skills::{SkillCatalog, SkillsConfig};
//!
//! let home = tempfile::tempdir().unwrap();
//! let mut config = SkillsConfig::new(home.path());
//! config.persist_usage = false;
//! let catalog = SkillCatalog::open(config);
//! catalog
//!     .create("deploy", "---\nname: deploy\ndescription: Ship the app\ntriggers: deploy, release\n---\nRun make deploy.\n")
//!     .unwrap();
//! let found = catalog.match_message("how do I deploy this?");
//! assert_eq!(found.bodies[0].name, "deploy");
//! assert_eq!(found.bodies[0].body, "Run make deploy.");
//! ```
//!
//! What this crate deliberately does not do: it fetches nothing from skill
//! registries, runs no skill scripts, reads no environment variables or
//! config files (the binary turns its settings into [`SkillsConfig`]) and
//! calls no model: [`auto`] receives skills the host's consolidation
//! extracted, stages them for review and retires them when unused. Writes
//! only ever touch the home's `skills/` directory.

#![warn(missing_docs)]

mod audit;
pub mod auto;
mod catalog;
mod clock;
pub mod constants;
mod delivery;
mod edit;
mod error;
mod frontmatter;
mod fsutil;
mod ledger;
mod lint;
mod name;
mod search;
mod session;
mod skill;
mod text;
mod triggers;

pub use audit::{AuditSink, MemoryAudit, NullAudit, SkillAuditAction, SkillAuditEvent};
pub use catalog::{SeedReport, SkillCatalog, SkillListing, SkillsConfig};
pub use clock::{ManualSkillClock, SkillClock, SystemSkillClock};
pub use delivery::{DeliveredSkill, DeliveryReason, MessageSkills, SkillHint, TriggerMatch, WithheldSkill};
pub use edit::{Change, FieldUpdate};
pub use error::{Result, SkillsError};
pub use frontmatter::{FrontmatterError, SkillMeta, Split, parse_mapping, parse_strict, split};
pub use ledger::{UsageEntry, UsageLedger};
pub use lint::{LintFinding, LintReport, LintSeverity, lint_path, lint_skill_dir, parse_frontmatter, read_properties};
pub use name::{sanitize_name, validate_name};
pub use search::{MatchedIn, SearchHit};
pub use session::{AlwaysSkill, IndexEntry, SessionView};
pub use skill::{Skill, SkillSource};
