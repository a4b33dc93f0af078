//! The numbers the skill system runs on, in one place.

/// At most this many skills are flagged by the per-message trigger pass
/// (`skills.max_triggered`; 0 turns trigger flagging off).
pub const MAX_TRIGGERED: usize = 3;

/// Case-folded message words whose stems the trigger pass remembers
/// (least recently used first out). Stemming dominates the per-message
/// pass; a conversation's vocabulary fits easily.
pub const STEM_CACHE_WORDS: usize = 8_192;

/// Words longer than this (in bytes, case-folded) are stemmed each time,
/// not remembered: they are tokens and blobs, not vocabulary.
pub const STEM_CACHE_MAX_WORD_BYTES: usize = 40;

/// Usage-ledger entries not touched for this long are dropped on load and
/// on flush, so a stale skill stops occupying a top-K slot (30 days).
pub const USAGE_TTL_SECS: u64 = 30 * 24 * 60 * 60;

/// File name of the usage ledger inside the Cairn home.
pub const USAGE_FILENAME: &str = "skill-usage.json";

/// The ledger is written at most once per this many milliseconds by
/// [`crate::UsageLedger::maybe_flush`]; [`crate::UsageLedger::flush`] forces it.
pub const USAGE_FLUSH_DEBOUNCE_MS: u64 = 5_000;

/// How long the discovered skill list is reused before the roots are walked
/// again. Every write through the catalog invalidates it at once.
pub const ITER_CACHE_TTL_MS: u64 = 5_000;

/// A skill whose `SKILL.md` changed within this window ranks as if it had
/// [`NEW_SKILL_BOOST_HITS`] extra hits, so it escapes cold start.
pub const NEW_SKILL_BOOST_SECS: u64 = 7 * 24 * 60 * 60;

/// Extra hits granted to a new skill in the lazy-load ranking.
pub const NEW_SKILL_BOOST_HITS: u64 = 3;

/// Description length in a `[Relevant skills for this message]` line.
pub const HINT_DESCRIPTION_CHARS: usize = 160;

/// Description cap in the lazy-load session index (the Agent Skills limit).
pub const INDEX_DESCRIPTION_CHARS: usize = 1_024;

/// Largest `SKILL.md` the catalog writes.
pub const MAX_SKILL_FILE_BYTES: usize = 256 * 1024;

/// `skill_search` results: default and ceiling.
pub const SEARCH_DEFAULT_LIMIT: usize = 10;
/// Largest `limit` `skill_search` honours.
pub const SEARCH_MAX_LIMIT: usize = 50;
/// On a metadata miss, at most this many bytes of each body are scanned.
pub const SEARCH_BODY_SCAN_BYTES: usize = 32 * 1024;
/// On a metadata miss, at most this many bodies are scanned.
pub const SEARCH_BODY_SCAN_SKILLS: usize = 2_000;

/// Discovery does not descend deeper than this below a root.
pub const MAX_DISCOVERY_DEPTH: usize = 8;

/// Agent Skills `name`: at most 64 characters.
pub const SPEC_NAME_MAX_CHARS: usize = 64;
/// Agent Skills `description`: at most 1,024 characters.
pub const SPEC_DESCRIPTION_MAX_CHARS: usize = 1_024;
/// Agent Skills `compatibility`: at most 500 characters.
pub const SPEC_COMPATIBILITY_MAX_CHARS: usize = 500;
/// Agent Skills guidance: keep `SKILL.md` under 500 lines.
pub const SPEC_RECOMMENDED_MAX_LINES: usize = 500;

/// Top-level keys the Agent Skills specification allows.
pub const SPEC_ALLOWED_KEYS: &[&str] =
    &["name", "description", "license", "allowed-tools", "metadata", "compatibility"];

/// Cairn's own frontmatter keys (accepted at top level or under `metadata:`).
pub const CAIRN_KEYS: &[&str] = &["always", "triggers", "inject_on_trigger", "pinned", "version", "source"];

/// Heading of the per-message pointer block.
pub const HINT_HEADER: &str = "[Relevant skills for this message]";

/// Auto skills: a proposed procedure longer than this (characters) is
/// refused whole.
pub const AUTO_MAX_PROCEDURE_CHARS: usize = 10_240;
/// Auto skills: the largest Python helper (bytes).
pub const AUTO_MAX_SCRIPT_BYTES: usize = 4 * 1024;
/// Auto skills: the longest description (characters).
pub const AUTO_MAX_DESCRIPTION_CHARS: usize = 1_024;
/// Auto skills: most trigger phrases.
pub const AUTO_MAX_TRIGGERS: usize = 12;
/// Auto skills: the script checker's deadline (seconds).
pub const AUTO_SCRIPT_CHECK_SECS: u64 = 10;
/// Auto skills: Jaccard overlap of description words at or above which a
/// candidate is a near-duplicate (`skills.auto_similarity_threshold`).
pub const AUTO_SIMILARITY_THRESHOLD: f64 = 0.85;
/// Auto skills: live auto skills kept at most (`skills.max_auto_skills`).
pub const MAX_AUTO_SKILLS: usize = 100;
/// Auto skills: days without use before a skill is stale (`skills.stale_after_days`).
pub const AUTO_STALE_AFTER_DAYS: u64 = 30;
/// Auto skills: days without use before a skill is archived (`skills.archive_after_days`).
pub const AUTO_ARCHIVE_AFTER_DAYS: u64 = 90;
/// Auto skills: days a candidate waits for review (`skills.pending_ttl_days`).
pub const AUTO_PENDING_TTL_DAYS: u64 = 30;
/// Auto skills: a skill never used since it went live is neither staled
/// nor archived before this many days, whatever the other settings say.
pub const AUTO_NEVER_USED_GRACE_DAYS: u64 = 7;
