//! Episodic memory at scale: a store of `--rows` synthetic rows (the cap
//! raised to fit them), then, in a fresh process so its memory is the
//! store's alone: opening it, the first context, the index being ready
//! (from its snapshot when there is one), hybrid `episodic_context`
//! latency and the resident memory per row. With `--cairn` and `--model`,
//! also the resident memory of `cairn serve` on the same home with the
//! real model loaded, once its index is ready.
//!
//! ```text
//! cargo build --release -p cairn-gateway-bin --bin cairn -p cairn-tools --bin episodic_scale
//! target/release/episodic_scale --rows 1000000 --home /tmp/scale-1m \
//!     [--postgres-url postgres://cairn@127.0.0.1:PORT/cairn_scale] \
//!     [--cairn target/release/cairn --model ~/.local/share/cairn/models/all-MiniLM-L6-v2]
//! ```
//!
//! Rows are 12-word sentences over a 2,000-word vocabulary plus an
//! `(entry N)` tag, as in the `episodic` criterion bench; their vectors
//! come from the 384-wide word-vector embedder named all-MiniLM-L6-v2, so
//! searches run under that model's gate and the gateway, loading the real
//! model, reads them as its own space. A home that already holds `--rows`
//! rows is reused (the fill is printed once). With `--postgres-url` the rows
//! live in that PostgreSQL database (created if missing; every row after
//! the first written in bulk, with its vector) and the home keeps the
//! snapshot.

#[path = "support/serve_address.rs"]
mod serve_address;
#[path = "support/synthetic.rs"]
mod synthetic;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use cairn_embedder::{EmbeddingBackend, WordVectorEmbedder};
use cairn_memory_core::constants::EPISODIC_VECTORS_FILE_NAME;
use cairn_memory_core::{EpisodicQuery, MemoryConfig, MemoryDb, NewEpisode};
use synthetic::{query, sentence};

const DIM: usize = 384;
/// How long after the index is ready the gateway's memory is read again.
const SETTLE: Duration = Duration::from_secs(10);
const MODEL_ID: &str = "all-MiniLM-L6-v2";
/// Rows written per progress line.
const FILL_REPORT_EVERY: usize = 50_000;

struct Options {
    rows: usize,
    home: PathBuf,
    postgres_url: Option<String>,
    queries: usize,
    measure_only: bool,
    cairn: Option<PathBuf>,
    model: Option<PathBuf>,
}

fn options() -> anyhow::Result<Options> {
    let mut options = Options {
        rows: 100_000,
        home: PathBuf::new(),
        postgres_url: None,
        queries: 400,
        measure_only: false,
        cairn: None,
        model: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--rows" => options.rows = value()?.parse()?,
            "--home" => options.home = PathBuf::from(value()?),
            "--postgres-url" => options.postgres_url = Some(value()?),
            "--queries" => options.queries = value()?.parse()?,
            "--measure" => options.measure_only = true,
            "--cairn" => options.cairn = Some(PathBuf::from(value()?)),
            "--model" => options.model = Some(PathBuf::from(value()?)),
            other => bail!("unknown option {other}"),
        }
    }
    if options.home.as_os_str().is_empty() {
        bail!("--home is required");
    }
    if options.rows == 0 {
        bail!("--rows must be at least 1");
    }
    Ok(options)
}

/// The word-vector embedder under the model's name.
struct Named(WordVectorEmbedder);

impl EmbeddingBackend for Named {
    fn model_id(&self) -> &str {
        MODEL_ID
    }
    fn dim(&self) -> usize {
        DIM
    }
    fn is_ready(&self) -> bool {
        true
    }
    fn embed_batch(&self, texts: &[&str]) -> cairn_embedder::Result<Vec<Vec<f32>>> {
        self.0.embed_batch(texts)
    }
}

fn embedder() -> Arc<dyn EmbeddingBackend> {
    Arc::new(Named(WordVectorEmbedder::new(DIM)))
}

fn config(rows: usize) -> MemoryConfig {
    MemoryConfig { episodic_cap: rows.max(10_000), ..MemoryConfig::default() }
}

/// Creates the database `url` names when it does not exist, through the
/// server's `postgres` database.
fn ensure_database(url: &str) -> anyhow::Result<()> {
    if postgres::Client::connect(url, postgres::NoTls).is_ok() {
        return Ok(());
    }
    let (base, query) = url.split_once('?').map_or((url, None), |(base, query)| (base, Some(query)));
    let (server, name) = base.rsplit_once('/').context("the URL names no database")?;
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        bail!("the database name {name:?} is not a plain identifier");
    }
    let admin = match query {
        Some(query) => format!("{server}/postgres?{query}"),
        None => format!("{server}/postgres"),
    };
    let mut client = postgres::Client::connect(&admin, postgres::NoTls)?;
    client.batch_execute(&format!("CREATE DATABASE {name}"))?;
    Ok(())
}

fn open(options: &Options) -> anyhow::Result<MemoryDb> {
    let config = config(options.rows);
    let db = match &options.postgres_url {
        Some(url) => MemoryDb::open_postgres(url, &options.home, config)?,
        None => MemoryDb::open_in_home(&options.home, config)?,
    };
    Ok(db.with_embedder(embedder()))
}

fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:")?.trim().strip_suffix("kB")?.trim().parse().ok())
        .context("no VmRSS line")
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Rows written per statement of the PostgreSQL bulk fill.
const BULK_BATCH: usize = 5_000;

/// Writes rows `from..rows` straight into a PostgreSQL store's table, with
/// their vectors, in statements of [`BULK_BATCH`] rows: the write path
/// takes a few milliseconds a row there (its checks, locks and audit), far
/// too long for a million. Each row takes the source, scope and embedding
/// space of row 1, which came through the write path; the counts follow by
/// the table's own trigger, and the revisions are bumped once at the end,
/// so every cache sees a changed store.
fn bulk_fill_postgres(url: &str, from: usize, rows: usize) -> anyhow::Result<()> {
    let mut client = postgres::Client::connect(url, postgres::NoTls)?;
    // The schema `MemoryDb::open_postgres` uses.
    client.batch_execute("SET search_path TO cairn")?;
    let first =
        client.query_one("SELECT source, scope, embedding_space FROM episodic_memories ORDER BY id LIMIT 1", &[])?;
    let (source, scope, space): (String, String, Option<String>) = (first.get(0), first.get(1), first.get(2));
    let space = space.context("row 1 has no vector; it must be written with one")?;
    let embedder = embedder();
    let started = Instant::now();
    let mut seed = from;
    while seed < rows {
        let end = (seed + BULK_BATCH).min(rows);
        let texts: Vec<String> = (seed..end).map(sentence).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let blobs: Vec<Vec<u8>> = embedder
            .embed_batch(&refs)?
            .iter()
            .map(|vector| vector.iter().flat_map(|value| value.to_le_bytes()).collect())
            .collect();
        let importance: Vec<f64> = (seed..end).map(|seed| (seed % 10) as f64 / 10.0).collect();
        let created: Vec<i64> = (seed..end).map(|seed| 1_700_000_000_000 - (seed as i64 % 400) * 86_400_000).collect();
        client.execute(
            "INSERT INTO episodic_memories
                (text, tags, importance, source, created_at, is_deleted, embedding, embedding_space, scope)
             SELECT text, '[]', importance, $4, created_at, FALSE, embedding, $5, $6
             FROM unnest($1::TEXT[], $2::FLOAT8[], $3::INT8[], $7::BYTEA[]) AS rows (text, importance, created_at, embedding)",
            &[&texts, &importance, &created, &source, &space, &scope, &blobs],
        )?;
        if seed / FILL_REPORT_EVERY != end / FILL_REPORT_EVERY {
            eprintln!("  {end} rows, {:.0?}", started.elapsed());
        }
        seed = end;
    }
    client.execute(
        "INSERT INTO meta (name, value) VALUES ('episodic_revision', 1), ('episodic_text_revision', 1)
         ON CONFLICT (name) DO UPDATE SET value = meta.value + 1",
        &[],
    )?;
    Ok(())
}

/// Writes the rows the store lacks, then embeds them and builds and saves
/// the index; nothing when the store is full already. On PostgreSQL the
/// first row goes through the write path and the rest in bulk.
fn fill(options: &Options) -> anyhow::Result<()> {
    std::fs::create_dir_all(&options.home)?;
    if let Some(url) = &options.postgres_url {
        ensure_database(url)?;
    }
    // The gateway reads the raised cap from the home's settings.
    std::fs::write(
        options.home.join("config.json"),
        serde_json::to_string_pretty(&serde_json::json!({"memory": {"episodic_cap": options.rows.max(10_000)}}))?,
    )?;
    let db = open(options)?;
    let have = db.episodic_index_status()?.active;
    if have >= options.rows {
        // A store filled before the index kept a vector file gets one.
        if !options.home.join(EPISODIC_VECTORS_FILE_NAME).exists() {
            db.build_episodic_index()?;
            let started = Instant::now();
            db.save_episodic_vector_file()?;
            println!("fill: vector file written in {:.1?}", started.elapsed());
        }
        return Ok(());
    }
    eprintln!("filling {} rows ({have} there) ...", options.rows);
    let started = Instant::now();
    // On PostgreSQL only the first row goes through the write path.
    let through_write_path = match options.postgres_url {
        Some(_) => have..have.max(1),
        None => have..options.rows,
    };
    for seed in through_write_path.clone() {
        let episode = NewEpisode::new(sentence(seed))
            .importance((seed % 10) as f64 / 10.0)
            .created_at(1_700_000_000_000 - (seed as i64 % 400) * 86_400_000)
            .defer_embedding(options.postgres_url.is_none());
        db.write_episodic(&episode)?;
        if (seed + 1) % FILL_REPORT_EVERY == 0 {
            eprintln!("  {} rows, {:.0?}", seed + 1, started.elapsed());
        }
    }
    if let Some(url) = &options.postgres_url {
        bulk_fill_postgres(url, through_write_path.end, options.rows)?;
    }
    let written = started.elapsed();
    let started = Instant::now();
    let report = db.backfill_missing_embeddings(None)?;
    let backfill = started.elapsed();
    if report.remaining != 0 {
        bail!("backfill left {} rows without a vector", report.remaining);
    }
    let started = Instant::now();
    let status = db.build_episodic_index()?;
    let built = started.elapsed();
    let started = Instant::now();
    db.save_episodic_index()?;
    db.save_episodic_vector_file()?;
    let saved = started.elapsed();
    println!(
        "fill: {} rows written in {written:.1?} ({:.0} rows/s); backfill of their vectors {backfill:.1?} \
         ({:.0} rows/s); index built from the table {built:.1?} ({} vectors); snapshot and vector file saved {saved:.1?}",
        options.rows - have,
        (options.rows - have) as f64 / written.as_secs_f64(),
        report.embedded as f64 / backfill.as_secs_f64(),
        status.index_len,
    );
    Ok(())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

/// Runs in its own process: open, first context, index ready, latency, memory.
fn measure(options: &Options) -> anyhow::Result<()> {
    let pid = std::process::id();
    // Query vectors are made before the store is opened, so their cost and
    // memory are not the store's.
    let embedder = embedder();
    let queries: Vec<(String, Vec<f32>)> = (0..options.queries)
        .map(|i| {
            let text = query(i, options.rows);
            let vector = embedder.embed(&text)?;
            Ok((text, vector))
        })
        .collect::<anyhow::Result<_>>()?;
    let before_kib = rss_kib(pid)?;
    let started = Instant::now();
    let db = open(options)?;
    let opened = started.elapsed();
    let (text, vector) = &queries[0];
    let context = db.episodic_context_for(&EpisodicQuery::new(text.clone()).vector(vector.clone()), 3_000)?;
    let first = started.elapsed();
    // A second query while the indexes still load.
    let (text, vector) = &queries[1];
    let asked = Instant::now();
    db.episodic_context_for(&EpisodicQuery::new(text.clone()).vector(vector.clone()), 3_000)?;
    let second = asked.elapsed();
    let status = db.build_episodic_index()?;
    let ready = started.elapsed();
    if status.index_len != options.rows {
        bail!("the index holds {} vectors, not {}", status.index_len, options.rows);
    }
    let ready_kib = rss_kib(pid)?;
    let mut times = Vec::with_capacity(queries.len());
    let mut admitted = 0;
    for (text, vector) in &queries {
        let query = EpisodicQuery::new(text.clone()).vector(vector.clone());
        let started = Instant::now();
        let context = db.episodic_context_for(&query, 3_000)?;
        times.push(started.elapsed());
        admitted += context.hits.len();
    }
    times.sort_unstable();
    let after_kib = rss_kib(pid)?;
    let rows = options.rows as f64;
    println!("| rows | {} |", options.rows);
    println!("| backend | {} |", if options.postgres_url.is_some() { "PostgreSQL" } else { "SQLite" });
    println!("| open | {opened:.1?} |");
    println!(
        "| first context | {:.1?} after open returned ({} hits; {first:.1?} from the start of the open); \
         the next one {second:.1?} |",
        first - opened,
        context.hits.len()
    );
    println!(
        "| index ready after open | {ready:.1?} ({}) |",
        if status.loaded_from_snapshot { "from its snapshot" } else { "built from the table" }
    );
    println!(
        "| hybrid `episodic_context`, {} queries | p50 {:.2?}, p95 {:.2?}, max {:.2?}; {:.2} hits each |",
        times.len(),
        percentile(&times, 0.5),
        percentile(&times, 0.95),
        percentile(&times, 1.0),
        admitted as f64 / times.len() as f64
    );
    println!(
        "| resident memory | {:.0} MiB before open, {:.0} MiB index ready, {:.0} MiB after the queries |",
        mib(before_kib),
        mib(ready_kib),
        mib(after_kib)
    );
    println!(
        "| resident bytes per row | {:.0} (vector index {:.0}, keyword index {:.0}) |",
        (after_kib.saturating_sub(before_kib) * 1024) as f64 / rows,
        status.index_bytes as f64 / rows,
        status.keyword_index_bytes as f64 / rows,
    );
    Ok(())
}

/// `cairn serve` on the home with the real model: its resident memory once
/// the episodic index is ready.
fn gateway(options: &Options, cairn: &Path, model: &Path) -> anyhow::Result<()> {
    let started = Instant::now();
    let port_file = options.home.join("scale.port");
    let _ = std::fs::remove_file(&port_file);
    let mut command = Command::new(cairn);
    command
        .arg("--home")
        .arg(&options.home)
        .args(["serve", "--port", "0", "--port-file"])
        .arg(&port_file)
        .env("CAIRN_EMBED_MODEL_PATH", model)
        .env("CAIRN_SKIP_MODEL_DOWNLOAD", "1")
        .env_remove("CAIRN_HOME")
        .env_remove("CAIRN_EMBED_MODEL_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(url) = &options.postgres_url {
        command.env("CAIRN_STORAGE_URL", url);
    }
    let mut child = command.spawn().context("starting cairn serve")?;
    let result = (|| {
        let base = format!("http://{}", serve_address::wait_for_address(&mut child, &port_file)?);
        let token = std::fs::read_to_string(options.home.join("server.token"))?.trim().to_owned();
        let agent = ureq::Agent::new_with_defaults();
        let search = |i: usize| -> anyhow::Result<serde_json::Value> {
            Ok(agent
                .get(format!("{base}/api/memory/episodic/search"))
                .query("q", query(i, options.rows))
                .header("Authorization", &format!("Bearer {token}"))
                .call()?
                .body_mut()
                .read_json()?)
        };
        // The first search starts the index loading, if start-up has not.
        search(0)?;
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            let status: serde_json::Value = agent
                .get(format!("{base}/api/memory/embedding-status"))
                .header("Authorization", &format!("Bearer {token}"))
                .call()?
                .body_mut()
                .read_json()?;
            if status["episodic_index"]["ready"] == serde_json::Value::Bool(true)
                && status["episodic_index"]["index_len"].as_u64() == Some(options.rows as u64)
            {
                break;
            }
            if Instant::now() > deadline {
                bail!("the gateway's index was not ready after 10 minutes: {status}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let ready = started.elapsed();
        let response = search(1)?;
        let kib = rss_kib(child.id())?;
        // Once the indexes are loaded the gateway hands the memory their
        // loading freed back to the system; what stays is its working size.
        std::thread::sleep(SETTLE);
        search(2)?;
        let settled_kib = rss_kib(child.id())?;
        println!(
            "| `cairn serve` with the model, index ready | {:.0} MiB resident, ready {ready:.1?} after start; \
             a search answered {} hits; {:.0} MiB resident {SETTLE:?} later |",
            mib(kib),
            response["results"].as_array().map_or(0, Vec::len),
            mib(settled_kib)
        );
        Ok(())
    })();
    let _ = child.kill();
    let _ = child.wait();
    result
}

fn main() -> anyhow::Result<()> {
    let options = options()?;
    if options.measure_only {
        return measure(&options);
    }
    fill(&options)?;
    // `/proc/self/exe` runs this very program even when a rebuild has
    // replaced the file meanwhile.
    let mut command = Command::new("/proc/self/exe");
    command.args(std::env::args().skip(1)).arg("--measure");
    if !command.status()?.success() {
        bail!("the measuring process failed");
    }
    if let (Some(cairn), Some(model)) = (&options.cairn, &options.model) {
        gateway(&options, cairn, model)?;
    }
    Ok(())
}
