//! The schema of `memory.db` and its forward migrations.
//!
//! `PRAGMA user_version` holds the number of migrations applied. Opening a
//! file runs the missing ones in one `BEGIN IMMEDIATE` transaction, so two
//! processes opening a fresh file at once migrate it exactly once. A file
//! from a newer build (a higher version) is refused rather than guessed at.

use rusqlite::{Connection, TransactionBehavior};

use crate::error::{MemoryError, Result};

/// Migration `n` (1-based) brings the schema from version `n - 1` to `n`.
const MIGRATIONS: &[&str] = &[
    // 1: semantic entries, episodic rows with their keyword index, audit trail.
    r#"
    CREATE TABLE semantic_memory (
        key             TEXT PRIMARY KEY NOT NULL,
        value           TEXT NOT NULL,
        confidence      REAL NOT NULL,
        source          TEXT NOT NULL,
        category        TEXT,
        created_at      INTEGER NOT NULL,
        updated_at      INTEGER NOT NULL,
        is_deleted      INTEGER NOT NULL DEFAULT 0,
        version         INTEGER NOT NULL DEFAULT 1,
        embedding_space TEXT
    ) WITHOUT ROWID;
    -- Vectors live apart so scans of the (small) entry rows never page
    -- through 1.5 KB blobs; `semantic_memory.embedding_space` says whether
    -- and in which space a vector is stored.
    CREATE TABLE semantic_vectors (
        key             TEXT PRIMARY KEY NOT NULL,
        embedding       BLOB NOT NULL
    );

    CREATE TABLE episodic_memories (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,
        text            TEXT NOT NULL,
        tags            TEXT NOT NULL DEFAULT '[]',
        importance      REAL NOT NULL DEFAULT 0.5,
        source          TEXT NOT NULL DEFAULT '',
        session_key     TEXT,
        created_at      INTEGER NOT NULL,
        last_accessed   INTEGER,
        is_deleted      INTEGER NOT NULL DEFAULT 0,
        embedding       BLOB,
        embedding_space TEXT
    );
    CREATE INDEX episodic_live ON episodic_memories(is_deleted, importance, created_at);
    CREATE VIRTUAL TABLE episodic_fts USING fts5(
        text, tags, content='episodic_memories', content_rowid='id'
    );
    CREATE TRIGGER episodic_fts_insert AFTER INSERT ON episodic_memories BEGIN
        INSERT INTO episodic_fts(rowid, text, tags) VALUES (new.id, new.text, new.tags);
    END;
    CREATE TRIGGER episodic_fts_delete AFTER DELETE ON episodic_memories BEGIN
        INSERT INTO episodic_fts(episodic_fts, rowid, text, tags) VALUES ('delete', old.id, old.text, old.tags);
    END;
    CREATE TRIGGER episodic_fts_update AFTER UPDATE OF text, tags ON episodic_memories BEGIN
        INSERT INTO episodic_fts(episodic_fts, rowid, text, tags) VALUES ('delete', old.id, old.text, old.tags);
        INSERT INTO episodic_fts(rowid, text, tags) VALUES (new.id, new.text, new.tags);
    END;

    -- Plain INTEGER PRIMARY KEY (no AUTOINCREMENT, which costs a
    -- sqlite_sequence write per insert): rows are only ever trimmed from the
    -- oldest end, so the newest id never goes back and ids stay monotonic.
    CREATE TABLE memory_events (
        id          INTEGER PRIMARY KEY,
        at          INTEGER NOT NULL,
        memory_type TEXT NOT NULL,
        action      TEXT NOT NULL,
        key         TEXT,
        old_value   TEXT,
        new_value   TEXT,
        source      TEXT,
        confidence  REAL,
        detail      TEXT
    );

    CREATE TABLE meta (
        name  TEXT PRIMARY KEY NOT NULL,
        value INTEGER NOT NULL
    ) WITHOUT ROWID;
    INSERT INTO meta(name, value) VALUES ('semantic_revision', 0);
    "#,
    // 2: episodic provenance (`source_ref`), exact-text dedup, a revision
    // counter that tells every process when its in-memory vector index is
    // stale, the recorded embedding space, and a stemming keyword index.
    r#"
    ALTER TABLE episodic_memories ADD COLUMN source_ref TEXT;
    CREATE INDEX episodic_live_text ON episodic_memories(text) WHERE is_deleted = 0;
    CREATE INDEX episodic_space ON episodic_memories(embedding_space) WHERE is_deleted = 0;
    INSERT INTO meta(name, value) VALUES ('episodic_revision', 0);
    CREATE TABLE settings (
        name  TEXT PRIMARY KEY NOT NULL,
        value TEXT NOT NULL
    ) WITHOUT ROWID;

    DROP TRIGGER episodic_fts_insert;
    DROP TRIGGER episodic_fts_delete;
    DROP TRIGGER episodic_fts_update;
    DROP TABLE episodic_fts;
    CREATE VIRTUAL TABLE episodic_fts USING fts5(
        text, tags, content='episodic_memories', content_rowid='id', tokenize='porter unicode61'
    );
    INSERT INTO episodic_fts(episodic_fts) VALUES ('rebuild');
    CREATE TRIGGER episodic_fts_insert AFTER INSERT ON episodic_memories BEGIN
        INSERT INTO episodic_fts(rowid, text, tags) VALUES (new.id, new.text, new.tags);
    END;
    CREATE TRIGGER episodic_fts_delete AFTER DELETE ON episodic_memories BEGIN
        INSERT INTO episodic_fts(episodic_fts, rowid, text, tags) VALUES ('delete', old.id, old.text, old.tags);
    END;
    CREATE TRIGGER episodic_fts_update AFTER UPDATE OF text, tags ON episodic_memories BEGIN
        INSERT INTO episodic_fts(episodic_fts, rowid, text, tags) VALUES ('delete', old.id, old.text, old.tags);
        INSERT INTO episodic_fts(rowid, text, tags) VALUES (new.id, new.text, new.tags);
    END;
    "#,
    // 3: the keyword index holds active rows only, in a contentless table
    // whose rows are deleted by rowid. A keyword search then never reads
    // the (vector-carrying) episodic rows to drop tombstones, and keeping
    // the index in step no longer depends on replaying a row's old text.
    r#"
    DROP TRIGGER episodic_fts_insert;
    DROP TRIGGER episodic_fts_delete;
    DROP TRIGGER episodic_fts_update;
    DROP TABLE episodic_fts;
    CREATE VIRTUAL TABLE episodic_fts USING fts5(
        text, tags, content='', contentless_delete=1, tokenize='porter unicode61'
    );
    INSERT INTO episodic_fts(rowid, text, tags)
        SELECT id, text, tags FROM episodic_memories WHERE is_deleted = 0;
    -- Bumped on every change to the active rows' text, so in-memory
    -- keyword indexes (in any process) know when they are behind.
    INSERT INTO meta(name, value) VALUES ('episodic_text_revision', 0);
    CREATE TRIGGER episodic_fts_insert AFTER INSERT ON episodic_memories WHEN new.is_deleted = 0 BEGIN
        INSERT INTO episodic_fts(rowid, text, tags) VALUES (new.id, new.text, new.tags);
        UPDATE meta SET value = value + 1 WHERE name = 'episodic_text_revision';
    END;
    CREATE TRIGGER episodic_fts_delete AFTER DELETE ON episodic_memories WHEN old.is_deleted = 0 BEGIN
        DELETE FROM episodic_fts WHERE rowid = old.id;
        UPDATE meta SET value = value + 1 WHERE name = 'episodic_text_revision';
    END;
    CREATE TRIGGER episodic_fts_update AFTER UPDATE OF text, tags, is_deleted ON episodic_memories
    WHEN old.is_deleted = 0 OR new.is_deleted = 0 BEGIN
        DELETE FROM episodic_fts WHERE rowid = old.id AND old.is_deleted = 0;
        INSERT INTO episodic_fts(rowid, text, tags) SELECT new.id, new.text, new.tags WHERE new.is_deleted = 0;
        UPDATE meta SET value = value + 1 WHERE name = 'episodic_text_revision';
    END;
    "#,
    // 4: a random identity for this database file, so files derived from it
    // (the episodic index snapshot) are never taken for another store's.
    r#"
    INSERT INTO meta(name, value) VALUES ('store_id', random());
    "#,
    // 5: session transcripts and their consolidation markers, so a restart
    // neither skips nor repeats a message (the markers once lived in
    // memory_state.json and counted messages of a transcript held only in
    // memory; those counts describe nothing that still exists and are not
    // carried over).
    r#"
    CREATE TABLE session_state (
        session_key        TEXT PRIMARY KEY NOT NULL,
        next_seq           INTEGER NOT NULL DEFAULT 0,
        history_marker     INTEGER NOT NULL DEFAULT 0,
        preferences_marker INTEGER NOT NULL DEFAULT 0,
        last_activity      INTEGER NOT NULL,
        claim_owner        INTEGER,
        claim_until        INTEGER
    ) WITHOUT ROWID;
    CREATE INDEX session_state_pending ON session_state(last_activity) WHERE history_marker < next_seq;
    CREATE TABLE session_transcripts (
        session_key TEXT NOT NULL,
        seq         INTEGER NOT NULL,
        role        TEXT NOT NULL,
        content     TEXT NOT NULL,
        tool_calls  TEXT,
        created_at  INTEGER NOT NULL,
        PRIMARY KEY (session_key, seq)
    ) WITHOUT ROWID;
    "#,
    // 6: the provenance ledger of foreign-agent imports (Claude Code,
    // Hermes, OpenClaw): one row per item a writer decided, so re-applying
    // the same source changes nothing. It lives beside the memory it
    // describes, so a copy of memory.db keeps the two consistent.
    r#"
    CREATE TABLE import_provenance (
        source      TEXT NOT NULL,
        path        TEXT NOT NULL,
        item_hash   TEXT NOT NULL,
        landed_as   TEXT NOT NULL,
        outcome     TEXT NOT NULL,
        target      TEXT,
        recorded_at INTEGER NOT NULL,
        PRIMARY KEY (source, path, item_hash)
    ) WITHOUT ROWID;
    "#,
    // 7: scopes and forgetting. Every episodic row and session carries the
    // scope it belongs to (`global`, or a project's name); what a home held
    // before is global. A semantic row's scope is in its stored key (see
    // `scope.rs`). `forgotten` holds what a forget removed, as fingerprints
    // only (a hash of the normalised text and hashed word shingles, never
    // the text), so a later write of the same thing is refused.
    r#"
    ALTER TABLE episodic_memories ADD COLUMN scope TEXT NOT NULL DEFAULT 'global';
    ALTER TABLE session_state ADD COLUMN scope TEXT NOT NULL DEFAULT 'global';
    CREATE TABLE forgotten (
        id          INTEGER PRIMARY KEY,
        kind        TEXT NOT NULL,
        scope       TEXT NOT NULL,
        key         TEXT,
        fingerprint TEXT NOT NULL,
        shingles    BLOB NOT NULL,
        at          INTEGER NOT NULL
    );
    CREATE INDEX forgotten_fingerprint ON forgotten(fingerprint);
    "#,
    // 8: the evidence of rows consolidation wrote: the session and message
    // range each came from and a verbatim quote of the transcript. Rows
    // stored before it, and rows people write, have none.
    r#"
    CREATE TABLE memory_evidence (
        layer       TEXT NOT NULL,
        target      TEXT NOT NULL,
        session_key TEXT NOT NULL,
        first_seq   INTEGER NOT NULL,
        last_seq    INTEGER NOT NULL,
        quote       TEXT NOT NULL,
        PRIMARY KEY (layer, target)
    ) WITHOUT ROWID;
    "#,
    // 9: consolidation runs. A run under `memory.write_approval` is a
    // changeset waiting for review (`pending`); an applied run keeps what
    // it changed (each key's prior row, the episodic ids it inserted, the
    // Markdown it replaced) so the last runs can be reverted exactly. The
    // body is JSON only memory-core reads.
    r#"
    CREATE TABLE consolidation_runs (
        id         INTEGER PRIMARY KEY,
        state      TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        body       TEXT NOT NULL
    );
    "#,
    // 10: the counts of active and tombstoned episodic rows, kept by
    // triggers, so a write checks the cap and a search sizes the index
    // without counting a table of a million rows; and the ids of the rows
    // with a vector, listed from an index without reading the rows (an
    // index snapshot is checked against them at every start).
    r#"
    CREATE INDEX episodic_vector_ids ON episodic_memories(embedding_space, id)
        WHERE is_deleted = 0 AND embedding IS NOT NULL;
    INSERT INTO meta(name, value) SELECT 'episodic_live', count(*) FROM episodic_memories WHERE is_deleted = 0;
    INSERT INTO meta(name, value) SELECT 'episodic_deleted', count(*) FROM episodic_memories WHERE is_deleted <> 0;
    CREATE TRIGGER episodic_count_insert AFTER INSERT ON episodic_memories BEGIN
        UPDATE meta SET value = value + 1
        WHERE name = CASE WHEN new.is_deleted = 0 THEN 'episodic_live' ELSE 'episodic_deleted' END;
    END;
    CREATE TRIGGER episodic_count_delete AFTER DELETE ON episodic_memories BEGIN
        UPDATE meta SET value = value - 1
        WHERE name = CASE WHEN old.is_deleted = 0 THEN 'episodic_live' ELSE 'episodic_deleted' END;
    END;
    CREATE TRIGGER episodic_count_update AFTER UPDATE OF is_deleted ON episodic_memories
    WHEN (old.is_deleted = 0) <> (new.is_deleted = 0) BEGIN
        UPDATE meta SET value = value + (CASE WHEN new.is_deleted = 0 THEN 1 ELSE -1 END)
        WHERE name = 'episodic_live';
        UPDATE meta SET value = value + (CASE WHEN new.is_deleted = 0 THEN -1 ELSE 1 END)
        WHERE name = 'episodic_deleted';
    END;
    "#,
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The SQL of migration `index` (0-based), for tests that build old stores.
#[cfg(test)]
pub(crate) fn migration(index: usize) -> &'static str {
    MIGRATIONS[index]
}

/// Brings the database up to [`SCHEMA_VERSION`].
pub(crate) fn migrate(connection: &mut Connection) -> Result<i64> {
    let transaction = connection
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(MemoryError::sqlite("starting the schema migration"))?;
    let found: i64 = transaction
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(MemoryError::sqlite("reading the schema version"))?;
    if found > SCHEMA_VERSION {
        return Err(MemoryError::SchemaTooNew { found, supported: SCHEMA_VERSION });
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tracing::debug!(to = index + 1, "migrating memory.db");
        transaction.execute_batch(sql).map_err(MemoryError::sqlite("applying a schema migration"))?;
    }
    if found < SCHEMA_VERSION {
        transaction
            .pragma_update(None, "user_version", SCHEMA_VERSION)
            .map_err(MemoryError::sqlite("recording the schema version"))?;
    }
    transaction.commit().map_err(MemoryError::sqlite("committing the schema migration"))?;
    Ok(SCHEMA_VERSION)
}
