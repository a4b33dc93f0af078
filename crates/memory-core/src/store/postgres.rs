//! The PostgreSQL backend: the same rows in a PostgreSQL schema, shared by
//! many gateways.
//!
//! Writers on every gateway run at once and lose no update: a write
//! transaction holds one store-wide advisory lock *shared*, and before it
//! first reads the rows an invariant rests on it takes a transaction-scoped
//! advisory lock as narrow as that invariant (see [`PgTx`]): the key for
//! the conflict ladder, all lessons for lesson dedup, the episodic layer for
//! its dedup, cap and index revision. Writes to different keys therefore
//! commit concurrently; the same key waits, and then reads the committed
//! row (read committed), as SQLite's `BEGIN IMMEDIATE` would have it. A
//! restore or a migration holds the store lock exclusively. Reads run in
//! `REPEATABLE READ READ ONLY` transactions (one consistent snapshot) and
//! never wait for a writer. After a transaction that bumped a revision
//! commits, the gateway sends `NOTIFY cairn_<schema>` (`cairn_cairn` for
//! the default schema) from a connection of its own, to wake other
//! gateways' caches (see [`Announcer`]). The semantic counter is bumped in
//! the `COMMIT`'s own round trip, on one of 64 shard rows (by server
//! process) whose sum is the revision, so concurrent commits do not queue
//! on one row's lock while each flushes.
//!
//! Connections come from an `r2d2` pool of a set size, each keeping its
//! prepared statements. A transaction pipelines what it can: its `BEGIN`,
//! its locks and the writes whose answer nothing reads wait in a queue and
//! go to the server together with the next statement whose answer is read,
//! or with the `COMMIT`, so a semantic write is two round trips.
//!
//! Keys use the `"C"` collation, so listing order is byte order, as in SQLite.
//!
//! Keyword searches go to the in-memory keyword index; while a gateway
//! first builds it, [`EpisodicRows::episodic_keyword_hits`] answers from
//! `episodic_keywords`, the active rows' stemmed terms kept by a trigger
//! (migration 8). The text revision SQLite's triggers bump is bumped here
//! by the two writes that change the set of active texts.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, LazyLock};
use std::task::Poll;
use std::time::Duration;

use bytes::BytesMut;
use parking_lot::{Condvar, Mutex};
use postgres::error::SqlState;
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::{IsNull, ToSql, Type};
use postgres::{Client, NoTls, Statement};

use super::{
    AuditLog, Backend, Counter, EpisodicCounts, EpisodicRow, EpisodicRows, EpisodicText, EpisodicVectors, EventRecord,
    EvidenceLayer, EvidenceRow, EvidenceRows, ForgetRows, ForgottenRow, LedgerEntry, LedgerRows, MarkerColumn,
    NewEpisodicRow, Revisions, RunRow, RunRows, SemanticCounts, SemanticHead, SemanticRow, SemanticRows,
    SemanticUpsert, SemanticVectors, SessionMessage, SessionRow, StoreTx, StoredEvent, TranscriptRow, TranscriptRows,
    blob_vector, vector_blob,
};
use crate::bm25;
use crate::constants::{EXPORT_LEDGER_SOURCE, FTS_COMMON_TERM_ROWS, LESSON_PREFIX};
use crate::error::{MemoryError, Result, StorageError, StorageErrorKind};
use crate::keywords;

/// The layer name of the store lock ([`lock_id`] of the schema): every
/// write transaction holds it shared, a restore and a migration exclusively.
const STORE_LAYER: &str = "store";

/// Migration `n` (1-based) brings the schema from version `n - 1` to `n`.
const MIGRATIONS: &[&str] = &[
    // 1: the semantic layer (lessons included), its vectors, the audit trail and the revision counters.
    r#"
    CREATE TABLE semantic_memory (
        key             TEXT COLLATE "C" PRIMARY KEY,
        value           TEXT NOT NULL,
        confidence      DOUBLE PRECISION NOT NULL,
        source          TEXT NOT NULL,
        category        TEXT,
        created_at      BIGINT NOT NULL,
        updated_at      BIGINT NOT NULL,
        is_deleted      BOOLEAN NOT NULL DEFAULT FALSE,
        version         BIGINT NOT NULL DEFAULT 1,
        embedding_space TEXT
    );
    CREATE TABLE semantic_vectors (
        key       TEXT COLLATE "C" PRIMARY KEY,
        embedding BYTEA NOT NULL
    );
    CREATE TABLE memory_events (
        id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        at          BIGINT NOT NULL,
        memory_type TEXT NOT NULL,
        action      TEXT NOT NULL,
        key         TEXT,
        old_value   TEXT,
        new_value   TEXT,
        source      TEXT,
        confidence  DOUBLE PRECISION,
        detail      TEXT
    );
    CREATE TABLE meta (
        name  TEXT PRIMARY KEY,
        value BIGINT NOT NULL
    );
    INSERT INTO meta (name, value) VALUES ('semantic_revision', 0);
    "#,
    // 2: episodic rows, settings, session transcripts with their consolidation
    // markers, the import provenance ledger, the episodic revision counters
    // and a random identity for the store.
    r#"
    CREATE TABLE episodic_memories (
        id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        text            TEXT NOT NULL,
        tags            TEXT NOT NULL DEFAULT '[]',
        importance      DOUBLE PRECISION NOT NULL DEFAULT 0.5,
        source          TEXT NOT NULL DEFAULT '',
        session_key     TEXT,
        created_at      BIGINT NOT NULL,
        last_accessed   BIGINT,
        is_deleted      BOOLEAN NOT NULL DEFAULT FALSE,
        embedding       BYTEA,
        embedding_space TEXT,
        source_ref      TEXT
    );
    -- Eviction order of the active rows.
    CREATE INDEX episodic_live ON episodic_memories (importance, created_at, id) WHERE NOT is_deleted;
    -- Exact-text dedup. A hash index: a B-tree entry is limited to about
    -- 2.7 kB, less than a row's text may take.
    CREATE INDEX episodic_live_text ON episodic_memories USING hash (text) WHERE NOT is_deleted;
    CREATE INDEX episodic_space ON episodic_memories (embedding_space) WHERE NOT is_deleted;

    CREATE TABLE settings (
        name  TEXT COLLATE "C" PRIMARY KEY,
        value TEXT NOT NULL
    );

    CREATE TABLE session_state (
        session_key        TEXT COLLATE "C" PRIMARY KEY,
        next_seq           BIGINT NOT NULL DEFAULT 0,
        history_marker     BIGINT NOT NULL DEFAULT 0,
        preferences_marker BIGINT NOT NULL DEFAULT 0,
        last_activity      BIGINT NOT NULL,
        claim_owner        BIGINT,
        claim_until        BIGINT
    );
    CREATE INDEX session_state_pending ON session_state (last_activity, session_key)
        WHERE history_marker < next_seq;
    CREATE TABLE session_transcripts (
        session_key TEXT COLLATE "C" NOT NULL,
        seq         BIGINT NOT NULL,
        role        TEXT NOT NULL,
        content     TEXT NOT NULL,
        tool_calls  TEXT,
        created_at  BIGINT NOT NULL,
        PRIMARY KEY (session_key, seq)
    );

    CREATE TABLE import_provenance (
        source      TEXT COLLATE "C" NOT NULL,
        path        TEXT COLLATE "C" NOT NULL,
        item_hash   TEXT COLLATE "C" NOT NULL,
        landed_as   TEXT NOT NULL,
        outcome     TEXT NOT NULL,
        target      TEXT,
        recorded_at BIGINT NOT NULL,
        PRIMARY KEY (source, path, item_hash)
    );

    INSERT INTO meta (name, value) VALUES
        ('episodic_revision', 0),
        ('episodic_text_revision', 0),
        ('store_id', 1 + floor(random() * 9.2e18)::bigint);
    "#,
    // 3: no new rows: writers take narrow locks from here on. Builds that
    // serialised every write on one database-wide lock refuse a store at
    // this version rather than write beside writers that do not take it.
    r#"
    COMMENT ON TABLE meta IS 'Writers hold the schema''s store lock shared and a lock per key, lesson set or layer.';
    "#,
    // 4: scopes and forgetting (the SQLite schema's migration 7 says why).
    r#"
    ALTER TABLE episodic_memories ADD COLUMN scope TEXT NOT NULL DEFAULT 'global';
    ALTER TABLE session_state ADD COLUMN scope TEXT NOT NULL DEFAULT 'global';
    CREATE TABLE forgotten (
        id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        kind        TEXT NOT NULL,
        scope       TEXT NOT NULL,
        key         TEXT,
        fingerprint TEXT NOT NULL,
        shingles    BYTEA NOT NULL,
        at          BIGINT NOT NULL
    );
    CREATE INDEX forgotten_fingerprint ON forgotten (fingerprint);
    "#,
    // 5: the evidence of consolidated rows (session, message range, quote).
    r#"
    CREATE TABLE memory_evidence (
        layer       TEXT COLLATE "C" NOT NULL,
        target      TEXT COLLATE "C" NOT NULL,
        session_key TEXT NOT NULL,
        first_seq   BIGINT NOT NULL,
        last_seq    BIGINT NOT NULL,
        quote       TEXT NOT NULL,
        PRIMARY KEY (layer, target)
    );
    "#,
    // 6: consolidation runs (changesets under review, and what each applied
    // run changed, for a revert; the SQLite schema's migration 9 says why).
    r#"
    CREATE TABLE consolidation_runs (
        id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        state      TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        body       TEXT NOT NULL
    );
    "#,
    // 7: the counts of active and tombstoned episodic rows, kept by a
    // trigger, and an index of the ids of rows with a vector (the SQLite
    // schema's migration 10 says why).
    r#"
    CREATE INDEX episodic_vector_ids ON episodic_memories (embedding_space, id)
        WHERE NOT is_deleted AND embedding IS NOT NULL;
    INSERT INTO meta (name, value)
        SELECT 'episodic_live', count(*) FROM episodic_memories WHERE NOT is_deleted;
    INSERT INTO meta (name, value)
        SELECT 'episodic_deleted', count(*) FROM episodic_memories WHERE is_deleted;
    CREATE FUNCTION episodic_count() RETURNS trigger LANGUAGE plpgsql AS $body$
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            UPDATE meta SET value = value - 1
            WHERE name = CASE WHEN OLD.is_deleted THEN 'episodic_deleted' ELSE 'episodic_live' END;
        END IF;
        IF TG_OP IN ('UPDATE', 'INSERT') THEN
            UPDATE meta SET value = value + 1
            WHERE name = CASE WHEN NEW.is_deleted THEN 'episodic_deleted' ELSE 'episodic_live' END;
        END IF;
        RETURN NULL;
    END
    $body$;
    CREATE TRIGGER episodic_count AFTER INSERT OR DELETE ON episodic_memories
        FOR EACH ROW EXECUTE FUNCTION episodic_count();
    CREATE TRIGGER episodic_count_moved AFTER UPDATE OF is_deleted ON episodic_memories
        FOR EACH ROW WHEN (OLD.is_deleted IS DISTINCT FROM NEW.is_deleted) EXECUTE FUNCTION episodic_count();
    "#,
    // 8: the stemmed terms of every active row, kept by a trigger and
    // indexed by term, so keyword searches have an answer while a
    // gateway's in-memory keyword index is first built (the part SQLite's
    // FTS5 table plays). A table of its own, not a column: an episodic row
    // carries its vector, four rows fill a page, and a search reads a page
    // per matching row. With the terms alone some thirty rows share a page.
    r#"
    CREATE TABLE episodic_keywords (
        id     BIGINT PRIMARY KEY,
        terms  TEXT[] NOT NULL,
        counts SMALLINT[] NOT NULL,
        length INTEGER NOT NULL
    );
    -- The distinct terms of `body`, sorted, with how often each occurs and
    -- the count of all terms: PostgreSQL's English configuration, the
    -- Snowball stemmer and stop list the in-memory index uses too.
    CREATE FUNCTION episodic_terms(body TEXT, OUT terms TEXT[], OUT counts SMALLINT[], OUT length INTEGER)
    LANGUAGE sql STABLE AS $body$
        SELECT array_agg(lexeme ORDER BY lexeme),
               array_agg(least(cardinality(positions), 32767)::SMALLINT ORDER BY lexeme),
               coalesce(sum(cardinality(positions)), 0)::INTEGER
        FROM unnest(to_tsvector('pg_catalog.english', body))
    $body$;
    CREATE FUNCTION episodic_keywords_follow() RETURNS trigger LANGUAGE plpgsql AS $body$
    DECLARE
        added INTEGER;
        removed INTEGER;
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
            DELETE FROM episodic_keywords WHERE id = OLD.id RETURNING length INTO removed;
        END IF;
        IF TG_OP IN ('UPDATE', 'INSERT') AND NOT NEW.is_deleted THEN
            INSERT INTO episodic_keywords (id, terms, counts, length)
            SELECT NEW.id, t.terms, t.counts, t.length FROM episodic_terms(NEW.text || ' ' || NEW.tags) t
            WHERE t.terms IS NOT NULL
            RETURNING length INTO added;
        END IF;
        IF coalesce(added, 0) <> coalesce(removed, 0) THEN
            UPDATE meta SET value = value + coalesce(added, 0) - coalesce(removed, 0)
            WHERE name = 'episodic_keyword_length';
        END IF;
        RETURN NULL;
    END
    $body$;
    INSERT INTO episodic_keywords (id, terms, counts, length)
        SELECT m.id, t.terms, t.counts, t.length
        FROM episodic_memories m, episodic_terms(m.text || ' ' || m.tags) t
        WHERE NOT m.is_deleted AND t.terms IS NOT NULL;
    INSERT INTO meta (name, value) SELECT 'episodic_keyword_length', coalesce(sum(length), 0) FROM episodic_keywords;
    CREATE INDEX episodic_keyword_terms ON episodic_keywords USING gin (terms);
    CREATE TRIGGER episodic_keywords AFTER INSERT OR DELETE ON episodic_memories
        FOR EACH ROW EXECUTE FUNCTION episodic_keywords_follow();
    CREATE TRIGGER episodic_keywords_changed AFTER UPDATE OF text, tags, is_deleted ON episodic_memories
        FOR EACH ROW WHEN (OLD.text IS DISTINCT FROM NEW.text OR OLD.tags IS DISTINCT FROM NEW.tags
                           OR OLD.is_deleted IS DISTINCT FROM NEW.is_deleted)
        EXECUTE FUNCTION episodic_keywords_follow();
    "#,
];

/// The schema a gateway's store lives in.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) const DEFAULT_SCHEMA: &str = "cairn";
/// The schema version this build writes.
pub(crate) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

fn storage(operation: &'static str) -> impl FnOnce(postgres::Error) -> MemoryError {
    move |error| {
        let kind = match error.code() {
            Some(code) if *code == SqlState::T_R_SERIALIZATION_FAILURE || *code == SqlState::T_R_DEADLOCK_DETECTED => {
                StorageErrorKind::Busy
            }
            Some(code) if *code == SqlState::LOCK_NOT_AVAILABLE => StorageErrorKind::Busy,
            Some(code) if code.code().starts_with("23") => StorageErrorKind::Constraint,
            Some(code) if *code == SqlState::DISK_FULL || *code == SqlState::PROGRAM_LIMIT_EXCEEDED => {
                StorageErrorKind::Full
            }
            Some(code) if *code == SqlState::QUERY_CANCELED || *code == SqlState::ADMIN_SHUTDOWN => {
                StorageErrorKind::Interrupted
            }
            Some(code) if *code == SqlState::DATA_CORRUPTED || *code == SqlState::INDEX_CORRUPTED => {
                StorageErrorKind::Corrupt
            }
            None if error.is_closed() => StorageErrorKind::Io,
            _ => StorageErrorKind::Other,
        };
        MemoryError::Storage { operation, source: StorageError::new(kind, error) }
    }
}

/// The candidates of [`EpisodicRows::episodic_quoting`] when the database's
/// own `lower()` folds non-ASCII letters (its `LC_CTYPE` is a Unicode locale).
/// The active rows that best match a keyword query, by Okapi BM25 over
/// `episodic_keywords` (migration 8), as the in-memory index
/// ranks them: `$1` the query's words, each stemmed here as the rows' texts
/// were; `$2` the most rows a term's postings are read for
/// ([`FTS_COMMON_TERM_ROWS`]): a term found in that many rows is left out
/// when a rarer one is asked for, as on SQLite, and otherwise counts that
/// many; `$3` how many hits; `$4`, `$5` and `$6` BM25's `k1`, `b` and idf
/// floor. Each term's postings are read once, through the term index.
const KEYWORD_HITS: &str = "
    WITH words AS (
        SELECT DISTINCT t.terms[1] AS term
        FROM unnest($1::TEXT[]) AS w, episodic_terms(w) AS t
        WHERE cardinality(t.terms) = 1
    ), postings AS MATERIALIZED (
        SELECT w.term, k.id, k.length, k.counts[array_position(k.terms, w.term)] AS tf
        FROM words w, LATERAL (
            SELECT id, length, terms, counts FROM episodic_keywords k WHERE k.terms @> ARRAY[w.term] LIMIT $2
        ) k
    ), counted AS (
        SELECT term, count(*) AS df FROM postings GROUP BY term
    ), kept AS (
        SELECT term, df FROM counted WHERE df < $2 OR NOT EXISTS (SELECT 1 FROM counted WHERE df < $2)
    ), stats AS (
        SELECT live.n, greatest(total.value, 1)::FLOAT8 / live.n AS average_length
        FROM (SELECT greatest(value, 1)::FLOAT8 AS n FROM meta WHERE name = 'episodic_live') live,
             (SELECT value FROM meta WHERE name = 'episodic_keyword_length') total
    )
    SELECT p.id,
           sum(greatest(ln((s.n - c.df + 0.5) / (c.df + 0.5)), $6::FLOAT8) * p.tf * ($4::FLOAT8 + 1)
               / (p.tf + $4::FLOAT8 * (1 - $5::FLOAT8 + $5::FLOAT8 * p.length / s.average_length))) AS score
    FROM postings p JOIN kept c USING (term) CROSS JOIN stats s
    GROUP BY p.id ORDER BY score DESC, p.id LIMIT $3";

/// Before [`KEYWORD_HITS`], for the rest of its transaction: the server
/// asks the disk for up to 64 of the search's table pages at once instead
/// of one at a time (`effective_io_concurrency`, 1 by default on Linux).
/// A search reads its postings' rows at random across the table, and on a
/// cold cache that wait was most of a large store's first context. A
/// higher value the server already has is kept; a server without
/// prefetching (0, where the platform lacks it) is left alone.
const KEYWORD_PREFETCH: &str = "SELECT set_config('effective_io_concurrency',
     CASE WHEN current_setting('effective_io_concurrency')::INT > 0
          THEN greatest(current_setting('effective_io_concurrency')::INT, 64)::TEXT
          ELSE current_setting('effective_io_concurrency') END, true)";

const QUOTING_DEFAULT: &str = "SELECT id, text FROM episodic_memories
     WHERE NOT is_deleted AND strpos(lower(text), $1) > 0 ORDER BY id";
/// The same through ICU's root locale, when the database's `lower()` folds ASCII only.
const QUOTING_ICU: &str = r#"SELECT id, text FROM episodic_memories
     WHERE NOT is_deleted AND strpos(lower(text COLLATE "und-x-icu"), $1) > 0 ORDER BY id"#;
/// Without a Unicode `lower()`: every text with a non-ASCII character is a
/// candidate too, since only those can lower-case differently (the caller
/// confirms each candidate on the text).
const QUOTING_ASCII: &str = "SELECT id, text FROM episodic_memories
     WHERE NOT is_deleted AND (strpos(lower(text), $1) > 0 OR octet_length(text) <> char_length(text))
     ORDER BY id";

/// A store in one PostgreSQL schema.
pub(crate) struct PostgresBackend {
    url: String,
    schema: String,
    /// The `NOTIFY` channel of this store's revision bumps.
    channel: String,
    /// Open connections, each with its prepared statements.
    pool: r2d2::Pool<Connections>,
    /// Notifications heard, counted by the listener thread.
    changes: Arc<Changes>,
    /// Commits to announce, sent by the announcer thread.
    announcer: Arc<Announcer>,
    /// One of the `QUOTING_*` statements, chosen by what `lower()` folds here.
    quoting: &'static str,
    /// The forgotten items last read, so a write checks them without reading them again.
    forgotten: Mutex<ForgottenCache>,
}

/// The `forgotten` table as last read. Its rows are only ever appended,
/// each under the table's lock, so the highest id names its content.
#[derive(Default)]
struct ForgottenCache {
    last_id: i64,
    rows: Vec<ForgottenRow>,
}

/// Connections to one schema for the pool: each selects the schema once
/// and keeps the statements it prepared, so a statement costs one round
/// trip after its first use.
struct Connections {
    url: String,
    schema: String,
}

/// The statements that put a new connection on `schema`.
fn schema_setup(schema: &str) -> String {
    format!("CREATE SCHEMA IF NOT EXISTS {schema}; SET search_path TO {schema}")
}

/// A pooled connection and its prepared statements, by SQL text.
///
/// The asynchronous client is driven by a runtime of its own, run only
/// while a call waits (as the blocking `postgres::Client` does inside), so
/// that several statements can be in flight in one round trip.
struct Connection {
    client: tokio_postgres::Client,
    runtime: tokio::runtime::Runtime,
    statements: HashMap<String, Statement>,
    /// Set when a rollback failed: the pool drops the connection.
    broken: bool,
}

/// Why a pooled connection could not be made.
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    #[error(transparent)]
    Postgres(#[from] postgres::Error),
    #[error("could not start the connection's runtime: {0}")]
    Runtime(#[from] std::io::Error),
}

impl r2d2::ManageConnection for Connections {
    type Connection = Connection;
    type Error = ConnectError;

    fn connect(&self) -> std::result::Result<Connection, ConnectError> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let (client, connection) = runtime.block_on(tokio_postgres::connect(&self.url, NoTls))?;
        runtime.spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "PostgreSQL connection closed");
            }
        });
        runtime.block_on(client.batch_execute(&schema_setup(&self.schema)))?;
        Ok(Connection { client, runtime, statements: HashMap::new(), broken: false })
    }

    fn is_valid(&self, connection: &mut Connection) -> std::result::Result<(), ConnectError> {
        Ok(connection.runtime.block_on(connection.client.batch_execute(""))?)
    }

    fn has_broken(&self, connection: &mut Connection) -> bool {
        connection.broken || connection.client.is_closed()
    }
}

/// The pool found no connection in time (the server is down or every
/// connection is busy).
#[derive(Debug, thiserror::Error)]
#[error("no PostgreSQL connection: {0}")]
struct PoolError(String);

impl PostgresBackend {
    /// Connects to `url`, creates `schema` when missing and migrates it;
    /// at most `pool_size` connections are open at once (the listener's
    /// aside). Two gateways opening a fresh schema at once migrate it
    /// exactly once.
    pub(crate) fn open(url: &str, schema: &str, pool_size: usize) -> Result<Self> {
        if schema.is_empty() || !schema.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') {
            return Err(MemoryError::InvalidConfig(format!(
                "PostgreSQL schema {schema:?} must be lower-case letters, digits and '_'"
            )));
        }
        let pool_size =
            u32::try_from(pool_size).ok().filter(|size| (1..=MAX_POOL_SIZE).contains(size)).ok_or_else(|| {
                MemoryError::InvalidConfig(format!("postgres_pool_size must be from 1 to {MAX_POOL_SIZE}"))
            })?;
        let connections = Connections { url: url.to_owned(), schema: schema.to_owned() };
        // The first connection is made here, so a bad URL fails the open at once with the server's own error.
        let mut first = Client::connect(url, NoTls).map_err(storage("connecting to PostgreSQL"))?;
        first.batch_execute(&schema_setup(schema)).map_err(storage("connecting to PostgreSQL"))?;
        migrate(&mut first, schema)?;
        let quoting = quoting_statement(&mut first)?;
        let pool = r2d2::Pool::builder()
            .max_size(pool_size)
            .min_idle(Some(0))
            // A broken connection shows at its next statement, which fails the
            // transaction as a lost server would; no extra round trip per checkout.
            .test_on_check_out(false)
            .connection_timeout(POOL_WAIT)
            .build_unchecked(connections);
        let backend = Self {
            url: url.to_owned(),
            schema: schema.to_owned(),
            channel: format!("cairn_{schema}"),
            pool,
            changes: Arc::new(Changes::default()),
            announcer: Arc::new(Announcer::default()),
            quoting,
            forgotten: Mutex::new(ForgottenCache::default()),
        };
        drop(first);
        backend.start_listener();
        backend.start_announcer();
        Ok(backend)
    }

    /// Listens on the store's channel on a connection of its own and counts
    /// what it hears; reconnects after a failure. The thread ends once the
    /// backend is dropped.
    fn start_listener(&self) {
        let changes = Arc::downgrade(&self.changes);
        let announcer = Arc::downgrade(&self.announcer);
        let (url, channel) = (self.url.clone(), self.channel.clone());
        let spawned = std::thread::Builder::new().name("cairn-pg-listen".to_owned()).spawn(move || {
            while changes.strong_count() > 0 {
                let listened = (|| -> std::result::Result<(), postgres::Error> {
                    let mut client = Client::connect(&url, NoTls)?;
                    client.batch_execute(&format!("LISTEN {channel}"))?;
                    // Whatever changed while no one listened counts as a change.
                    if let Some(changes) = changes.upgrade() {
                        changes.bump();
                    }
                    let mut notifications = client.notifications();
                    // This backend's own commits are no news to it.
                    let news = |notification: &postgres::Notification| {
                        notification.channel() == channel
                            && !announcer.upgrade().is_some_and(|announcer| announcer.sent_by(notification))
                    };
                    loop {
                        let Some(changes) = changes.upgrade() else { return Ok(()) };
                        // A wait ends at the first notification, and those already
                        // here are taken with it: under a stream of other gateways'
                        // commits each is counted at once, not after a quiet spell.
                        let Some(first) = notifications.timeout_iter(LISTEN_POLL).next()? else { continue };
                        let mut any = news(&first);
                        let mut pending = notifications.iter();
                        while let Some(notification) = pending.next()? {
                            any |= news(&notification);
                        }
                        if any {
                            changes.bump();
                        }
                    }
                })();
                if let Err(error) = listened {
                    tracing::debug!(%error, "PostgreSQL listener lost its connection; reconnecting");
                    std::thread::sleep(LISTEN_POLL);
                }
            }
        });
        if let Err(error) = spawned {
            tracing::warn!(%error, "could not start the PostgreSQL listener; changes are seen on the next read");
        }
    }

    /// Sends the announcements [`Announcer::request`] asks for, on a
    /// connection of its own, at most one every [`ANNOUNCE_GAP`]; reconnects
    /// after a failure and announces again. The thread ends once the backend
    /// is dropped.
    fn start_announcer(&self) {
        let announcer = Arc::downgrade(&self.announcer);
        let (url, channel) = (self.url.clone(), self.channel.clone());
        let spawned = std::thread::Builder::new().name("cairn-pg-announce".to_owned()).spawn(move || {
            let mut client: Option<Client> = None;
            loop {
                let Some(announcer) = announcer.upgrade() else { return };
                if !announcer.take(LISTEN_POLL) {
                    continue;
                }
                let sent = (|| -> std::result::Result<(), postgres::Error> {
                    let client = match &mut client {
                        Some(client) => client,
                        None => {
                            let mut connected = Client::connect(&url, NoTls)?;
                            let pid: i32 = connected.query_one("SELECT pg_backend_pid()", &[])?.get(0);
                            announcer.pid.store(pid, Ordering::Relaxed);
                            client.insert(connected)
                        }
                    };
                    client.execute("SELECT pg_notify($1, '')", &[&channel])?;
                    Ok(())
                })();
                if let Err(error) = sent {
                    tracing::debug!(%error, "PostgreSQL announcer lost its connection; reconnecting");
                    client = None;
                    announcer.request();
                    drop(announcer);
                    std::thread::sleep(LISTEN_POLL);
                    continue;
                }
                drop(announcer);
                // Commits made meanwhile are announced together.
                std::thread::sleep(ANNOUNCE_GAP);
            }
        });
        if let Err(error) = spawned {
            tracing::warn!(%error, "could not start the PostgreSQL announcer; other gateways see changes on their next read");
        }
    }

    /// Runs `work` in one transaction on a pooled connection. The `BEGIN`
    /// (with a write's shared store lock) waits in the queue for the first
    /// statement whose answer `work` reads, and a write's queued statements
    /// and deferred revision bumps go with its `COMMIT`: a transaction that
    /// sent nothing costs no round trip.
    fn transaction(
        &self,
        operation: &'static str,
        write: bool,
        work: &mut dyn FnMut(&mut dyn StoreTx) -> Result<()>,
    ) -> Result<()> {
        let mut connection = self.pool.get().map_err(|error| MemoryError::Storage {
            operation,
            source: StorageError::new(StorageErrorKind::Busy, PoolError(error.to_string())),
        })?;
        let begin = if write {
            // Read committed: a statement after a lock sees every commit made before the lock was granted.
            "BEGIN ISOLATION LEVEL READ COMMITTED"
        } else {
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        };
        let mut tx = PgTx {
            connection: &mut connection,
            write,
            schema: &self.schema,
            quoting: self.quoting,
            held: HashSet::new(),
            whole_store: false,
            bump_at_commit: Vec::new(),
            bumped: false,
            queue: vec![Queued::Begin(begin)],
            sent: false,
            forgotten: &self.forgotten,
            forgotten_seen: None,
        };
        let setup = if write {
            let (class, object) = lock_id(&self.schema, STORE_LAYER, "");
            tx.enqueue("starting a transaction", WRITE_SETUP, &[&class, &object], false)
        } else {
            Ok(())
        };
        let result = setup.and_then(|()| work(&mut tx)).and_then(|()| {
            if !tx.sent && tx.bump_at_commit.is_empty() && !tx.queue.iter().any(Queued::changes) {
                // Nothing reached the server and nothing is to be written.
                return Ok(());
            }
            if !tx.bump_at_commit.is_empty() {
                let counters: Vec<&str> = tx.bump_at_commit.iter().map(|counter| counter.name()).collect();
                tx.defer("bumping revisions", BUMP_AT_COMMIT, &[&counters])?;
            }
            tx.send(async |client: &tokio_postgres::Client| {
                client.batch_execute("COMMIT").await.map_err(storage(operation))
            })
        });
        let (sent, bumped) = (tx.sent, tx.bumped || !tx.bump_at_commit.is_empty());
        if result.is_ok() && bumped {
            self.announcer.request();
        }
        if result.is_err() {
            // Statements prepared before a schema change would fail again.
            connection.statements.clear();
            if sent
                && !connection.client.is_closed()
                && connection.runtime.block_on(connection.client.batch_execute("ROLLBACK")).is_err()
            {
                connection.broken = true;
            }
        }
        result
    }
}

/// What a write transaction does first, prepared once per connection: its
/// settings, then the store lock shared (`$1`, `$2`: [`lock_id`] of the
/// store).
///
/// A write's statements are prepared once and planned once (a generic
/// plan), with plain index scans wherever an index serves. Left to the
/// planner, the plans made while the store is small scan whole tables,
/// which looks cheaper then, and are kept as it grows (the audit trim then
/// scanned the whole trail on every write); and a custom plan per execution
/// costs more than the statement itself. Bitmap scans would visit every
/// trimmed row not yet vacuumed on each trim; a plain index scan marks them
/// dead in the index and skips them after. Set by `set_config(.., true)`
/// (as `SET LOCAL`) in a prepared statement, the settings cost no parse per
/// write.
const WRITE_SETUP: &str = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true),
            set_config('enable_seqscan', 'off', true),
            set_config('enable_bitmapscan', 'off', true),
            pg_advisory_xact_lock_shared($1, $2)";

/// Shard rows of a counter bumped at commit (the `% 64` of [`BUMP_AT_COMMIT`]).
const BUMP_SHARDS: u32 = 64;

/// Bumps the counters named in `$1` (each at most once).
///
/// A counter bumped at commit is spread over 64 shard rows (`<name>.<n>`,
/// by the server process), summed by [`PgTx::revision`]: a row is locked
/// until the commit is flushed, and one row for every writer would make
/// the commits wait on each other's flush. Prepared, it is queued before
/// the `COMMIT` and goes in its round trip.
const BUMP_AT_COMMIT: &str = "INSERT INTO meta (name, value)
     SELECT counter || '.' || (pg_backend_pid() % 64), 1 FROM unnest($1::TEXT[]) AS counter
     ON CONFLICT (name) DO UPDATE SET value = meta.value + 1";

/// The most connections a pool may hold.
pub(crate) const MAX_POOL_SIZE: u32 = 1024;
/// How long a transaction waits for a pooled connection.
const POOL_WAIT: Duration = Duration::from_secs(30);
/// How long the listener waits for a notification before checking that
/// its backend still exists.
const LISTEN_POLL: Duration = Duration::from_millis(500);
/// The least time between two announcements of one backend: under a
/// stream of commits, at most one `NOTIFY` per gap.
const ANNOUNCE_GAP: Duration = Duration::from_millis(50);

/// Commits waiting to be announced to other gateways.
///
/// A `NOTIFY` inside a write transaction would take, at its commit, one
/// lock for the whole database cluster, held until the commit is done
/// (PostgreSQL keeps its notification queue in commit order): writers
/// that notify commit one at a time. Announced after the commit instead,
/// by one thread and at most once per [`ANNOUNCE_GAP`], the writes commit
/// in parallel and other gateways hear of them a round trip later. Nothing
/// depends on the announcement for correctness: every read compares the
/// revisions it reads with its caches'.
#[derive(Default)]
struct Announcer {
    pending: Mutex<bool>,
    wake: Condvar,
    /// The server process of the announcing connection (0 before it
    /// connects): the listener leaves out what it announced.
    pid: AtomicI32,
}

impl Announcer {
    /// Asks for an announcement of the commits made so far.
    fn request(&self) {
        *self.pending.lock() = true;
        self.wake.notify_one();
    }

    /// Whether this announcer sent `notification`.
    fn sent_by(&self, notification: &postgres::Notification) -> bool {
        notification.process_id() == self.pid.load(Ordering::Relaxed)
    }

    /// Waits up to `timeout` for a request and takes it: whether there was one.
    fn take(&self, timeout: Duration) -> bool {
        let mut pending = self.pending.lock();
        if !*pending {
            self.wake.wait_for(&mut pending, timeout);
        }
        std::mem::replace(&mut *pending, false)
    }
}

/// A count of the notifications heard, and a way to wait for the next.
#[derive(Default)]
struct Changes {
    count: Mutex<u64>,
    heard: Condvar,
}

impl Changes {
    fn bump(&self) {
        *self.count.lock() += 1;
        self.heard.notify_all();
    }
}

impl Backend for PostgresBackend {
    fn kind(&self) -> &'static str {
        "postgres"
    }

    /// Migrated at open to this build's version.
    fn schema_version(&self) -> Result<i64> {
        Ok(SCHEMA_VERSION)
    }

    fn searches_keywords(&self) -> bool {
        true
    }

    fn wait_for_change(&self, seen: u64, timeout: Duration) -> u64 {
        let mut count = self.changes.count.lock();
        if *count == seen {
            self.changes.heard.wait_for(&mut count, timeout);
        }
        *count
    }

    fn write_dyn(&self, operation: &'static str, work: &mut dyn FnMut(&mut dyn StoreTx) -> Result<()>) -> Result<()> {
        self.transaction(operation, true, work)
    }

    fn read_dyn(&self, operation: &'static str, work: &mut dyn FnMut(&mut dyn StoreTx) -> Result<()>) -> Result<()> {
        self.transaction(operation, false, work)
    }
}

/// Picks the quoting statement: whether the database's `lower()` folds
/// non-ASCII letters as Rust's `to_lowercase` does, and if not, whether
/// ICU's root collation is there to do it.
fn quoting_statement(client: &mut Client) -> Result<&'static str> {
    const UPPER: &str = "ÀÖÜ ΣΑΣ";
    const LOWER: &str = "àöü σας";
    let folds: bool = client
        .query_one("SELECT lower($1::text) = $2::text", &[&UPPER, &LOWER])
        .map_err(storage("probing lower-case folding"))?
        .get(0);
    if folds {
        return Ok(QUOTING_DEFAULT);
    }
    match client.query_one(r#"SELECT lower($1::text COLLATE "und-x-icu") = $2::text"#, &[&UPPER, &LOWER]) {
        Ok(row) if row.get::<_, bool>(0) => Ok(QUOTING_ICU),
        Ok(_) => Ok(QUOTING_ASCII),
        // A server built without ICU has no such collation.
        Err(error) if error.code() == Some(&SqlState::UNDEFINED_OBJECT) => Ok(QUOTING_ASCII),
        Err(error) => Err(storage("probing lower-case folding")(error)),
    }
}

/// Runs the missing migrations in one transaction under the store lock.
fn migrate(client: &mut Client, schema: &str) -> Result<()> {
    let operation = "migrating the PostgreSQL schema";
    let mut transaction = client.transaction().map_err(storage(operation))?;
    let (class, object) = lock_id(schema, STORE_LAYER, "");
    transaction.execute("SELECT pg_advisory_xact_lock($1, $2)", &[&class, &object]).map_err(storage(operation))?;
    transaction
        .batch_execute("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)")
        .map_err(storage(operation))?;
    let version: Option<i64> = transaction
        .query_opt("SELECT version FROM schema_version", &[])
        .map_err(storage(operation))?
        .map(|row| row.get(0));
    let version = version.unwrap_or(0);
    if version as usize > MIGRATIONS.len() {
        return Err(MemoryError::InvalidConfig(format!(
            "PostgreSQL schema {schema} is at version {version}, newer than this build's {}",
            MIGRATIONS.len()
        )));
    }
    for migration in &MIGRATIONS[version as usize..] {
        transaction.batch_execute(migration).map_err(storage(operation))?;
    }
    let target = MIGRATIONS.len() as i64;
    transaction.execute("DELETE FROM schema_version", &[]).map_err(storage(operation))?;
    transaction.execute("INSERT INTO schema_version (version) VALUES ($1)", &[&target]).map_err(storage(operation))?;
    transaction.commit().map_err(storage(operation))
}

/// `stored`, `dropped` and `upserted`: a semantic row written as new
/// (inserted, or replacing the stored one with version + 1) and its vector
/// stored, or dropped when there is none. Parameters from `$p`: key,
/// value, confidence, source, category, time, vector space, vector.
fn upsert_ctes(p: usize) -> String {
    let [key, value, confidence, source, category, at, space, vector] = std::array::from_fn(|i| p + i);
    format!(
        "stored AS (
            INSERT INTO semantic_vectors (key, embedding) SELECT ${key}, ${vector}::BYTEA WHERE ${vector}::BYTEA IS NOT NULL
            ON CONFLICT (key) DO UPDATE SET embedding = excluded.embedding
         ), dropped AS (
            DELETE FROM semantic_vectors WHERE key = ${key} AND ${vector}::BYTEA IS NULL
         ), upserted AS (
            INSERT INTO semantic_memory
                (key, value, confidence, source, category, created_at, updated_at, is_deleted, version,
                 embedding_space)
            VALUES (${key}, ${value}, ${confidence}, ${source}, ${category}, ${at}, ${at}, FALSE, 1, ${space})
            ON CONFLICT (key) DO UPDATE SET
                value = excluded.value,
                confidence = excluded.confidence,
                source = excluded.source,
                category = excluded.category,
                created_at = CASE WHEN semantic_memory.is_deleted
                                  THEN excluded.created_at ELSE semantic_memory.created_at END,
                updated_at = excluded.updated_at,
                is_deleted = FALSE,
                version = semantic_memory.version + 1,
                embedding_space = excluded.embedding_space
         )"
    )
}

/// `evidence_set` and `evidence_cleared`: the evidence of a row recorded,
/// or removed when the session key is NULL. Parameters from `$p`: layer,
/// target, session key, first and last message, quote.
fn evidence_ctes(p: usize) -> String {
    let [layer, target, session, first, last, quote] = std::array::from_fn(|i| p + i);
    format!(
        "evidence_set AS (
            INSERT INTO memory_evidence (layer, target, session_key, first_seq, last_seq, quote)
            SELECT ${layer}::TEXT, ${target}::TEXT, ${session}::TEXT, ${first}::BIGINT, ${last}::BIGINT, ${quote}::TEXT
            WHERE ${session}::TEXT IS NOT NULL
            ON CONFLICT (layer, target) DO UPDATE SET session_key = excluded.session_key,
                first_seq = excluded.first_seq, last_seq = excluded.last_seq, quote = excluded.quote
         ), evidence_cleared AS (
            DELETE FROM memory_evidence WHERE layer = ${layer} AND target = ${target} AND ${session}::TEXT IS NULL
         )"
    )
}

/// `added` and `old`, to be followed by [`EVENT_TRIM`]: an audit row, and
/// the rows `cap` or more behind it. The trim's scan and its delete go by
/// the primary key (a join with the new row, or `IN` over the trimmed ids,
/// is planned as a scan of the whole trail on every write). Rows another
/// open transaction is trimming are left to it (`SKIP LOCKED`): writers of
/// different keys never wait on each other here.
///
/// The scan looks at the last [`TRIM_WINDOW`] ids of the range only, where
/// the row this write pushes out is; every [`TRIM_SWEEP`]th id it sweeps
/// the whole range. A trimmed row's index entry stays until no open
/// snapshot can see the row, so under a stream of writes the start of the
/// trail is a run of such entries, and a scan from there visited each one
/// (83 buffers at the median, up to 745, in four fifths of the write's
/// time). What a window misses (the row of a trim rolled back, the row of a
/// transaction that stayed open over `cap` others) goes at the next sweep.
/// Parameters from `$p`: time, memory type, action, key, old value, new
/// value, source, confidence, detail, cap.
fn event_ctes(p: usize) -> String {
    let [at, memory_type, action, key, old, new, source, confidence, detail, cap] = std::array::from_fn(|i| p + i);
    format!(
        "added AS (
            INSERT INTO memory_events
                (at, memory_type, action, key, old_value, new_value, source, confidence, detail)
            VALUES (${at}, ${memory_type}, ${action}, ${key}, ${old}, ${new}, ${source}, ${confidence}, ${detail})
            RETURNING id
         ), old AS (
            SELECT id FROM memory_events
            WHERE id <= (SELECT id FROM added) - ${cap}
              AND id > CASE WHEN (SELECT id FROM added) % {TRIM_SWEEP} = 0 THEN 0
                            ELSE (SELECT id FROM added) - ${cap} - {TRIM_WINDOW} END
            FOR UPDATE SKIP LOCKED
         )"
    )
}

/// How many ids before the one a write pushes out of the audit trail its
/// trim looks at ([`event_ctes`]).
const TRIM_WINDOW: i64 = 16;
/// Every this many ids, a write's trim sweeps the whole range behind the
/// cap (ids start at 1).
const TRIM_SWEEP: i64 = 256;

/// The trim after [`event_ctes`].
const EVENT_TRIM: &str = "DELETE FROM memory_events WHERE id = ANY(ARRAY(SELECT id FROM old))";

static UPSERT: LazyLock<String> = LazyLock::new(|| format!("WITH {} SELECT 1", upsert_ctes(1)));
static SET_EVIDENCE: LazyLock<String> = LazyLock::new(|| format!("WITH {} SELECT 1", evidence_ctes(1)));
static APPEND_EVENT: LazyLock<String> = LazyLock::new(|| format!("WITH {} {EVENT_TRIM}", event_ctes(1)));
/// A semantic write's row, evidence and audit row in one statement.
static SEMANTIC_CHANGE: LazyLock<String> =
    LazyLock::new(|| format!("WITH {}, {}, {} {EVENT_TRIM}", upsert_ctes(1), evidence_ctes(9), event_ctes(15)));

/// The parameters of [`upsert_ctes`].
fn upsert_params<'a>(
    write: &'a SemanticUpsert<'_>,
    space: &'a Option<&str>,
    vector: &'a Option<Vec<u8>>,
) -> [&'a (dyn ToSql + Sync); 8] {
    [&write.key, &write.value, &write.confidence, &write.source, &write.category, &write.at, space, vector]
}

/// The parameters of [`event_ctes`] (`action` is `event`'s, as text).
fn event_params<'a>(
    at: &'a i64,
    event: &'a EventRecord<'_>,
    action: &'a &str,
    cap: &'a i64,
) -> [&'a (dyn ToSql + Sync); 10] {
    [
        at,
        &event.memory_type,
        action,
        &event.key,
        &event.old_value,
        &event.new_value,
        &event.source,
        &event.confidence,
        &event.detail,
        cap,
    ]
}

/// The evidence columns of `evidence`; all NULL clears it.
fn evidence_params(evidence: Option<&EvidenceRow>) -> (Option<&str>, Option<i64>, Option<i64>, Option<&str>) {
    match evidence {
        Some(evidence) => (
            Some(evidence.session_key.as_str()),
            Some(evidence.first_seq),
            Some(evidence.last_seq),
            Some(evidence.quote.as_str()),
        ),
        None => (None, None, None, None),
    }
}

/// The rows of one PostgreSQL transaction.
///
/// A write transaction holds the store lock shared from its `BEGIN`, and
/// takes a transaction-scoped advisory lock for each invariant just before
/// its first read of the rows behind it: the key of a semantic row (the
/// ladder's read-modify-write), all lessons (a lesson is deduplicated
/// against every other), the episodic layer (exact and near dedup, the cap
/// and the index revision), a session's transcript, a setting, an import
/// source's ledger. A read or write of a whole table (a restore's, a
/// listing inside a write) takes the store lock exclusively instead. A lock
/// already held costs nothing; a read transaction takes none.
struct PgTx<'t> {
    connection: &'t mut Connection,
    write: bool,
    schema: &'t str,
    quoting: &'static str,
    /// The narrow locks taken so far.
    held: HashSet<(i32, i32)>,
    /// Whether the store lock is held exclusively (every narrow lock is then moot).
    whole_store: bool,
    /// Counters bumped with the `COMMIT`.
    bump_at_commit: Vec<Counter>,
    /// Whether a counter was bumped before the `COMMIT` (announced after it).
    bumped: bool,
    /// Statements waiting to go with the next one whose answer is read, or
    /// with the `COMMIT`: the `BEGIN`, locks, and writes nothing reads back.
    queue: Vec<Queued>,
    /// Whether anything of this transaction has reached the server.
    sent: bool,
    /// The backend's copy of the forgotten items.
    forgotten: &'t Mutex<ForgottenCache>,
    /// The highest forgotten id as this transaction's last semantic read saw it.
    forgotten_seen: Option<i64>,
}

/// A statement waiting in a transaction's queue.
enum Queued {
    /// The `BEGIN`, as simple-protocol text.
    Begin(&'static str),
    /// A prepared statement, its parameters already encoded.
    Statement { operation: &'static str, statement: Statement, params: Vec<Encoded>, changes: bool },
}

impl Queued {
    /// Whether it changes rows (a `BEGIN` or a lock does not).
    fn changes(&self) -> bool {
        match self {
            Queued::Begin(_) => false,
            Queued::Statement { changes, .. } => *changes,
        }
    }

    /// Sends it on `client` and waits for its answer (the request goes out
    /// at the first poll).
    fn send<'a>(&'a self, client: &'a tokio_postgres::Client) -> Pin<Box<dyn Future<Output = Result<()>> + 'a>> {
        match self {
            Queued::Begin(sql) => {
                Box::pin(async move { client.batch_execute(sql).await.map_err(storage("starting a transaction")) })
            }
            Queued::Statement { operation, statement, params, .. } => Box::pin(async move {
                client.execute_raw(statement, params.iter()).await.map(drop).map_err(storage(operation))
            }),
        }
    }
}

/// A parameter already in the binary form its statement asked for.
#[derive(Debug)]
struct Encoded(Option<Vec<u8>>);

impl ToSql for Encoded {
    fn to_sql(
        &self,
        _: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        Ok(match &self.0 {
            Some(bytes) => {
                out.extend_from_slice(bytes);
                IsNull::No
            }
            None => IsNull::Yes,
        })
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    fn to_sql_checked(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        self.to_sql(ty, out)
    }
}

/// A parameter that does not fit its statement.
#[derive(Debug, thiserror::Error)]
#[error("a parameter does not fit its statement: {0}")]
struct EncodeError(String);

/// `params` in the binary forms `statement` asked for, checked as the
/// client checks them when it sends a statement at once.
fn encode(statement: &Statement, params: &[&(dyn ToSql + Sync)]) -> std::result::Result<Vec<Encoded>, EncodeError> {
    if params.len() != statement.params().len() {
        return Err(EncodeError(format!("{} parameters for {}", params.len(), statement.params().len())));
    }
    params
        .iter()
        .zip(statement.params())
        .map(|(param, ty)| {
            let mut out = BytesMut::new();
            match param.to_sql_checked(ty, &mut out) {
                Ok(IsNull::Yes) => Ok(Encoded(None)),
                Ok(IsNull::No) => Ok(Encoded(Some(out.to_vec()))),
                Err(error) => Err(EncodeError(error.to_string())),
            }
        })
        .collect()
}

/// Waits for every future of `earlier` and for `last`, polling them in
/// order so that each sends its request before the next: they share one
/// round trip. The first failure of `earlier` is the answer when there is
/// one (the server then failed every later statement of the transaction).
async fn in_order<'a, T>(
    mut earlier: Vec<Pin<Box<dyn Future<Output = Result<()>> + 'a>>>,
    last: impl Future<Output = Result<T>>,
) -> Result<T> {
    let mut last = pin!(last);
    let mut done: Vec<Option<Result<()>>> = earlier.iter().map(|_| None).collect();
    let mut answer = None;
    std::future::poll_fn(|cx| {
        for (future, slot) in earlier.iter_mut().zip(done.iter_mut()) {
            if slot.is_none()
                && let Poll::Ready(result) = future.as_mut().poll(cx)
            {
                *slot = Some(result);
            }
        }
        if answer.is_none()
            && let Poll::Ready(result) = last.as_mut().poll(cx)
        {
            answer = Some(result);
        }
        if answer.is_some() && done.iter().all(Option::is_some) { Poll::Ready(()) } else { Poll::Pending }
    })
    .await;
    for result in done.into_iter().flatten() {
        result?;
    }
    answer.expect("polled until answered")
}

/// A row count or offset as a query parameter (`usize::MAX` means no bound).
fn bound(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// 32-bit FNV-1a: the same on every gateway, whatever its build.
fn fnv32(parts: &[&str]) -> i32 {
    let mut hash: u32 = 0x811c_9dc5;
    for part in parts {
        for byte in part.bytes().chain(std::iter::once(0)) {
            hash ^= u32::from(byte);
            hash = hash.wrapping_mul(0x0100_0193);
        }
    }
    i32::from_ne_bytes(hash.to_ne_bytes())
}

/// The two-key advisory lock of `key` in `layer` of `schema` (a space apart
/// from the one-key store lock). Two keys may share a lock: they then
/// serialise, nothing worse.
pub(crate) fn lock_id(schema: &str, layer: &str, key: &str) -> (i32, i32) {
    (fnv32(&[schema, layer]), fnv32(&[key]))
}

const ROW_COLUMNS: &str =
    "key, value, confidence, source, category, created_at, updated_at, is_deleted, version, embedding_space";

fn semantic_row(row: &postgres::Row) -> SemanticRow {
    SemanticRow {
        key: row.get(0),
        value: row.get(1),
        confidence: row.get(2),
        source: row.get(3),
        category: row.get(4),
        created_at: row.get(5),
        updated_at: row.get(6),
        is_deleted: row.get(7),
        version: row.get(8),
        embedding_space: row.get(9),
    }
}

impl PgTx<'_> {
    /// The prepared form of `sql` on this connection.
    fn statement(&mut self, operation: &'static str, sql: &str) -> Result<Statement> {
        if let Some(statement) = self.connection.statements.get(sql) {
            return Ok(statement.clone());
        }
        let connection = &*self.connection;
        let statement = connection.runtime.block_on(connection.client.prepare(sql)).map_err(storage(operation))?;
        self.connection.statements.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }

    /// Sends the queue and then `last` in one round trip, and answers
    /// `last`'s result.
    fn send<T>(&mut self, last: impl AsyncFnOnce(&tokio_postgres::Client) -> Result<T>) -> Result<T> {
        let queue = std::mem::take(&mut self.queue);
        self.sent = true;
        let connection = &*self.connection;
        connection.runtime.block_on(async {
            let earlier = queue.iter().map(|queued| queued.send(&connection.client)).collect();
            in_order(earlier, last(&connection.client)).await
        })
    }

    /// Queues `sql` to go with the next statement whose answer is read, or
    /// with the `COMMIT`; `changes` when it writes rows.
    fn enqueue(
        &mut self,
        operation: &'static str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
        changes: bool,
    ) -> Result<()> {
        let statement = self.statement(operation, sql)?;
        let params = encode(&statement, params).map_err(|error| MemoryError::Storage {
            operation,
            source: StorageError::new(StorageErrorKind::Other, error),
        })?;
        self.queue.push(Queued::Statement { operation, statement, params, changes });
        Ok(())
    }

    /// A write whose answer nothing reads: it goes with the next statement.
    /// Its failure fails the transaction there.
    fn defer(&mut self, operation: &'static str, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<()> {
        self.enqueue(operation, sql, params, true)
    }

    /// Takes the lock of `key` in `layer` for the rest of a write
    /// transaction: before the next statement, in its round trip.
    fn lock(&mut self, layer: &str, key: &str) -> Result<()> {
        if !self.write || self.whole_store {
            return Ok(());
        }
        let id = lock_id(self.schema, layer, key);
        if self.held.insert(id) {
            self.enqueue("taking a write lock", "SELECT pg_advisory_xact_lock($1, $2)", &[&id.0, &id.1], false)?;
        }
        Ok(())
    }

    /// Inserts `row` exactly as given (times, version, tombstone flag), without a vector.
    fn insert_row(&mut self, operation: &'static str, row: &SemanticRow) -> Result<()> {
        self.execute(
            operation,
            "INSERT INTO semantic_memory
                (key, value, confidence, source, category, created_at, updated_at, is_deleted, version,
                 embedding_space)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULL)",
            &[
                &row.key,
                &row.value,
                &row.confidence,
                &row.source,
                &row.category,
                &row.created_at,
                &row.updated_at,
                &row.is_deleted,
                &row.version,
            ],
        )?;
        Ok(())
    }

    /// The lock behind a semantic key: all lessons for a lesson, the key otherwise.
    fn lock_semantic(&mut self, key: &str) -> Result<()> {
        if key.starts_with(LESSON_PREFIX) { self.lock("lessons", "") } else { self.lock("semantic", key) }
    }

    /// The lock of the episodic layer.
    fn lock_episodic(&mut self) -> Result<()> {
        self.lock("episodic", "")
    }

    /// The store lock, exclusively: every other writer of the store waits.
    fn lock_store(&mut self) -> Result<()> {
        if !self.write || self.whole_store {
            return Ok(());
        }
        let (class, object) = lock_id(self.schema, STORE_LAYER, "");
        self.enqueue("taking the store lock", "SELECT pg_advisory_xact_lock($1, $2)", &[&class, &object], false)?;
        self.whole_store = true;
        Ok(())
    }

    fn store_vector(&mut self, key: &str, vector: Option<&[f32]>) -> Result<()> {
        match vector {
            Some(vector) => self.execute(
                "storing a vector",
                "INSERT INTO semantic_vectors (key, embedding) VALUES ($1, $2)
                 ON CONFLICT (key) DO UPDATE SET embedding = excluded.embedding",
                &[&key, &vector_blob(vector)],
            ),
            None => self.execute("storing a vector", "DELETE FROM semantic_vectors WHERE key = $1", &[&key]),
        }?;
        Ok(())
    }

    fn count(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<i64> {
        self.query_one("counting rows", sql, params).map(|row| row.get(0))
    }

    fn query(
        &mut self,
        operation: &'static str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<postgres::Row>> {
        let statement = self.statement(operation, sql)?;
        self.send(async |client| client.query(&statement, params).await.map_err(storage(operation)))
    }

    fn query_one(
        &mut self,
        operation: &'static str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<postgres::Row> {
        let statement = self.statement(operation, sql)?;
        self.send(async |client| client.query_one(&statement, params).await.map_err(storage(operation)))
    }

    fn query_opt(
        &mut self,
        operation: &'static str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<postgres::Row>> {
        let statement = self.statement(operation, sql)?;
        self.send(async |client| client.query_opt(&statement, params).await.map_err(storage(operation)))
    }

    fn execute(&mut self, operation: &'static str, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64> {
        let statement = self.statement(operation, sql)?;
        self.send(async |client| client.execute(&statement, params).await.map_err(storage(operation)))
    }
}

impl StoreTx for PgTx<'_> {
    fn write_semantic_change(
        &mut self,
        write: &SemanticUpsert<'_>,
        evidence: Option<&EvidenceRow>,
        at: i64,
        event: &EventRecord<'_>,
        cap: i64,
    ) -> Result<()> {
        self.lock_semantic(write.key)?;
        let (vector, space) = write.vector.map(|(vector, space)| (vector_blob(vector), space)).unzip();
        let (session_key, first_seq, last_seq, quote) = evidence_params(evidence);
        let layer = EvidenceLayer::Semantic.name();
        let mut params = upsert_params(write, &space, &vector).to_vec();
        params.extend_from_slice(&[&layer, &write.key, &session_key, &first_seq, &last_seq, &quote]);
        let action = event.action.as_str();
        params.extend_from_slice(&event_params(&at, event, &action, &cap));
        self.defer("writing a semantic entry", &SEMANTIC_CHANGE, &params)
    }

    fn semantic_rows_with_vectors(
        &mut self,
        keys: &[&str],
        space: Option<&str>,
    ) -> Result<Vec<(SemanticRow, Option<Vec<f32>>)>> {
        for key in keys {
            self.lock_semantic(key)?;
        }
        let found = self.query(
            "reading semantic entries",
            "SELECT m.key, m.value, m.confidence, m.source, m.category, m.created_at, m.updated_at, m.is_deleted,
                    m.version, m.embedding_space, CASE WHEN m.embedding_space = $2 THEN v.embedding END
             FROM semantic_memory m LEFT JOIN semantic_vectors v ON v.key = m.key
             WHERE m.key = ANY($1)",
            &[&keys, &space],
        )?;
        let mut found: HashMap<String, (SemanticRow, Option<Vec<f32>>)> = found
            .iter()
            .map(|row| {
                let vector = row.get::<_, Option<&[u8]>>(10).and_then(blob_vector);
                let row = semantic_row(row);
                (row.key.clone(), (row, vector))
            })
            .collect();
        Ok(keys.iter().filter_map(|key| found.remove(*key)).collect())
    }
}

impl ForgetRows for PgTx<'_> {
    fn record_forgotten(&mut self, row: &ForgottenRow) -> Result<()> {
        self.lock("forgotten", "")?;
        self.forgotten_seen = None;
        self.defer(
            "recording a forgotten item",
            "INSERT INTO forgotten (kind, scope, key, fingerprint, shingles, at) VALUES ($1, $2, $3, $4, $5, $6)",
            &[&row.kind, &row.scope, &row.key, &row.fingerprint, &row.shingles, &row.at],
        )?;
        Ok(())
    }

    fn forgotten_rows(&mut self) -> Result<Vec<ForgottenRow>> {
        // The semantic read just before saw the table's highest id: when the
        // copy is of that table, it is the answer without a round trip.
        if let Some(seen) = self.forgotten_seen {
            let cache = self.forgotten.lock();
            if cache.last_id == seen {
                return Ok(cache.rows.clone());
            }
        }
        let rows = self.query(
            "reading forgotten items",
            "SELECT kind, scope, key, fingerprint, shingles, at, id FROM forgotten ORDER BY id",
            &[],
        )?;
        let last_id = rows.last().map_or(0, |row| row.get(6));
        let rows: Vec<ForgottenRow> = rows
            .iter()
            .map(|row| ForgottenRow {
                kind: row.get(0),
                scope: row.get(1),
                key: row.get(2),
                fingerprint: row.get(3),
                shingles: row.get(4),
                at: row.get(5),
            })
            .collect();
        *self.forgotten.lock() = ForgottenCache { last_id, rows: rows.clone() };
        Ok(rows)
    }

    fn session_messages(&mut self) -> Result<Vec<SessionMessage>> {
        let rows = self.query(
            "reading session transcripts",
            "SELECT t.session_key, s.scope, t.seq, t.created_at, t.role, t.content, t.tool_calls
             FROM session_transcripts t JOIN session_state s ON s.session_key = t.session_key
             ORDER BY t.session_key, t.seq",
            &[],
        )?;
        Ok(rows
            .iter()
            .map(|row| SessionMessage {
                session_key: row.get(0),
                scope: row.get(1),
                row: TranscriptRow {
                    seq: row.get(2),
                    created_at: row.get(3),
                    role: row.get(4),
                    content: row.get(5),
                    tool_calls_json: row.get(6),
                },
            })
            .collect())
    }

    fn delete_session_messages(&mut self, messages: &[(String, i64)]) -> Result<usize> {
        let mut deleted = 0;
        for (session_key, seq) in messages {
            self.lock("session", session_key)?;
            deleted += self.execute(
                "forgetting a transcript message",
                "DELETE FROM session_transcripts WHERE session_key = $1 AND seq = $2",
                &[session_key, seq],
            )? as usize;
        }
        Ok(deleted)
    }
}

impl SemanticRows for PgTx<'_> {
    fn deleted_semantic(&mut self) -> Result<Vec<SemanticRow>> {
        self.lock_store()?;
        let rows = self.query(
            "listing deleted semantic entries",
            &format!("SELECT {ROW_COLUMNS} FROM semantic_memory WHERE is_deleted ORDER BY key"),
            &[],
        )?;
        Ok(rows.iter().map(semantic_row).collect())
    }

    fn insert_semantic_row(&mut self, row: &SemanticRow) -> Result<()> {
        self.lock_store()?;
        self.insert_row("restoring a semantic entry", row)
    }

    fn semantic_row(&mut self, key: &str) -> Result<Option<SemanticRow>> {
        self.lock_semantic(key)?;
        // With the row, the forgotten table's highest id: a write that checks
        // the forgotten items next finds them in the backend's copy when
        // that id is the copy's.
        let row = self.query_one(
            "reading a semantic entry",
            &format!(
                "SELECT {ROW_COLUMNS}, (SELECT coalesce(max(id), 0) FROM forgotten)
                 FROM (SELECT 1) AS one LEFT JOIN semantic_memory ON key = $1"
            ),
            &[&key],
        )?;
        self.forgotten_seen = Some(row.get(10));
        Ok(row.get::<_, Option<String>>(0).is_some().then(|| semantic_row(&row)))
    }

    fn upsert_semantic(&mut self, write: &SemanticUpsert<'_>) -> Result<()> {
        self.lock_semantic(write.key)?;
        let (vector, space) = write.vector.map(|(vector, space)| (vector_blob(vector), space)).unzip();
        self.defer("writing a semantic entry", &UPSERT, &upsert_params(write, &space, &vector))
    }

    fn put_semantic_row(&mut self, row: &SemanticRow) -> Result<()> {
        self.lock_semantic(&row.key)?;
        self.remove_semantic_row(&row.key)?;
        self.insert_row("reverting a semantic entry", row)
    }

    fn remove_semantic_row(&mut self, key: &str) -> Result<()> {
        self.lock_semantic(key)?;
        self.execute(
            "reverting a semantic entry",
            "WITH dropped AS (DELETE FROM semantic_vectors WHERE key = $1) DELETE FROM semantic_memory WHERE key = $1",
            &[&key],
        )?;
        Ok(())
    }

    fn tombstone_semantic(&mut self, key: &str, at: i64) -> Result<()> {
        self.lock_semantic(key)?;
        self.defer(
            "tombstoning a semantic entry",
            "WITH dropped AS (DELETE FROM semantic_vectors WHERE key = $1)
             UPDATE semantic_memory SET is_deleted = TRUE, updated_at = $2, version = version + 1,
             embedding_space = NULL WHERE key = $1",
            &[&key, &at],
        )?;
        Ok(())
    }

    fn live_semantic(&mut self, prefix: &str) -> Result<Vec<SemanticRow>> {
        if prefix == LESSON_PREFIX {
            self.lock("lessons", "")?;
        } else {
            self.lock_store()?;
        }
        let rows = self.query(
            "listing semantic entries",
            &format!(
                "SELECT {ROW_COLUMNS} FROM semantic_memory
                 WHERE NOT is_deleted AND starts_with(key, $1) ORDER BY key"
            ),
            &[&prefix],
        )?;
        Ok(rows.iter().map(semantic_row).collect())
    }

    fn semantic_heads(&mut self) -> Result<Vec<SemanticHead>> {
        self.lock_store()?;
        let rows = self.query(
            "loading the semantic snapshot",
            "SELECT key, version, embedding_space, updated_at FROM semantic_memory
             WHERE NOT is_deleted ORDER BY key",
            &[],
        )?;
        Ok(rows
            .iter()
            .map(|row| SemanticHead {
                key: row.get(0),
                version: row.get(1),
                embedding_space: row.get(2),
                updated_at: row.get(3),
            })
            .collect())
    }

    fn semantic_counts(&mut self, space: Option<&str>) -> Result<SemanticCounts> {
        self.lock_store()?;
        let row = self.query_one(
            "counting rows",
            "SELECT count(*) FILTER (WHERE NOT is_deleted),
                    count(*) FILTER (WHERE is_deleted),
                    count(*) FILTER (WHERE NOT is_deleted AND starts_with(key, 'lesson.')),
                    count(*) FILTER (WHERE NOT is_deleted
                                     AND (embedding_space IS NULL OR embedding_space IS DISTINCT FROM $1))
             FROM semantic_memory",
            &[&space],
        )?;
        Ok(SemanticCounts { live: row.get(0), deleted: row.get(1), lessons: row.get(2), missing_vectors: row.get(3) })
    }
}

impl SemanticVectors for PgTx<'_> {
    fn set_semantic_vector(&mut self, key: &str, vector: &[f32], space: &str) -> Result<()> {
        self.lock_semantic(key)?;
        self.execute(
            "storing a vector",
            "WITH stored AS (
                INSERT INTO semantic_vectors (key, embedding) VALUES ($1, $3)
                ON CONFLICT (key) DO UPDATE SET embedding = excluded.embedding
             )
             UPDATE semantic_memory SET embedding_space = $2 WHERE key = $1",
            &[&key, &space, &vector_blob(vector)],
        )?;
        Ok(())
    }

    fn set_semantic_vector_if_version(&mut self, key: &str, version: i64, vector: &[f32], space: &str) -> Result<bool> {
        self.lock_semantic(key)?;
        let changed = self.execute(
            "storing backfilled vectors",
            "UPDATE semantic_memory SET embedding_space = $3
             WHERE key = $1 AND version = $2 AND NOT is_deleted",
            &[&key, &version, &space],
        )?;
        if changed > 0 {
            self.store_vector(key, Some(vector))?;
        }
        Ok(changed > 0)
    }

    fn semantic_vector(&mut self, key: &str, space: &str) -> Result<Option<Vec<f32>>> {
        self.lock_semantic(key)?;
        let row = self.query_opt(
            "reading a vector",
            "SELECT v.embedding FROM semantic_vectors v JOIN semantic_memory m ON m.key = v.key
             WHERE v.key = $1 AND m.embedding_space = $2",
            &[&key, &space],
        )?;
        Ok(row.and_then(|row| blob_vector(row.get::<_, &[u8]>(0))))
    }

    fn semantic_missing_vectors(&mut self, space: &str, limit: usize) -> Result<Vec<SemanticRow>> {
        self.lock_store()?;
        let rows = self.query(
            "finding entries without vectors",
            &format!(
                "SELECT {ROW_COLUMNS} FROM semantic_memory
                 WHERE NOT is_deleted AND embedding_space IS DISTINCT FROM $1 ORDER BY key LIMIT $2"
            ),
            &[&space, &bound(limit)],
        )?;
        Ok(rows.iter().map(semantic_row).collect())
    }
}

impl AuditLog for PgTx<'_> {
    fn append_event(&mut self, at: i64, event: &EventRecord<'_>, cap: i64) -> Result<()> {
        let action = event.action.as_str();
        self.defer("writing the audit trail", &APPEND_EVENT, &event_params(&at, event, &action, &cap))
    }

    fn newest_events(&mut self, limit: usize) -> Result<Vec<StoredEvent>> {
        let rows = self.query(
            "reading the audit trail",
            "SELECT id, at, memory_type, action, key, old_value, new_value, source, confidence, detail
             FROM memory_events ORDER BY id DESC LIMIT $1",
            &[&bound(limit)],
        )?;
        Ok(rows
            .iter()
            .map(|row| StoredEvent {
                id: row.get(0),
                at: row.get(1),
                memory_type: row.get(2),
                action: row.get(3),
                key: row.get(4),
                old_value: row.get(5),
                new_value: row.get(6),
                source: row.get(7),
                confidence: row.get(8),
                detail: row.get(9),
            })
            .collect())
    }

    fn event_count(&mut self) -> Result<i64> {
        self.count("SELECT count(*) FROM memory_events", &[])
    }
}

impl Revisions for PgTx<'_> {
    fn revision(&mut self, counter: Counter) -> Result<i64> {
        Ok(self.revisions(&[counter])?[0])
    }

    fn revisions(&mut self, counters: &[Counter]) -> Result<Vec<i64>> {
        if counters.iter().any(|counter| matches!(counter, Counter::Episodic | Counter::EpisodicText)) {
            self.lock_episodic()?;
        }
        // Each counter's own row and its shards (see [`BUMP_AT_COMMIT`]),
        // named exactly: a lookup by primary key under any plan, where a
        // prefix match scans the table (its rows are rewritten at every
        // write, so it holds far more pages than rows).
        let shards = |counter: Counter| (0..BUMP_SHARDS).map(move |shard| format!("{}.{shard}", counter.name()));
        let names: Vec<String> = counters
            .iter()
            .flat_map(|&counter| std::iter::once(counter.name().to_owned()).chain(shards(counter)))
            .collect();
        let rows = self.query("reading revisions", "SELECT name, value FROM meta WHERE name = ANY($1)", &[&names])?;
        let rows: Vec<(String, i64)> = rows.iter().map(|row| (row.get(0), row.get(1))).collect();
        Ok(counters
            .iter()
            .map(|counter| {
                let name = counter.name();
                rows.iter()
                    .filter(|(row, _)| row == name || row.strip_prefix(name).is_some_and(|rest| rest.starts_with('.')))
                    .map(|(_, value)| value)
                    .sum()
            })
            .collect())
    }

    fn bump_revision(&mut self, counter: Counter) -> Result<i64> {
        if matches!(counter, Counter::Episodic | Counter::EpisodicText) {
            self.lock_episodic()?;
        }
        self.bumped = true;
        self.query_one(
            "bumping a revision",
            "INSERT INTO meta (name, value) VALUES ($1, 1)
             ON CONFLICT (name) DO UPDATE SET value = meta.value + 1
             RETURNING value",
            &[&counter.name()],
        )
        .map(|row| row.get(0))
    }

    fn bump_at_commit(&mut self, counter: Counter) -> Result<()> {
        // Bumped with the `COMMIT`, in its round trip, on a shard row of this
        // server process: writers of different keys do not wait on one row.
        if !self.bump_at_commit.contains(&counter) {
            self.bump_at_commit.push(counter);
        }
        Ok(())
    }
}

const EPISODIC_COLUMNS: &str = "id, text, tags, importance, created_at, last_accessed, source_ref, source, \
                                embedding_space, embedding IS NOT NULL, is_deleted, scope";

fn episodic_row(row: &postgres::Row) -> EpisodicRow {
    EpisodicRow {
        id: row.get(0),
        text: row.get(1),
        tags_json: row.get(2),
        importance: row.get(3),
        created_at: row.get(4),
        last_accessed: row.get(5),
        source_ref: row.get(6),
        source: row.get(7),
        embedding_space: row.get(8),
        has_vector: row.get(9),
        is_deleted: row.get(10),
        scope: row.get(11),
    }
}

impl EpisodicRows for PgTx<'_> {
    fn insert_episodic(&mut self, row: &NewEpisodicRow<'_>) -> Result<i64> {
        let (blob, space) = row.vector.unzip();
        self.lock_episodic()?;
        let id: i64 = self
            .query_one(
                "writing an episodic row",
                "INSERT INTO episodic_memories
                    (text, tags, importance, source, created_at, is_deleted, embedding, embedding_space, source_ref, scope)
                 VALUES ($1, $2, $3, $4, $5, FALSE, $6, $7, $8, $9) RETURNING id",
                &[
                    &row.text,
                    &row.tags_json,
                    &row.importance,
                    &row.source,
                    &row.created_at,
                    &blob,
                    &space,
                    &row.source_ref,
                    &row.scope,
                ],
            )?
            .get(0);
        self.bump_revision(Counter::EpisodicText)?;
        Ok(id)
    }

    fn tombstone_episodic(&mut self, id: i64) -> Result<Option<String>> {
        self.lock_episodic()?;
        let text: Option<String> = self
            .query_opt(
                "tombstoning an episodic row",
                "UPDATE episodic_memories SET is_deleted = TRUE WHERE id = $1 AND NOT is_deleted RETURNING text",
                &[&id],
            )?
            .map(|row| row.get(0));
        if text.is_some() {
            self.bump_revision(Counter::EpisodicText)?;
        }
        Ok(text)
    }

    fn episodic_with_text(&mut self, text: &str) -> Result<Option<i64>> {
        self.lock_episodic()?;
        Ok(self
            .query_opt(
                "checking for a duplicate",
                "SELECT id FROM episodic_memories WHERE text = $1 AND NOT is_deleted ORDER BY id LIMIT 1",
                &[&text],
            )?
            .map(|row| row.get(0)))
    }

    fn episodic_is_active(&mut self, id: i64) -> Result<bool> {
        self.lock_episodic()?;
        let deleted: Option<bool> = self
            .query_opt(
                "checking for a near duplicate",
                "SELECT is_deleted FROM episodic_memories WHERE id = $1",
                &[&id],
            )?
            .map(|row| row.get(0));
        Ok(deleted == Some(false))
    }

    fn episodic_eviction_order(&mut self, limit: usize) -> Result<Vec<i64>> {
        self.lock_episodic()?;
        let rows = self.query(
            "choosing rows to evict",
            "SELECT id FROM episodic_memories WHERE NOT is_deleted
             ORDER BY importance ASC, created_at ASC, id ASC LIMIT $1",
            &[&bound(limit)],
        )?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    fn episodic_row(&mut self, id: i64, vector_space: Option<&str>) -> Result<Option<(EpisodicRow, Option<Vec<u8>>)>> {
        self.lock_episodic()?;
        let row = self.query_opt(
            "reading an episodic row",
            &format!(
                "SELECT {EPISODIC_COLUMNS}, CASE WHEN embedding_space = $2 THEN embedding END
                 FROM episodic_memories WHERE id = $1"
            ),
            &[&id, &vector_space],
        )?;
        Ok(row.map(|row| (episodic_row(&row), row.get(12))))
    }

    fn episodic_rows(
        &mut self,
        ids: &[i64],
        vector_space: Option<&str>,
    ) -> Result<Vec<(EpisodicRow, Option<Vec<u8>>)>> {
        self.lock_episodic()?;
        let rows = self.query(
            "reading episodic rows",
            &format!(
                "SELECT {EPISODIC_COLUMNS}, CASE WHEN embedding_space = $2 THEN embedding END
                 FROM episodic_memories WHERE id = ANY($1)"
            ),
            &[&ids, &vector_space],
        )?;
        Ok(rows.iter().map(|row| (episodic_row(row), row.get(12))).collect())
    }

    fn episodic_page(&mut self, limit: usize, offset: usize) -> Result<Vec<EpisodicRow>> {
        self.lock_episodic()?;
        let rows = self.query(
            "listing episodic rows",
            &format!(
                "SELECT {EPISODIC_COLUMNS} FROM episodic_memories WHERE NOT is_deleted
                 ORDER BY created_at DESC, id DESC LIMIT $1 OFFSET $2"
            ),
            &[&bound(limit), &bound(offset)],
        )?;
        Ok(rows.iter().map(episodic_row).collect())
    }

    fn episodic_active_ids(&mut self) -> Result<Vec<i64>> {
        self.lock_episodic()?;
        let rows = self.query(
            "listing active episodic rows",
            "SELECT id FROM episodic_memories WHERE NOT is_deleted ORDER BY id",
            &[],
        )?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    fn episodic_live_count(&mut self) -> Result<i64> {
        self.lock_episodic()?;
        let row = self.query_one(
            "counting active episodic rows",
            "SELECT value FROM meta WHERE name = 'episodic_live'",
            &[],
        )?;
        Ok(row.get(0))
    }

    fn episodic_vectors_up_to(&mut self, space: &str, limit: i64) -> Result<i64> {
        self.lock_episodic()?;
        self.count(
            "SELECT count(*) FROM (SELECT FROM episodic_memories
             WHERE NOT is_deleted AND embedding_space = $1 AND embedding IS NOT NULL LIMIT $2) c",
            &[&space, &limit],
        )
    }

    fn episodic_counts(&mut self, space: Option<&str>) -> Result<EpisodicCounts> {
        // The kept counts, and the rows with a vector from their index.
        // `embedding_space = NULL` is never true: no vectors count without a space.
        self.lock_episodic()?;
        let row = self.query_one(
            "counting episodic rows",
            "SELECT (SELECT value FROM meta WHERE name = 'episodic_live'),
                    (SELECT value FROM meta WHERE name = 'episodic_deleted'),
                    (SELECT count(*) FROM episodic_memories
                     WHERE NOT is_deleted AND embedding_space = $1 AND embedding IS NOT NULL)",
            &[&space],
        )?;
        Ok(EpisodicCounts { live: row.get(0), deleted: row.get(1), with_vectors: row.get(2) })
    }

    fn touch_episodic(&mut self, touches: &[(i64, i64)]) -> Result<()> {
        if touches.is_empty() {
            return Ok(());
        }
        let (ids, ats): (Vec<i64>, Vec<i64>) = touches.iter().copied().unzip();
        // One statement for every row and time; a row named twice takes its last time.
        self.execute(
            "recording last_accessed",
            "UPDATE episodic_memories AS m SET last_accessed = t.at
             FROM (SELECT DISTINCT ON (id) id, at FROM unnest($1::BIGINT[], $2::BIGINT[]) WITH ORDINALITY AS u (id, at, n)
                   ORDER BY id, n DESC) AS t
             WHERE m.id = t.id",
            &[&ids, &ats],
        )?;
        Ok(())
    }
}

impl EpisodicVectors for PgTx<'_> {
    fn episodic_vectors(&mut self, space: &str, only: Option<&[i64]>) -> Result<Vec<(i64, Vec<u8>)>> {
        self.lock_episodic()?;
        let operation = "loading episodic vectors";
        let rows = match only {
            None => self.query(
                operation,
                "SELECT id, embedding FROM episodic_memories
                 WHERE NOT is_deleted AND embedding_space = $1 AND embedding IS NOT NULL ORDER BY id",
                &[&space],
            )?,
            // In the order asked, as one lookup per id would answer.
            Some(ids) => self.query(
                operation,
                "SELECT m.id, m.embedding FROM unnest($2::BIGINT[]) WITH ORDINALITY AS o (id, n)
                 JOIN episodic_memories m ON m.id = o.id
                 WHERE NOT m.is_deleted AND m.embedding_space = $1 AND m.embedding IS NOT NULL ORDER BY o.n",
                &[&space, &ids],
            )?,
        };
        Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
    }

    fn episodic_vector_ids(&mut self, space: &str) -> Result<Vec<i64>> {
        self.lock_episodic()?;
        let rows = self.query(
            "listing episodic vector ids",
            "SELECT id FROM episodic_memories
             WHERE NOT is_deleted AND embedding_space = $1 AND embedding IS NOT NULL ORDER BY id",
            &[&space],
        )?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    fn episodic_missing_vectors(
        &mut self,
        space: Option<&str>,
        after_id: i64,
        limit: usize,
    ) -> Result<Vec<(i64, String)>> {
        self.lock_episodic()?;
        let rows = self.query(
            "finding episodic rows without vectors",
            "SELECT id, text FROM episodic_memories
             WHERE NOT is_deleted AND id > $2 AND (embedding_space IS DISTINCT FROM $1 OR embedding IS NULL)
             ORDER BY id LIMIT $3",
            &[&space, &after_id, &bound(limit)],
        )?;
        Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
    }

    fn episodic_missing_count(&mut self, space: Option<&str>) -> Result<i64> {
        self.lock_episodic()?;
        self.count(
            "SELECT count(*) FROM episodic_memories
             WHERE NOT is_deleted AND (embedding_space IS DISTINCT FROM $1 OR embedding IS NULL)",
            &[&space],
        )
    }

    fn set_episodic_vector(&mut self, id: i64, text: &str, blob: &[u8], space: &str) -> Result<bool> {
        self.lock_episodic()?;
        let changed = self.execute(
            "storing backfilled vectors",
            "UPDATE episodic_memories SET embedding = $2, embedding_space = $3
             WHERE id = $1 AND NOT is_deleted AND text = $4",
            &[&id, &blob, &space, &text],
        )?;
        Ok(changed > 0)
    }
}

impl EpisodicText for PgTx<'_> {
    fn episodic_documents(&mut self, only: Option<&[i64]>) -> Result<Vec<(i64, String, String)>> {
        self.lock_episodic()?;
        let operation = "loading episodic texts";
        let rows = match only {
            None => self.query(
                operation,
                "SELECT id, text, tags FROM episodic_memories WHERE NOT is_deleted ORDER BY id",
                &[],
            )?,
            Some(ids) => self.query(
                operation,
                "SELECT m.id, m.text, m.tags FROM unnest($1::BIGINT[]) WITH ORDINALITY AS o (id, n)
                 JOIN episodic_memories m ON m.id = o.id
                 WHERE NOT m.is_deleted ORDER BY o.n",
                &[&ids],
            )?,
        };
        Ok(rows.iter().map(|row| (row.get(0), row.get(1), row.get(2))).collect())
    }

    fn episodic_quoting(&mut self, needle: &str, _words: &[String]) -> Result<Vec<(i64, String)>> {
        self.lock_episodic()?;
        let rows = self.query("finding stale episodic rows", self.quoting, &[&needle])?;
        Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
    }

    fn episodic_keyword_hits(&mut self, fts_query: &str, k: usize) -> Result<Option<Vec<(i64, f64)>>> {
        let words: Vec<&str> = keywords::fts_query_words(fts_query).collect();
        // In the same round trip as the search.
        self.enqueue("searching episodic keywords", KEYWORD_PREFETCH, &[], false)?;
        let rows = self.query(
            "searching episodic keywords",
            KEYWORD_HITS,
            &[&words, &FTS_COMMON_TERM_ROWS, &(k as i64), &bm25::K1, &bm25::B, &bm25::MIN_IDF],
        )?;
        Ok(Some(rows.iter().map(|row| (row.get(0), row.get(1))).collect()))
    }
}

impl TranscriptRows for PgTx<'_> {
    fn session(&mut self, session_key: &str) -> Result<Option<SessionRow>> {
        self.lock("session", session_key)?;
        let row = self.query_opt(
            "reading a session's transcript state",
            "SELECT next_seq, history_marker, preferences_marker, last_activity, claim_owner, claim_until,
                    (SELECT count(*) FROM session_transcripts t WHERE t.session_key = s.session_key), scope
             FROM session_state s WHERE session_key = $1",
            &[&session_key],
        )?;
        Ok(row.map(|row| SessionRow {
            next_seq: row.get(0),
            history_marker: row.get(1),
            preferences_marker: row.get(2),
            last_activity: row.get(3),
            claim_owner: row.get(4),
            claim_until: row.get(5),
            stored: row.get(6),
            scope: row.get(7),
        }))
    }

    fn ensure_session(&mut self, session_key: &str, at: i64, scope: &str) -> Result<()> {
        self.lock("session", session_key)?;
        self.execute(
            "creating a session's transcript state",
            "INSERT INTO session_state (session_key, last_activity, scope) VALUES ($1, $2, $3)
             ON CONFLICT (session_key) DO NOTHING",
            &[&session_key, &at, &scope],
        )?;
        Ok(())
    }

    fn insert_transcript(&mut self, session_key: &str, row: &TranscriptRow) -> Result<()> {
        self.lock("session", session_key)?;
        self.execute(
            "appending to a session transcript",
            "INSERT INTO session_transcripts (session_key, seq, role, content, tool_calls, created_at)
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[&session_key, &row.seq, &row.role, &row.content, &row.tool_calls_json, &row.created_at],
        )?;
        Ok(())
    }

    fn advance_session(&mut self, session_key: &str, next_seq: i64, at: i64) -> Result<()> {
        self.lock("session", session_key)?;
        self.execute(
            "appending to a session transcript",
            "UPDATE session_state SET next_seq = $2, last_activity = greatest(last_activity, $3)
             WHERE session_key = $1",
            &[&session_key, &next_seq, &at],
        )?;
        Ok(())
    }

    fn transcript_rows(&mut self, session_key: &str, from: i64, to: i64) -> Result<Vec<TranscriptRow>> {
        self.lock("session", session_key)?;
        let rows = self.query(
            "reading a session transcript",
            "SELECT seq, created_at, role, content, tool_calls FROM session_transcripts
             WHERE session_key = $1 AND seq >= $2 AND seq < $3 ORDER BY seq",
            &[&session_key, &from, &to],
        )?;
        Ok(rows
            .iter()
            .map(|row| TranscriptRow {
                seq: row.get(0),
                created_at: row.get(1),
                role: row.get(2),
                content: row.get(3),
                tool_calls_json: row.get(4),
            })
            .collect())
    }

    fn delete_transcript_below(&mut self, session_key: &str, seq: i64) -> Result<usize> {
        self.lock("session", session_key)?;
        let removed = self.execute(
            "pruning a session transcript",
            "DELETE FROM session_transcripts WHERE session_key = $1 AND seq < $2",
            &[&session_key, &seq],
        )?;
        Ok(usize::try_from(removed).unwrap_or(usize::MAX))
    }

    fn idle_sessions(&mut self, before: i64) -> Result<Vec<String>> {
        // Ties in byte order of the key, as SQLite's index on (last_activity) of a key-ordered table gives.
        let rows = self.query(
            "listing idle sessions",
            "SELECT session_key FROM session_state
             WHERE history_marker < next_seq AND last_activity < $1 ORDER BY last_activity, session_key",
            &[&before],
        )?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    fn set_claim(&mut self, session_key: &str, claim: Option<(i64, i64)>) -> Result<()> {
        self.lock("session", session_key)?;
        let (owner, until) = claim.unzip();
        self.execute(
            "claiming a session for consolidation",
            "UPDATE session_state SET claim_owner = $2, claim_until = $3 WHERE session_key = $1",
            &[&session_key, &owner, &until],
        )?;
        Ok(())
    }

    fn release_claim(&mut self, session_key: &str, owner: i64) -> Result<()> {
        self.lock("session", session_key)?;
        self.execute(
            "releasing a consolidation claim",
            "UPDATE session_state SET claim_owner = NULL, claim_until = NULL WHERE session_key = $1 AND claim_owner = $2",
            &[&session_key, &owner],
        )?;
        Ok(())
    }

    fn move_marker(&mut self, session_key: &str, marker: MarkerColumn, from: i64, to: i64) -> Result<bool> {
        self.lock("session", session_key)?;
        let sql = match marker {
            MarkerColumn::History => {
                "UPDATE session_state SET history_marker = $3 WHERE session_key = $1 AND history_marker = $2"
            }
            MarkerColumn::Preferences => {
                "UPDATE session_state SET preferences_marker = $3 WHERE session_key = $1 AND preferences_marker = $2"
            }
        };
        Ok(self.execute("moving a consolidation marker", sql, &[&session_key, &from, &to])? == 1)
    }
}

impl LedgerRows for PgTx<'_> {
    fn ledger_items(&mut self, source: &str) -> Result<Vec<(String, String)>> {
        self.lock("ledger", source)?;
        let rows = self.query(
            "reading the import provenance ledger",
            "SELECT path, item_hash FROM import_provenance WHERE source = $1 ORDER BY path, item_hash",
            &[&source],
        )?;
        Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
    }

    fn ledger_lessons_written(&mut self) -> Result<i64> {
        self.count(
            "SELECT count(*) FROM import_provenance
             WHERE landed_as = 'lesson' AND outcome = 'written' AND source <> $1",
            &[&EXPORT_LEDGER_SOURCE],
        )
    }

    fn record_ledger(&mut self, entry: &LedgerEntry<'_>) -> Result<()> {
        self.lock("ledger", entry.source)?;
        self.execute(
            "recording import provenance",
            "INSERT INTO import_provenance (source, path, item_hash, landed_as, outcome, target, recorded_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (source, path, item_hash) DO NOTHING",
            &[
                &entry.source,
                &entry.path,
                &entry.item_hash,
                &entry.landed_as,
                &entry.outcome,
                &entry.target,
                &entry.recorded_at,
            ],
        )?;
        Ok(())
    }

    fn setting(&mut self, name: &str) -> Result<Option<String>> {
        self.lock("setting", name)?;
        Ok(self
            .query_opt("reading a setting", "SELECT value FROM settings WHERE name = $1", &[&name])?
            .map(|row| row.get(0)))
    }

    fn set_setting(&mut self, name: &str, value: &str) -> Result<()> {
        self.lock("setting", name)?;
        self.execute(
            "recording a setting",
            "INSERT INTO settings (name, value) VALUES ($1, $2)
             ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            &[&name, &value],
        )?;
        Ok(())
    }
}

impl EvidenceRows for PgTx<'_> {
    fn evidence(&mut self, layer: EvidenceLayer, target: &str) -> Result<Option<EvidenceRow>> {
        Ok(self
            .query_opt(
                "reading the evidence of a row",
                "SELECT session_key, first_seq, last_seq, quote FROM memory_evidence WHERE layer = $1 AND target = $2",
                &[&layer.name(), &target],
            )?
            .map(|row| EvidenceRow {
                session_key: row.get(0),
                first_seq: row.get(1),
                last_seq: row.get(2),
                quote: row.get(3),
            }))
    }

    fn layer_evidence(&mut self, layer: EvidenceLayer) -> Result<Vec<(String, EvidenceRow)>> {
        let rows = self.query(
            "reading the evidence of rows",
            "SELECT target, session_key, first_seq, last_seq, quote FROM memory_evidence WHERE layer = $1 ORDER BY target",
            &[&layer.name()],
        )?;
        Ok(rows
            .iter()
            .map(|row| {
                (
                    row.get(0),
                    EvidenceRow {
                        session_key: row.get(1),
                        first_seq: row.get(2),
                        last_seq: row.get(3),
                        quote: row.get(4),
                    },
                )
            })
            .collect())
    }

    fn set_evidence(&mut self, layer: EvidenceLayer, target: &str, evidence: Option<&EvidenceRow>) -> Result<()> {
        let (session_key, first_seq, last_seq, quote) = evidence_params(evidence);
        self.defer(
            "recording the evidence of a row",
            &SET_EVIDENCE,
            &[&layer.name(), &target, &session_key, &first_seq, &last_seq, &quote],
        )
    }
}

impl RunRows for PgTx<'_> {
    fn insert_run(&mut self, state: &str, at: i64, body: &str) -> Result<i64> {
        self.lock("runs", "")?;
        let row = self.query_one(
            "recording a consolidation run",
            "INSERT INTO consolidation_runs (state, created_at, updated_at, body) VALUES ($1, $2, $2, $3) RETURNING id",
            &[&state, &at, &body],
        )?;
        Ok(row.get(0))
    }

    fn run_row(&mut self, id: i64) -> Result<Option<RunRow>> {
        self.lock("runs", "")?;
        Ok(self
            .query_opt(
                "reading a consolidation run",
                "SELECT id, state, created_at, updated_at, body FROM consolidation_runs WHERE id = $1",
                &[&id],
            )?
            .map(|row| pg_run_row(&row)))
    }

    fn run_rows(&mut self) -> Result<Vec<RunRow>> {
        self.lock("runs", "")?;
        let rows = self.query(
            "listing consolidation runs",
            "SELECT id, state, created_at, updated_at, body FROM consolidation_runs ORDER BY id DESC",
            &[],
        )?;
        Ok(rows.iter().map(pg_run_row).collect())
    }

    fn update_run(&mut self, id: i64, state: &str, at: i64, body: &str) -> Result<()> {
        self.lock("runs", "")?;
        self.execute(
            "recording a consolidation run",
            "UPDATE consolidation_runs SET state = $2, updated_at = $3, body = $4 WHERE id = $1",
            &[&id, &state, &at, &body],
        )?;
        Ok(())
    }

    fn delete_run(&mut self, id: i64) -> Result<()> {
        self.lock("runs", "")?;
        self.execute("pruning consolidation runs", "DELETE FROM consolidation_runs WHERE id = $1", &[&id])?;
        Ok(())
    }
}

fn pg_run_row(row: &postgres::Row) -> RunRow {
    RunRow { id: row.get(0), state: row.get(1), created_at: row.get(2), updated_at: row.get(3), body: row.get(4) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_read_every_shard_a_commit_bumps() {
        assert!(BUMP_AT_COMMIT.contains(&format!("pg_backend_pid() % {BUMP_SHARDS})")));
    }

    /// The keyword search's prefetch depth, for the rest of its transaction,
    /// from the session's own: raised to 64, never lowered, left at 0.
    #[test]
    fn a_keyword_search_raises_the_prefetch_depth_for_its_transaction_only() {
        let Some(url) = crate::store::db_tests::postgres_url() else { return };
        let mut client = Client::connect(&url, NoTls).unwrap();
        for (session, in_search) in [("1", "64"), ("200", "200"), ("0", "0")] {
            client.batch_execute(&format!("SET effective_io_concurrency = {session}")).unwrap();
            let mut tx = client.transaction().unwrap();
            tx.execute(KEYWORD_PREFETCH, &[]).unwrap();
            let during: String = tx.query_one("SHOW effective_io_concurrency", &[]).unwrap().get(0);
            tx.commit().unwrap();
            let after: String = client.query_one("SHOW effective_io_concurrency", &[]).unwrap().get(0);
            assert_eq!((during.as_str(), after.as_str()), (in_search, session), "from a session at {session}");
        }
    }
}
