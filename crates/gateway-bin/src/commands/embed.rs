//! `cairn embed --jsonl FILE`: one vector per input row, in input order.

use std::io::{self, BufRead, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use cairn_embedder::{EmbeddingBackend, ModelInfo, ModelManager};
use clap::Args;
use serde_json::{Value, json};

use crate::home::Home;

#[derive(Debug, Args)]
pub(crate) struct EmbedArgs {
    /// Input file, one JSON object per line; `-` reads standard input.
    #[arg(long, value_name = "FILE")]
    pub(crate) jsonl: PathBuf,
    /// Model folder to use (overrides CAIRN_EMBED_MODEL_PATH and the installed model).
    #[arg(long, value_name = "DIR")]
    pub(crate) model: Option<PathBuf>,
    /// Rows per forward pass.
    #[arg(long, default_value_t = 32)]
    pub(crate) batch_size: usize,
}

/// A row waiting in the current batch: its output slot and its text.
struct Pending {
    id: Value,
    text: String,
}

/// Reads rows `{"id", "text"}` and prints `{"id", "vector"}` per row, in
/// order, embedding `--batch-size` rows at a time. A malformed line yields
/// `{"line", "error"}` in its place. Never downloads: a missing model is an
/// error that names `cairn model fetch`.
pub(crate) fn embed(home: &Home, args: &EmbedArgs) -> anyhow::Result<ExitCode> {
    if args.batch_size == 0 {
        bail!("--batch-size must be at least 1");
    }
    let manager = ModelManager::new(home.model_manager_config());
    let Some(resolved) = manager.resolve()? else {
        bail!(
            "the embedding model is not installed in {}; run `cairn model fetch` or set CAIRN_EMBED_MODEL_PATH",
            manager.install_dir().display()
        );
    };
    let info = ModelInfo::read(&resolved.dir)?;
    let backend = info.load().with_context(|| format!("loading the model in {}", resolved.dir.display()))?;
    tracing::debug!(model_id = backend.model_id(), dim = backend.dim(), "model loaded");

    let input = super::input_lines(&args.jsonl)?;
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    // Output rows in input order; `None` marks a row still waiting for its vector.
    let mut queue: Vec<Result<Pending, Value>> = Vec::new();
    let (mut rows, mut errors) = (0usize, 0usize);
    for (index, line) in input.lines().enumerate() {
        let line_number = index + 1;
        let line = line.with_context(|| format!("reading line {line_number}"))?;
        if line.trim().is_empty() {
            continue;
        }
        match parse_row(&line) {
            Ok(pending) => {
                rows += 1;
                queue.push(Ok(pending));
            }
            Err(error) => {
                errors += 1;
                queue.push(Err(json!({ "line": line_number, "error": error })));
            }
        }
        if queue.iter().filter(|row| row.is_ok()).count() >= args.batch_size {
            flush(&*backend, &mut queue, &mut out)?;
        }
    }
    flush(&*backend, &mut queue, &mut out)?;
    out.flush()?;
    eprintln!("embed ({}): {rows} rows, {errors} malformed", backend.model_id());
    Ok(ExitCode::SUCCESS)
}

fn flush(
    backend: &dyn EmbeddingBackend,
    queue: &mut Vec<Result<Pending, Value>>,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let texts: Vec<&str> = queue.iter().filter_map(|row| row.as_ref().ok()).map(|row| row.text.as_str()).collect();
    let mut vectors = backend.embed_batch(&texts).context("embedding a batch")?.into_iter();
    for row in queue.drain(..) {
        let object = match row {
            Ok(pending) => {
                let vector = vectors.next().context("the backend returned fewer vectors than texts")?;
                json!({ "id": pending.id, "vector": vector })
            }
            Err(error) => error,
        };
        serde_json::to_writer(&mut *out, &object)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

fn parse_row(line: &str) -> Result<Pending, String> {
    let row: Value = serde_json::from_str(line).map_err(|error| format!("invalid JSON: {error}"))?;
    let Value::Object(mut row) = row else {
        return Err("row is not a JSON object".to_owned());
    };
    let id = row.remove("id").unwrap_or(Value::Null);
    match row.remove("text") {
        Some(Value::String(text)) => Ok(Pending { id, text }),
        Some(_) => Err("field `text` is not a string".to_owned()),
        None => Err("row has no `text` field".to_owned()),
    }
}
