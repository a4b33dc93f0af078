//! `cairn memory episodic|search|import-episodic|backfill`: episodic memory
//! from the command line.
//!
//! The embedding model is used when it is installed (or named by
//! `CAIRN_EMBED_MODEL_PATH`); without it every command still works, and
//! search answers from keywords. Exit status as for the other memory
//! commands: 2 when a write is refused by a rule, 1 when a row to delete
//! does not exist.

use cairn_memory_core::ScopeFilter;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use cairn_embedder::{EmbeddingBackend, ModelInfo, ModelManager};
use cairn_memory_core::{
    DeleteOutcome, EpisodicOutcome, EpisodicQuery, Fusion, MemoryDb, NewEpisode, RetrievalMode, Source, constants,
};
use serde_json::{Value, json};

use super::progress::with_progress;
use crate::home::Home;

/// `cairn memory episodic ...`
#[derive(Debug, clap::Subcommand)]
pub(crate) enum EpisodicCommand {
    /// Write one episodic memory.
    Add(EpisodicAddArgs),
    /// List active episodic memories, newest first.
    List(EpisodicListArgs),
    /// Tombstone an episodic memory by id.
    Delete(EpisodicDeleteArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct EpisodicAddArgs {
    /// The fragment (10 to 2,000 characters).
    pub(crate) text: String,
    /// Importance, 0 to 1.
    #[arg(long, default_value_t = constants::EPISODIC_DEFAULT_IMPORTANCE)]
    pub(crate) importance: f64,
    /// Comma-separated tags.
    #[arg(long, value_delimiter = ',')]
    pub(crate) tags: Vec<String>,
    /// Where it came from (any string, e.g. `conv-26:D1:3`).
    #[arg(long)]
    pub(crate) source_ref: Option<String>,
    /// When it happened (RFC 3339; a time without zone is UTC).
    #[arg(long)]
    pub(crate) created_at: Option<String>,
    #[command(flatten)]
    pub(crate) scope: super::memory_forget::ScopeArgs,
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct EpisodicListArgs {
    /// At most this many.
    #[arg(short = 'n', long, default_value_t = 20)]
    pub(crate) limit: usize,
    /// Skip this many first.
    #[arg(long, default_value_t = 0)]
    pub(crate) offset: usize,
    #[command(flatten)]
    pub(crate) scope: super::memory_forget::ScopeArgs,
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, clap::Args)]
pub(crate) struct EpisodicDeleteArgs {
    /// The row id.
    pub(crate) id: i64,
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `cairn memory search`
#[derive(Debug, clap::Args)]
pub(crate) struct SearchArgs {
    /// The query (or use `--queries`).
    #[arg(required_unless_present = "queries")]
    pub(crate) query: Option<String>,
    /// A JSONL file of queries (`query` or `question`, optional `id` and
    /// `now`); one JSON result line per row.
    #[arg(long, conflicts_with = "query")]
    pub(crate) queries: Option<PathBuf>,
    /// Most results.
    #[arg(short = 'n', long, default_value_t = constants::EPISODIC_CONTEXT_LIMIT)]
    pub(crate) limit: usize,
    /// Only what the `[Episodic Memory]` context block admits, and the block.
    #[arg(long)]
    pub(crate) context: bool,
    /// Character cap of the context block.
    #[arg(long, default_value_t = constants::EPISODIC_INJECT_CAP)]
    pub(crate) cap: usize,
    /// "Now" for ages (RFC 3339; a time without zone is UTC).
    #[arg(long)]
    pub(crate) now: Option<String>,
    /// `hybrid` (default), `vector` (the specification's pure-vector ranking) or `keyword`.
    #[arg(long, default_value = "hybrid")]
    pub(crate) mode: String,
    /// Hybrid fusion: `weighted` (the default, 0.7 cosine), `weighted:W`, `rrf` (k 60) or `rrf:K`.
    #[arg(long)]
    pub(crate) fusion: Option<String>,
    /// Weight of importance × age in hybrid and keyword modes (0 to 1).
    #[arg(long, default_value_t = constants::HYBRID_PRIOR_WEIGHT)]
    pub(crate) prior_weight: f64,
    /// Turn MMR diversification off.
    #[arg(long)]
    pub(crate) no_mmr: bool,
    /// Hybrid mode: MMR's λ, relevance against novelty (0 to 1; 1 is relevance alone).
    #[arg(long)]
    pub(crate) mmr_lambda: Option<f32>,
    /// Score factor `1 + B` for rows whose `Name:` speaker the query names (0 is off).
    #[arg(long)]
    pub(crate) speaker_boost: Option<f64>,
    /// Rows next to a top hit in its session score at least this share of its score (0 is off).
    #[arg(long)]
    pub(crate) neighbour_weight: Option<f64>,
    /// Score factor `1 + B` for rows inside the time window the query names (0 is off).
    #[arg(long)]
    pub(crate) time_boost: Option<f64>,
    /// Score factor `1 + B` for rows written in the same sitting as one of the best three (0 is off).
    #[arg(long)]
    pub(crate) session_boost: Option<f64>,
    /// The best rows lift their thread (the speaker's turns around them, the answer to their question) to this share of their score (0 to 1; 0 is off).
    #[arg(long)]
    pub(crate) thread_weight: Option<f64>,
    /// How many of the best rows lift their thread (1 to 50).
    #[arg(long)]
    pub(crate) thread_anchors: Option<usize>,
    /// The thread lifts no row above the row ranked this far (0 to 50; 0 is no cap).
    #[arg(long)]
    pub(crate) thread_keep: Option<usize>,
    /// Hybrid mode: candidates taken from each of the vector and keyword lists (1 to 1000).
    #[arg(long)]
    pub(crate) candidates: Option<usize>,
    /// Weighted fusion: scale bm25 by at least this share of the query's bm25 ceiling (0 to 1; 0 scales by the best hit only).
    #[arg(long)]
    pub(crate) keyword_ceiling_share: Option<f64>,
    /// Weighted fusion: rows under this raw cosine get no keyword score unless their keyword match is strong (0 to 1; 0 is off).
    #[arg(long)]
    pub(crate) keyword_min_cosine: Option<f64>,
    /// With `--context`: abstain when no row reaches this raw cosine (0 never abstains; default: the model's).
    #[arg(long)]
    pub(crate) abstain_below: Option<f32>,
    /// With `--context`: in a conversation (rows written `Name: text`), a query naming none of its speakers abstains when no row reaches this raw cosine (0: no stronger floor; default: the model's; `--abstain-below 0` turns both off).
    #[arg(long)]
    pub(crate) abstain_unnamed_below: Option<f32>,
    #[command(flatten)]
    pub(crate) scope: super::memory_forget::ScopeArgs,
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `cairn memory import-episodic`
#[derive(Debug, clap::Args)]
pub(crate) struct ImportArgs {
    /// JSONL rows with `text` and optional `created_at`, `importance`, `tags`, `source_ref`.
    pub(crate) file: PathBuf,
    /// Skip the backfill of vectors after the import.
    #[arg(long)]
    pub(crate) no_backfill: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `cairn memory backfill`
#[derive(Debug, clap::Args)]
pub(crate) struct BackfillArgs {
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

const EXIT_NOT_FOUND: u8 = 1;
const EXIT_REFUSED: u8 = 2;

/// The installed embedding model, if there is one; `None` means keyword search.
fn load_embedder(home: &Home) -> Option<Arc<dyn EmbeddingBackend>> {
    let manager = ModelManager::new(home.model_manager_config());
    let resolved = match manager.resolve() {
        Ok(Some(resolved)) => resolved,
        Ok(None) => return None,
        Err(error) => {
            eprintln!("warning: embedding model unusable ({error}); keyword search only");
            return None;
        }
    };
    let loaded = ModelInfo::read(&resolved.dir).map_err(anyhow::Error::from).and_then(|info| Ok(info.load()?));
    match loaded {
        Ok(backend) => Some(Arc::from(backend)),
        Err(error) => {
            eprintln!("warning: could not load the embedding model ({error:#}); keyword search only");
            None
        }
    }
}

fn open(home: &Home, with_model: bool) -> anyhow::Result<MemoryDb> {
    let db = home.open_memory()?;
    Ok(match with_model.then(|| load_embedder(home)).flatten() {
        Some(embedder) => db.with_embedder(embedder),
        None => db,
    })
}

/// Unix milliseconds of an RFC 3339 timestamp; a date-time without zone is UTC.
pub(crate) fn parse_time(text: &str) -> anyhow::Result<i64> {
    let text = text.trim();
    if let Ok(timestamp) = text.parse::<jiff::Timestamp>() {
        return Ok(timestamp.as_millisecond());
    }
    let civil: jiff::civil::DateTime =
        text.parse().with_context(|| format!("{text:?} is not an RFC 3339 date-time"))?;
    Ok(jiff::tz::TimeZone::UTC.to_timestamp(civil)?.as_millisecond())
}

fn refused(error: cairn_memory_core::MemoryError, json: bool) -> anyhow::Result<ExitCode> {
    let Some(rejected) = error.rejection() else { return Err(error.into()) };
    if json {
        println!("{}", json!({"outcome": "rejected", "code": rejected.code(), "message": rejected.to_string()}));
    } else {
        eprintln!("refused: {rejected}");
    }
    Ok(ExitCode::from(EXIT_REFUSED))
}

pub(crate) fn episodic(home: &Home, command: &EpisodicCommand) -> anyhow::Result<ExitCode> {
    match command {
        EpisodicCommand::Add(args) => {
            let db = open(home, true)?;
            let mut episode = NewEpisode::new(args.text.clone())
                .importance(args.importance)
                .tags(args.tags.iter().cloned())
                .source(Source::UserExplicit)
                .scope(args.scope.episode_scope(home)?);
            if let Some(source_ref) = &args.source_ref {
                episode = episode.source_ref(source_ref.clone());
            }
            if let Some(created_at) = &args.created_at {
                episode = episode.created_at(parse_time(created_at)?);
            }
            match db.write_episodic(&episode) {
                Ok(outcome) => {
                    if args.json {
                        println!("{}", serde_json::to_value(&outcome)?);
                    } else {
                        match &outcome {
                            EpisodicOutcome::Inserted { id, evicted, .. } => {
                                println!("inserted {id}");
                                for id in evicted {
                                    println!("evicted {id}");
                                }
                            }
                            EpisodicOutcome::Duplicate { of, cosine } => {
                                println!("duplicate of {of} (cosine {cosine:.3})")
                            }
                            other => println!("{other:?}"),
                        }
                    }
                    Ok(ExitCode::SUCCESS)
                }
                Err(error) => refused(error, args.json),
            }
        }
        EpisodicCommand::List(args) => {
            let rows = open(home, false)?.list_episodic_in(&args.scope.filter(home)?, args.limit, args.offset)?;
            if args.json {
                println!("{}", serde_json::to_value(&rows)?);
            } else {
                for row in &rows {
                    let reference = row.source_ref.as_deref().map(|r| format!(" [{}]", shown(r))).unwrap_or_default();
                    let scope = row.scope.project().map(|project| format!(" [{project}]")).unwrap_or_default();
                    println!("{:>6}  {:.2}{reference}{scope}  {}", row.id, row.importance, shown(&row.text));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        EpisodicCommand::Delete(args) => {
            let outcome = open(home, false)?.delete_episodic(args.id)?;
            if args.json {
                println!("{}", json!({"outcome": outcome, "id": args.id}));
            } else if outcome == DeleteOutcome::Deleted {
                println!("deleted {}", args.id);
            } else {
                eprintln!("no active episodic memory {}", args.id);
            }
            Ok(if outcome == DeleteOutcome::Deleted { ExitCode::SUCCESS } else { ExitCode::from(EXIT_NOT_FOUND) })
        }
    }
}

fn build_query(args: &SearchArgs, scopes: &ScopeFilter, text: &str, now: Option<i64>) -> anyhow::Result<EpisodicQuery> {
    let Some(mode) = RetrievalMode::parse(&args.mode) else {
        bail!("--mode must be hybrid, vector or keyword, not {:?}", args.mode)
    };
    let fusion = match args.fusion.as_deref() {
        None => Fusion::default(),
        Some(text) => match Fusion::parse(text) {
            Some(fusion) => fusion,
            None => bail!("--fusion must be weighted, weighted:W (0 to 1), rrf or rrf:K (K ≥ 0), not {text:?}"),
        },
    };
    check_ranges(args)?;
    let mut query = EpisodicQuery::new(text)
        .limit(args.limit)
        .mode(mode)
        .fusion(fusion)
        .prior_weight(args.prior_weight)
        .mmr(!args.no_mmr)
        .relevance_filter(args.context)
        .scopes(scopes.clone());
    if let Some(now) = now {
        query = query.now(now);
    }
    if let Some(boost) = args.speaker_boost {
        query = query.speaker_boost(boost);
    }
    if let Some(weight) = args.neighbour_weight {
        query = query.neighbour_weight(weight);
    }
    if let Some(boost) = args.time_boost {
        query = query.time_boost(boost);
    }
    if let Some(floor) = args.abstain_below {
        query = query.abstain_below(floor);
    }
    if let Some(floor) = args.abstain_unnamed_below {
        query = query.abstain_unnamed_below(floor);
    }
    if let Some(boost) = args.session_boost {
        query = query.session_boost(boost);
    }
    if let Some(keep) = args.thread_keep {
        query = query.thread_keep(keep);
    }
    if let Some(cosine) = args.keyword_min_cosine {
        query = query.keyword_min_cosine(cosine);
    }
    if let Some(weight) = args.thread_weight {
        query = query.thread_weight(weight);
    }
    if let Some(anchors) = args.thread_anchors {
        query = query.thread_anchors(anchors);
    }
    if let Some(lambda) = args.mmr_lambda {
        query = query.mmr_lambda(lambda);
    }
    if let Some(share) = args.keyword_ceiling_share {
        query = query.keyword_ceiling_share(share);
    }
    if let Some(candidates) = args.candidates {
        query = query.candidates(candidates);
    }
    Ok(query)
}

/// Refuses, by name, each ranking knob given outside its range.
fn check_ranges(args: &SearchArgs) -> anyhow::Result<()> {
    if !(0.0..=1.0).contains(&args.prior_weight) {
        bail!("--prior-weight must be between 0 and 1");
    }
    let nonnegative = |name: &str, value: Option<f64>| -> anyhow::Result<()> {
        if value.is_some_and(|value| !(value.is_finite() && value >= 0.0)) {
            bail!("--{name} must be a number of at least 0");
        }
        Ok(())
    };
    nonnegative("speaker-boost", args.speaker_boost)?;
    nonnegative("time-boost", args.time_boost)?;
    nonnegative("session-boost", args.session_boost)?;
    nonnegative("abstain-below", args.abstain_below.map(f64::from))?;
    nonnegative("abstain-unnamed-below", args.abstain_unnamed_below.map(f64::from))?;
    if args.neighbour_weight.is_some_and(|weight| !(0.0..=1.0).contains(&weight)) {
        bail!("--neighbour-weight must be between 0 and 1");
    }
    if args.thread_keep.is_some_and(|keep| keep > 50) {
        bail!("--thread-keep must be between 0 and 50");
    }
    if args.keyword_min_cosine.is_some_and(|cosine| !(0.0..=1.0).contains(&cosine)) {
        bail!("--keyword-min-cosine must be between 0 and 1");
    }
    if args.thread_weight.is_some_and(|weight| !(0.0..=1.0).contains(&weight)) {
        bail!("--thread-weight must be between 0 and 1");
    }
    if args.thread_anchors.is_some_and(|anchors| !(1..=50).contains(&anchors)) {
        bail!("--thread-anchors must be between 1 and 50");
    }
    if args.keyword_ceiling_share.is_some_and(|share| !(0.0..=1.0).contains(&share)) {
        bail!("--keyword-ceiling-share must be between 0 and 1");
    }
    if args.mmr_lambda.is_some_and(|lambda| !(0.0..=1.0).contains(&lambda)) {
        bail!("--mmr-lambda must be between 0 and 1");
    }
    if args.candidates.is_some_and(|candidates| !(1..=1_000).contains(&candidates)) {
        bail!("--candidates must be between 1 and 1000");
    }
    Ok(())
}

/// One query's answer as JSON.
fn answer(db: &MemoryDb, args: &SearchArgs, query: &EpisodicQuery) -> anyhow::Result<Value> {
    if args.context {
        let context = db.episodic_context_quoted(query, args.cap, &cairn_context::neutralize_one_line)?;
        Ok(json!({"block": context.block, "hits": context.hits}))
    } else {
        Ok(json!({"hits": db.search_episodic(query)?}))
    }
}

pub(crate) fn search(home: &Home, args: &SearchArgs) -> anyhow::Result<ExitCode> {
    let now = args.now.as_deref().map(parse_time).transpose()?;
    let scopes = args.scope.filter(home)?;
    let db = open(home, args.mode != "keyword")?;
    if let Some(path) = &args.queries {
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        let stdout = std::io::stdout();
        let mut out = BufWriter::new(stdout.lock());
        for (index, line) in BufReader::new(file).lines().enumerate() {
            let line = line.with_context(|| format!("reading line {}", index + 1))?;
            if line.trim().is_empty() {
                continue;
            }
            let row: Value = match serde_json::from_str(&line) {
                Ok(row) => row,
                Err(error) => {
                    writeln!(out, "{}", json!({"line": index + 1, "error": error.to_string()}))?;
                    continue;
                }
            };
            let text = row.get("query").or_else(|| row.get("question")).and_then(Value::as_str);
            let Some(text) = text else {
                writeln!(out, "{}", json!({"line": index + 1, "error": "no `query` or `question` string"}))?;
                continue;
            };
            let row_now = match row.get("now").and_then(Value::as_str) {
                Some(now) => Some(parse_time(now)?),
                None => now,
            };
            let query = build_query(args, &scopes, text, row_now)?;
            let mut result = answer(&db, args, &query)?;
            result["id"] = row.get("id").cloned().unwrap_or(Value::Null);
            result["query"] = Value::String(text.to_owned());
            writeln!(out, "{result}")?;
        }
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    let text = args.query.as_deref().unwrap_or_default();
    let query = build_query(args, &scopes, text, now)?;
    let result = answer(&db, args, &query)?;
    if args.json {
        println!("{result}");
    } else if args.context {
        println!("{}", shown(result["block"].as_str().unwrap_or_default()));
    } else {
        for hit in result["hits"].as_array().into_iter().flatten() {
            let score = &hit["score"];
            println!(
                "{:>6}  score {:.4}  cos {}  kw#{}  {}",
                hit["id"],
                score["score"].as_f64().unwrap_or(0.0),
                score["cosine"].as_f64().map_or("-".to_owned(), |c| format!("{c:.3}")),
                score["keyword_rank"].as_u64().map_or("-".to_owned(), |r| r.to_string()),
                shown(hit["text"].as_str().unwrap_or_default())
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Stored text as a terminal shows it: every control character but the
/// line break escaped (`\u{1b}`), so a stored ANSI sequence prints as
/// text instead of acting on the terminal.
fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() && c != '\n') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() && c != '\n' {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Parses one import row.
fn import_row(row: &Value) -> Result<NewEpisode, String> {
    let text = row.get("text").and_then(Value::as_str).ok_or("no `text` string")?;
    let mut episode = NewEpisode::new(text).defer_embedding(true).preserve(true).source(Source::Import);
    match row.get("created_at") {
        None | Some(Value::Null) => {}
        Some(Value::Number(ms)) => episode = episode.created_at(ms.as_i64().ok_or("`created_at` is not an integer")?),
        Some(Value::String(text)) => episode = episode.created_at(parse_time(text).map_err(|e| e.to_string())?),
        Some(_) => return Err("`created_at` must be RFC 3339 text or Unix milliseconds".to_owned()),
    }
    if let Some(importance) = row.get("importance").filter(|v| !v.is_null()) {
        episode = episode.importance(importance.as_f64().ok_or("`importance` is not a number")?);
    }
    if let Some(tags) = row.get("tags").filter(|v| !v.is_null()) {
        let tags = tags.as_array().ok_or("`tags` is not an array")?;
        episode = episode.tags(tags.iter().filter_map(Value::as_str).map(str::to_owned));
    }
    if let Some(source_ref) = row.get("source_ref").filter(|v| !v.is_null()) {
        episode = episode.source_ref(source_ref.as_str().ok_or("`source_ref` is not a string")?);
    }
    Ok(episode)
}

pub(crate) fn import(home: &Home, args: &ImportArgs) -> anyhow::Result<ExitCode> {
    let db = open(home, !args.no_backfill)?;
    let file = File::open(&args.file).with_context(|| format!("opening {}", args.file.display()))?;
    let (mut inserted, mut duplicates, mut full, mut rejected, mut malformed) =
        (0usize, 0usize, 0usize, 0usize, 0usize);
    for line in cairn_guard::UntrustedLines::new(BufReader::new(file)) {
        let line = line.with_context(|| format!("reading {}", args.file.display()))?;
        let index = line.number - 1;
        let episode = match &line.text {
            Ok(text) if text.trim().is_empty() => continue,
            Ok(text) => serde_json::from_str::<Value>(text).map_err(|e| e.to_string()).and_then(|row| import_row(&row)),
            Err(problem) => Err(problem.to_string()),
        };
        let episode = match episode {
            Ok(episode) => episode,
            Err(error) => {
                eprintln!("line {}: {error}", index + 1);
                malformed += 1;
                continue;
            }
        };
        match db.write_episodic(&episode) {
            Ok(EpisodicOutcome::Inserted { .. }) => inserted += 1,
            Ok(EpisodicOutcome::Duplicate { .. }) => duplicates += 1,
            Ok(EpisodicOutcome::StoreFull { .. }) => full += 1,
            Ok(other) => bail!("unexpected outcome {other:?}"),
            Err(error) => match error.rejection() {
                Some(reason) => {
                    eprintln!("line {}: refused: {reason}", index + 1);
                    rejected += 1;
                }
                None => return Err(error.into()),
            },
        }
    }
    let mut summary = json!({
        "inserted": inserted, "duplicates": duplicates, "store_full": full,
        "rejected": rejected, "malformed": malformed,
    });
    if !args.no_backfill {
        summary["backfill"] = backfill_with_progress(&db)?;
    }
    if args.json {
        println!("{summary}");
    } else {
        println!(
            "imported {inserted}, {duplicates} duplicates, {full} refused by the cap, {rejected} refused, {malformed} malformed"
        );
        if let Some(backfill) = summary.get("backfill") {
            println!("backfill: {} embedded, {} without vectors", backfill["embedded"], backfill["remaining"]);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn backfill_with_progress(db: &MemoryDb) -> anyhow::Result<Value> {
    if db.embedder().is_none() {
        eprintln!("no embedding model installed; rows stay keyword-searchable until `cairn memory backfill`");
    }
    let report = with_progress("backfill", |progress| db.backfill_missing_embeddings(Some(progress)));
    Ok(serde_json::to_value(report?)?)
}

pub(crate) fn backfill(home: &Home, args: &BackfillArgs) -> anyhow::Result<ExitCode> {
    let db = open(home, true)?;
    let report = backfill_with_progress(&db)?;
    if args.json {
        println!("{report}");
    } else {
        println!("backfill: {} embedded, {} without vectors", report["embedded"], report["remaining"]);
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_with_and_without_zone() {
        assert_eq!(parse_time("2023-05-08T13:56:00Z").unwrap(), 1_683_554_160_000);
        assert_eq!(parse_time("2023-05-08T13:56:00").unwrap(), 1_683_554_160_000);
        assert_eq!(parse_time("2023-05-08T15:56:00+02:00").unwrap(), 1_683_554_160_000);
        assert!(parse_time("8 May 2023").is_err());
    }
}
