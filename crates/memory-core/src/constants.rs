//! Every number the specification fixes for `memory.db`, in one place.

/// Key format of a semantic entry: lower-case, starts with a letter, ends
/// with a letter or digit, dots and underscores in between.
pub const KEY_PATTERN: &str = r"^[a-z][a-z0-9_.]*[a-z0-9]$";
/// Longest accepted key, in characters.
pub const MAX_KEY_CHARS: usize = 100;
/// Longest accepted value, in bytes of its compact JSON serialisation.
pub const MAX_VALUE_BYTES: usize = 4_096;
/// Key prefixes every store accepts; configuration can add more.
pub const BUILTIN_PREFIXES: [&str; 4] = ["pref.", "project.", "user.", "lesson."];
/// Prefix of the keys lessons are stored under.
pub const LESSON_PREFIX: &str = "lesson.";
/// The highest `version` a semantic row may hold (2^53: exact in a JSON
/// double, and far beyond any count of real changes). A restore refuses a
/// larger one and a change of a row already there is refused rather than
/// overflowing the column (which SQLite would turn into a REAL and
/// PostgreSQL refuse as out of range).
pub const MAX_SEMANTIC_VERSION: i64 = 1 << 53;

/// Confidence an automated (not user-explicit) write needs to be accepted.
pub const CONFIDENCE_THRESHOLD: f64 = 0.8;
/// Two confidences this close count as equal, and the newer write wins.
pub const CONFIDENCE_EQUAL_BAND: f64 = 0.1;

/// Rows the audit trail keeps; older rows are trimmed in the inserting transaction.
pub const MAX_AUDIT_EVENTS: i64 = 10_000;

/// Weight of the cosine score in hybrid semantic retrieval.
pub const SEMANTIC_VECTOR_WEIGHT: f64 = 0.6;
/// Weight of the keyword score in hybrid semantic retrieval.
pub const SEMANTIC_KEYWORD_WEIGHT: f64 = 0.4;
/// A query word found in a key counts this many times a match in a value.
pub const KEY_MATCH_WEIGHT: f64 = 3.0;

/// Confidence of a lesson the user taught (and of every lesson not migrated or imported).
pub const LESSON_CONFIDENCE_USER: f64 = 1.0;
/// Confidence of a lesson carried over by migration.
pub const LESSON_CONFIDENCE_MIGRATION: f64 = 0.9;
/// Confidence of an imported lesson: foreign provenance, like a migrated one.
pub const LESSON_CONFIDENCE_IMPORT: f64 = LESSON_CONFIDENCE_MIGRATION;
/// Share of the smaller keyword set two lessons must share to be the same topic.
pub const LESSON_TOPIC_OVERLAP: f64 = 0.5;
/// Cosine above which two lessons are duplicates (the longer text wins).
pub const LESSON_EMBEDDING_DUPLICATE: f32 = 0.85;
/// Lessons rendered into the `[Learned corrections]` block.
pub const MAX_LESSONS_IN_CONTEXT: usize = 50;
/// Lessons the JSONL fallback store keeps; the oldest are pruned beyond this.
pub const MAX_JSONL_LESSONS: usize = 200;
/// Hex characters of the hash in a `lesson.<hash>` key.
pub const LESSON_HASH_HEX_CHARS: usize = 16;

/// Separator between a lesson's rule and its negative form.
pub const LESSON_NOT_SEPARATOR: &str = " — NOT: ";
/// First line of the semantic context block.
pub const SEMANTIC_BLOCK_HEADER: &str = "[Semantic Memory]";
/// First line of the lessons context block.
pub const LESSONS_BLOCK_HEADER: &str = "[Learned corrections]";
/// Second line of the lessons context block: what makes lessons top the ladder.
pub const LESSONS_BLOCK_INSTRUCTION: &str = "ALWAYS follow these. They override default behavior.";

/// Characters of a refused value kept (after redaction) in its audit row.
pub const AUDIT_SNIPPET_CHARS: usize = 200;
/// How long a writer waits for another process's transaction, in milliseconds.
pub const BUSY_TIMEOUT_MS: u64 = 10_000;
/// Idle read connections kept open for reuse.
pub const MAX_IDLE_READERS: usize = 8;
/// Page cache per connection, in KiB (`PRAGMA cache_size = -N`). Every
/// commit by another connection empties it, so more buys little; with the
/// writer and up to eight idle readers it bounds the caches at 72 MiB.
pub const PAGE_CACHE_KIB: i64 = 8 * 1024;
/// File name of the database inside Cairn's home.
pub const DB_FILE_NAME: &str = "memory.db";
/// The episodic vector index snapshot, beside [`DB_FILE_NAME`]: loaded at
/// start when it holds exactly the table's active vectors, rebuilt otherwise.
pub const EPISODIC_INDEX_FILE_NAME: &str = "episodic.index";
/// The full vectors of an episodic index that keeps codes only
/// ([`EPISODIC_FULL_VECTORS_MAX`]), beside [`DB_FILE_NAME`]: searches
/// re-score their hits from it instead of reading the rows' vectors from
/// the store. Tied to the store and the embedding space, not to a
/// revision (a row's vector never changes); rows written after it are
/// read from the store until it is written again.
pub const EPISODIC_VECTORS_FILE_NAME: &str = "episodic.vectors";
/// File name of the JSONL lesson fallback inside Cairn's home.
pub const LESSONS_JSONL_FILE_NAME: &str = "lessons.jsonl";

/// Days of history the decaying walk looks at (days 0 to 180).
pub const HISTORY_WINDOW_DAYS: u32 = 181;
/// Days of history rendered in full, with timestamps, by default.
pub const HISTORY_FULL_DAYS: u32 = 14;
/// Days younger than this (and past the full days) show their header, first
/// entry and `…N more entries`; older days in the window show a count only.
pub const HISTORY_HEADER_DAYS: u32 = 61;
/// How long a rendered history window is reused, in milliseconds.
pub const HISTORY_CACHE_TTL_MS: i64 = 5_000;
/// Day files older than this many days are deleted by pruning.
pub const HISTORY_KEEP_DAYS: u32 = 365;
/// Default cap of the preferences section of the files context, in characters.
pub const PREFERENCES_CAP_CHARS: usize = 4_290;
/// Default cap of the projects section of the files context, in characters.
pub const PROJECTS_CAP_CHARS: usize = 6_435;
/// Default cap of the history section of the files context, in characters.
pub const HISTORY_CAP_CHARS: usize = 25_000;
/// Last line of a context section cut to its cap.
pub const TRUNCATION_MARKER: &str = "…[truncated]";
/// File name of the keyword index over the Markdown files, inside Cairn's home.
pub const INDEX_FILE_NAME: &str = "memory_index.db";
/// Schema version of the keyword index; another value means "rebuild".
pub const INDEX_SCHEMA_VERSION: &str = "2";
/// Distinct terms of a keyword query kept; the rest are ignored.
pub const MAX_SEARCH_QUERY_TERMS: usize = 32;
/// Heartbeat ticks between full rebuilds of the keyword index.
pub const FTS_REBUILD_TICKS: u64 = 15;
/// Heartbeat ticks between history prunes (once a day at a 60 s tick).
pub const PRUNE_TICKS: u64 = 1_440;
/// Shortest accepted episodic text, in characters (after trimming).
pub const EPISODIC_MIN_CHARS: usize = 10;
/// Longest accepted episodic text, in characters (after trimming).
pub const EPISODIC_MAX_CHARS: usize = 2_000;
/// A new episodic row whose cosine to an active row is above this is a duplicate.
pub const EPISODIC_DEDUP_COSINE: f32 = 0.88;
/// Active episodic rows kept; a write beyond it evicts the lowest importance, then the oldest.
pub const EPISODIC_DEFAULT_CAP: usize = 10_000;
/// Connections a PostgreSQL store keeps open at most, by default.
pub const POSTGRES_DEFAULT_POOL_SIZE: usize = 8;
/// Default importance of an episodic row.
pub const EPISODIC_DEFAULT_IMPORTANCE: f64 = 0.5;
/// Results rendered into the `[Episodic Memory]` block.
pub const EPISODIC_CONTEXT_LIMIT: usize = 8;
/// Longest fragment of one episodic row in the context block, in characters.
pub const EPISODIC_FRAGMENT_CHARS: usize = 1_500;
/// Largest `[Episodic Memory]` block, in characters (the caller's cap may be lower).
pub const EPISODIC_INJECT_CAP: usize = 3_000;
/// First line of the episodic context block.
pub const EPISODIC_BLOCK_HEADER: &str = "[Episodic Memory]";
/// Tags kept per episodic row.
pub const EPISODIC_MAX_TAGS: usize = 10;
/// Longest tag, in characters; longer tags are cut.
pub const EPISODIC_MAX_TAG_CHARS: usize = 32;
/// Longest `source_ref`, in characters.
pub const EPISODIC_MAX_SOURCE_REF_CHARS: usize = 200;
/// Rows embedded per batch by a backfill or a re-embed.
pub const EPISODIC_BACKFILL_BATCH: usize = 32;
/// Active vectors above which the episodic vector index keeps SQ8 codes
/// only (about 0.55 KB a row instead of 2.1 KB) and searches re-score its
/// hits with the stored vectors, so every cosine they use stays exact.
pub const EPISODIC_FULL_VECTORS_MAX: usize = 50_000;
/// Rows of the in-memory keyword index from which a search runs its
/// keyword lookup on a thread of its own, beside the vector lookup and the
/// store's reads (below, starting the thread costs more than it saves).
pub const EPISODIC_KEYWORD_SEARCH_BESIDE_ROWS: usize = 50_000;
/// Rows of a codes-only index its vector file may lack before
/// [`MemoryDb::save_episodic_index`](crate::MemoryDb::save_episodic_index)
/// writes the file again: this many, or a fiftieth of the index if more.
pub const EPISODIC_VECTOR_FILE_STALE_ROWS: usize = 1_000;
/// Active vectors above which a search does not scan the stored vectors
/// while the index is first loaded or built (the scan costs about 5 µs a
/// row): it answers from the keyword path alone meanwhile, each candidate's
/// cosine read from its stored vector. Writes still scan, so near-duplicate
/// detection never lapses.
pub const EPISODIC_SCAN_MAX_ROWS: usize = 50_000;
/// Rows a term may match and still be searched by the FTS5 keyword
/// fallback (which answers while a large store's in-memory keyword index is
/// first built): a term in more rows is dropped from that query when a
/// rarer one is left.
pub const FTS_COMMON_TERM_ROWS: i64 = 20_000;
/// Candidates taken from each of the vector and the keyword lists in hybrid retrieval.
pub const HYBRID_CANDIDATES: usize = 100;
/// The `k` of reciprocal-rank fusion: a list's rank `r` (from 1) adds `1 / (k + r)`.
pub const RRF_K: f64 = 60.0;
/// Weight of the cosine in the weighted-sum fusion (the keyword score, bm25
/// over the query's best bm25, gets the rest). The default fusion: a convex
/// combination of scores normalised by their theoretical minimum (0) and
/// the best of the query. Chosen with the prior weight and MMR by
/// leave-one-conversation-out evaluation on the LoCoMo dev split (every
/// fold picks 0.7 when the prior is off; `BENCHMARKS.md`).
pub const WEIGHTED_FUSION_VECTOR_WEIGHT: f64 = 0.7;
/// How much importance and age move a hybrid score: the fused score is
/// multiplied by `(1 − w) + w × (0.7 + 0.3 × importance) × exp(−0.03 × days)`.
/// At 1 this is the specification's factor. 0 by default: in the
/// leave-one-conversation-out evaluation a weight of 0.25 did not beat 0,
/// so importance and age do not reorder hybrid results unless asked to.
pub const HYBRID_PRIOR_WEIGHT: f64 = 0.0;
/// Speaker match: a row whose `Name:` prefix is a name the query contains
/// scores `× (1 + this)` in hybrid and keyword modes; a chat transcript's
/// `User:` rows are named by a question in the first person and its
/// `Assistant:` rows by one in the second person. Chosen by
/// leave-one-conversation-out cross-validation over LoCoMo-dev and
/// longchat-dev (`BENCHMARKS.md`).
pub const EPISODIC_SPEAKER_BOOST: f64 = 0.15;
/// Neighbouring turns: a row next to one of the top `limit` rows (row id
/// ± 1, written within [`EPISODIC_NEIGHBOUR_MAX_GAP_MS`]) scores at least
/// this share of that row's score. Off: no fold of the cross-validation
/// chose 0.6 or 0.85 (`BENCHMARKS.md`); `--neighbour-weight` turns it on.
pub const EPISODIC_NEIGHBOUR_WEIGHT: f64 = 0.0;
/// Largest gap between the creation times of two neighbouring rows (30 minutes).
pub const EPISODIC_NEIGHBOUR_MAX_GAP_MS: i64 = 30 * 60 * 1_000;
/// Time expressions: a row created inside the window the query names
/// scores `× (1 + this)`. Chosen by the same cross-validation.
pub const EPISODIC_TIME_BOOST: f64 = 0.25;
/// Same sitting: a row written within [`EPISODIC_NEIGHBOUR_MAX_GAP_MS`] of
/// one of the best [`EPISODIC_SESSION_ANCHORS`] rows of a search (not one of
/// them) scores `× (1 + this)`: the evidence for a question is often spread
/// over a few turns of one conversation, and the best hits say which one
/// (the cluster hypothesis). Chosen by the leave-one-conversation-out
/// cross-validation over LoCoMo-dev and longchat-dev (`BENCHMARKS.md`).
pub const EPISODIC_SESSION_BOOST: f64 = 0.1;
/// Weighted fusion scales a hit's bm25 by the best hit's bm25, or by this
/// share of the query's bm25 ceiling (each query term's idf × (k1 + 1))
/// when the best hit stays under it: a query whose only match is a common
/// word ("now") then gives that match a small keyword score instead of a
/// full one. 0 keeps the best hit's scale. Chosen by the
/// leave-one-conversation-out cross-validation over LoCoMo-dev and the long
/// chats (`BENCHMARKS.md`): 0.1 in every fold, against 0, 0.15 and 0.25.
pub const EPISODIC_KEYWORD_CEILING_SHARE: f64 = 0.1;
/// Hybrid mode: MMR's λ (relevance against novelty, Jaccard on word sets),
/// by default the specification's ([`cairn_memory_vector::constants::MMR_LAMBDA`]).
/// 0.7 won every fold of the cross-validation over LoCoMo-dev and the long
/// chats on its objective but, held out, traded R@3 on one kind of data
/// against the other for almost nothing (`BENCHMARKS.md`), so it is an
/// option (`EpisodicQuery::mmr_lambda`, `--mmr-lambda`), not the default.
pub const EPISODIC_HYBRID_MMR_LAMBDA: f32 = cairn_memory_vector::constants::MMR_LAMBDA;
/// Weighted fusion: a row whose raw cosine to the query stays under this
/// gets no keyword score unless its match is strong by itself (bm25 of at
/// least [`EPISODIC_STRONG_KEYWORD_SHARE`] of the query's ceiling). bm25 is
/// scaled by the best hit's, so a row sharing one common word with the
/// query ("now") otherwise scores a full keyword weight however unrelated
/// the model finds it. Chosen by the leave-one-conversation-out
/// cross-validation over LoCoMo-dev and longchat-dev (`BENCHMARKS.md`);
/// 0 turns it off.
pub const EPISODIC_KEYWORD_MIN_COSINE: f64 = 0.2;
/// A keyword match holding at least this share of the query's bm25
/// ceiling counts whatever the cosine: an exact identifier, an error code
/// or a name the embedding model does not place near the query. (A row
/// holding every query term once, at the average length, reaches 1 / (k1 + 1)
/// = 0.4 of the ceiling.) Chosen by the same cross-validation.
pub const EPISODIC_STRONG_KEYWORD_SHARE: f64 = 0.25;
/// How many of the best rows mark the sessions [`EPISODIC_SESSION_BOOST`] lifts.
pub const EPISODIC_SESSION_ANCHORS: usize = 3;
/// The thread of a conversation: each of the best
/// [`EPISODIC_THREAD_ANCHORS`] rows of a search lifts the rows that carry
/// its thread on to at least this share of its score: the same speaker's
/// turns just before and after it in the sitting (a story told over several
/// turns), and, when it asks a question, the next turn, by another speaker
/// (the answer). Chosen by the leave-one-conversation-out cross-validation
/// over LoCoMo-dev and longchat-dev (`BENCHMARKS.md`); 0 turns it off.
pub const EPISODIC_THREAD_WEIGHT: f64 = 0.8;
/// How many of the best rows lift their thread ([`EPISODIC_THREAD_WEIGHT`]).
pub const EPISODIC_THREAD_ANCHORS: usize = 3;
/// The thread never lifts a row above the score of the row ranked this far
/// (it stops just under it), so the best rows keep their places: on long
/// chats a best row's own neighbouring turns (another request, another
/// answer) otherwise fill ranks 2 and 3. 0 leaves the lift uncapped.
/// Chosen by the same cross-validation, over short-turn and long-chat
/// conversations (`BENCHMARKS.md`).
pub const EPISODIC_THREAD_KEEP: usize = 3;
/// How far (in rows written, each way) the same speaker's next turn is
/// looked for: 2 is the next turn but one, the speaker's own in a
/// conversation of two.
pub const EPISODIC_THREAD_REACH: i64 = 2;
/// Keyword admission into the context block, for a hit under the cosine
/// gate: it must be among this many best bm25 hits...
pub const KEYWORD_ADMISSION_MAX_RANK: usize = 3;
/// ...and contain at least this share of the query's distinct terms (stemmed).
pub const KEYWORD_ADMISSION_MIN_COVERAGE: f64 = 0.5;
/// Query terms kept by the keyword sanitiser (the first ones, in query order).
pub const FTS_MAX_QUERY_TERMS: usize = 32;
/// Active episodic rows up to which the in-memory keyword index is built
/// inline by the first keyword search; larger stores build it on a
/// background thread while keyword search runs on FTS5.
pub const KEYWORD_INLINE_BUILD: usize = 20_000;
/// Shortest word that is a keyword term, in characters: shorter ones are left
/// out of FTS5 queries (as stopwords are) and of the in-memory keyword index.
pub const FTS_MIN_TERM_CHARS: usize = 2;
/// Shortest old semantic value (in characters) whose quotes retire episodic rows.
pub const STALE_QUOTE_MIN_CHARS: usize = 4;
/// New messages in a session that fire the preferences consolidation path.
pub const CONSOLIDATION_MESSAGE_THRESHOLD: usize = 30;
/// Idle time after which the history consolidation path fires (3 h).
pub const CONSOLIDATION_IDLE_SECS: u64 = 3 * 60 * 60;
/// Semantic items one consolidation may write.
pub const MAX_SEMANTIC_PER_CONSOLIDATION: usize = 20;
/// Episodic items one consolidation may write.
pub const MAX_EPISODIC_PER_CONSOLIDATION: usize = 10;
/// Lessons one consolidation may write.
pub const MAX_LESSONS_PER_CONSOLIDATION: usize = 10;
/// Characters of transcript a consolidation prompt carries (the newest messages win).
pub const MAX_PROMPT_TRANSCRIPT_CHARS: usize = 60_000;
/// Longest stored transcript message; longer text is cut (a prompt shows at
/// most [`MAX_PROMPT_TRANSCRIPT_CHARS`] of a whole transcript).
pub const MAX_TRANSCRIPT_MESSAGE_CHARS: usize = MAX_PROMPT_TRANSCRIPT_CHARS;
/// Most messages stored per session; the oldest go first past it.
pub const MAX_TRANSCRIPT_MESSAGES: usize = 2_000;
/// Consolidated messages kept per session as thread history for a resume.
pub const TRANSCRIPT_KEEP_CONSOLIDATED: usize = 50;
/// Longest evidence quote a consolidated row may carry, in characters.
pub const MAX_EVIDENCE_QUOTE_CHARS: usize = 300;
/// Decided consolidation runs (applied, rejected, expired, reverted) kept
/// in `memory.db`, newest first; a revert reaches back this far at most.
/// Pending changesets are kept until decided or expired.
pub const MAX_CONSOLIDATION_RUNS_KEPT: usize = 200;
/// Phrases that mark a later message as retracting an earlier statement
/// (matched on the lower-cased, whitespace-folded text, at word
/// boundaries): the dead-end rule of consolidation.
pub const RETRACTION_PHRASES: &[&str] = &[
    "that was wrong",
    "that's wrong",
    "that is wrong",
    "i was wrong",
    "was a mistake",
    "my mistake",
    "not true",
    "not correct",
    "didn't work",
    "did not work",
    "doesn't work",
    "does not work",
    "won't work",
    "reverted",
    "revert that",
    "revert it",
    "rolled back",
    "roll it back",
    "scratch that",
    "never mind",
    "nevermind",
    "ignore that",
    "forget that",
    "dead end",
    "abandoned",
    "gave up on",
    "no longer true",
    "false alarm",
];
/// Keywords a later retracting message must share with a statement's
/// quote to retract it (unless it is the very next message).
pub const RETRACTION_SHARED_KEYWORDS: usize = 2;
/// Longest session key.
pub const MAX_SESSION_KEY_CHARS: usize = 256;
/// How long a consolidation run holds a session against other processes
/// (a run that crashed frees it after this).
pub const CONSOLIDATION_CLAIM_MS: i64 = 15 * 60 * 1_000;
/// File name of the persisted consolidation and migration state, inside Cairn's home.
pub const MEMORY_STATE_FILE_NAME: &str = "memory_state.json";
/// Lock file serialising updates of the state file.
pub const MEMORY_STATE_LOCK_FILE_NAME: &str = "memory_state.lock";
/// Confidence of a preference carried over from `preferences.md`.
pub const MIGRATION_SEMANTIC_CONFIDENCE: f64 = 0.85;
/// Importance of an episodic row carried over from a history day file.
pub const MIGRATION_EPISODIC_IMPORTANCE: f64 = 0.4;
/// File name of the provenance ledger older homes kept for imports of export
/// documents (content hashes), inside Cairn's home. The ledger is now the
/// store's `import_provenance` table; an import moves such a file into it.
pub const IMPORT_LEDGER_FILE_NAME: &str = "import_ledger.txt";
/// The `import_provenance` source of rows imported from an export document.
pub const EXPORT_LEDGER_SOURCE: &str = "cairn-export";
/// Lessons one import may add (the JSONL store keeps only 200).
pub const MAX_IMPORTED_LESSONS: usize = 50;
/// Largest foreign-agent file (Claude Code, Hermes, OpenClaw) an import reads, in bytes.
pub const MAX_FOREIGN_FILE_BYTES: u64 = 1024 * 1024;
/// Directory entries a foreign import reads from one directory; more are reported, not read.
pub const MAX_FOREIGN_DIR_ENTRIES: usize = 1_000;
/// Hermes profiles a foreign import scans.
pub const MAX_HERMES_PROFILES: usize = 50;
/// Confidence of a `user.*` fact carried over from another agent's files.
pub const FOREIGN_FACT_CONFIDENCE: f64 = MIGRATION_SEMANTIC_CONFIDENCE;

/// How much wider a search's candidate pools are when it reads some scopes
/// only: rows of other projects are dropped after the indexes answer, so
/// a project among many still fills its results.
pub const SCOPE_POOL_FACTOR: usize = 4;
