//! `memory_search` round trip over MCP stdio (`cairn mcp serve`, driven by
//! rmcp's client) beside the same episodic search through the HTTP API
//! (`GET /api/memory/episodic/search`), on one home with N episodic rows,
//! in the same run, with the query embedding included (every query text is
//! new, so no cached vector answers).
//!
//! ```text
//! cargo build --release -p cairn-gateway-bin
//! cargo run --release -p cairn-tools --bin mcp_roundtrip -- --cairn target/release/cairn --rows 10000 --queries 300
//! ```
//!
//! Options: `--model DIR` (default: the installed all-MiniLM-L6-v2; the
//! program refuses to run without a model, since the figure is about
//! hybrid search with a query embedding).
//!
//! The MCP figure is the whole `tools/call` (JSON-RPC over the child's
//! pipes, argument checks, episodic and semantic search, the JSON answer);
//! the HTTP figure is one keep-alive request with the bearer token.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

const WORDS: &[&str] = &[
    "editor", "theme", "rust", "python", "deploy", "release", "database", "backup", "cache", "memory", "agent",
    "review", "testing", "coffee", "morning", "meeting", "project", "gateway", "vector", "search", "model", "kernel",
    "garden", "invoice", "travel", "budget", "laptop", "printer", "holiday", "recipe", "concert", "doctor",
];

struct Options {
    cairn: PathBuf,
    rows: usize,
    queries: usize,
    model: PathBuf,
}

fn options() -> anyhow::Result<Options> {
    let installed = dirs::data_dir().map(|dir| dir.join("cairn/models/all-MiniLM-L6-v2"));
    let mut options = Options {
        cairn: PathBuf::from("target/release/cairn"),
        rows: 10_000,
        queries: 300,
        model: installed.unwrap_or_default(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--cairn" => options.cairn = PathBuf::from(value()?),
            "--rows" => options.rows = value()?.parse()?,
            "--queries" => options.queries = value()?.parse()?,
            "--model" => options.model = PathBuf::from(value()?),
            other => bail!("unknown option {other}"),
        }
    }
    if !options.model.join("config.json").is_file() {
        bail!("no embedding model at {} (run `cairn model fetch` or pass --model DIR)", options.model.display());
    }
    Ok(options)
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn sentence(&mut self, words: usize) -> String {
        (0..words).map(|_| WORDS[(self.next() % WORDS.len() as u64) as usize]).collect::<Vec<_>>().join(" ")
    }
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn report(name: &str, mut samples: Vec<f64>) {
    samples.sort_by(f64::total_cmp);
    println!(
        "{name:<6} n={} p50={:.2} ms p90={:.2} ms p99={:.2} ms max={:.2} ms",
        samples.len(),
        percentile(&samples, 0.50),
        percentile(&samples, 0.90),
        percentile(&samples, 0.99),
        samples.last().copied().unwrap_or(0.0)
    );
}

fn cairn(options: &Options, home: &Path) -> Command {
    let mut command = Command::new(&options.cairn);
    command.arg("--home").arg(home).env("CAIRN_EMBED_MODEL_PATH", &options.model).env("CAIRN_SKIP_MODEL_DOWNLOAD", "1");
    command
}

struct Gateway(Child);

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn main() -> anyhow::Result<()> {
    let options = options()?;
    let home = tempfile::tempdir()?;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);

    let rows = home.path().join("rows.jsonl");
    let mut text = String::new();
    for index in 0..options.rows {
        let words = 8 + (rng.next() % 10) as usize;
        let row = json!({"text": format!("note {index}: {}", rng.sentence(words)), "created_at": 1_700_000_000_000i64 + index as i64 * 60_000});
        text.push_str(&row.to_string());
        text.push('\n');
    }
    std::fs::write(&rows, text)?;
    eprintln!("importing and embedding {} rows ...", options.rows);
    let started = Instant::now();
    let status = cairn(&options, home.path()).args(["memory", "import-episodic", "--json"]).arg(&rows).status()?;
    if !status.success() {
        bail!("import failed: {status}");
    }
    eprintln!("imported in {:.1} s", started.elapsed().as_secs_f64());

    let port_file = home.path().join("port");
    let gateway = Gateway(
        cairn(&options, home.path())
            .args(["serve", "--port", "0", "--port-file"])
            .arg(&port_file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    let started = Instant::now();
    let address = loop {
        if let Ok(text) = std::fs::read_to_string(&port_file)
            && text.ends_with('\n')
        {
            break text.trim().to_owned();
        }
        if started.elapsed() > Duration::from_secs(120) {
            bail!("cairn serve did not start");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let token = std::fs::read_to_string(home.path().join("server.token"))?.trim().to_owned();
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let base = format!("http://{address}");
    let get = |path: &str| -> anyhow::Result<Value> {
        let body = agent
            .get(&format!("{base}{path}"))
            .header("Authorization", &format!("Bearer {token}"))
            .call()?
            .into_body()
            .read_to_string()?;
        Ok(serde_json::from_str(&body)?)
    };
    loop {
        let status = get("/api/memory/embedding-status")?;
        if status["setup_step"] == "done" {
            break;
        }
        if started.elapsed() > Duration::from_secs(300) {
            bail!("the gateway's model never loaded: {status}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let mut server = tokio::process::Command::new(&options.cairn);
    server
        .arg("--home")
        .arg(home.path())
        .args(["mcp", "serve"])
        .env("CAIRN_EMBED_MODEL_PATH", &options.model)
        .env("CAIRN_SKIP_MODEL_DOWNLOAD", "1")
        .stderr(Stdio::null());
    // The child's pipes register with the runtime's reactor.
    let _entered = runtime.enter();
    let transport = rmcp::transport::TokioChildProcess::new(server)?;
    let client = runtime.block_on(async { ().serve(transport).await })?;
    let search = |query: &str| -> anyhow::Result<Value> {
        let Value::Object(arguments) = json!({"query": query, "limit": 8}) else { unreachable!() };
        let result = runtime
            .block_on(client.call_tool(CallToolRequestParams::new("memory_search").with_arguments(arguments)))?;
        Ok(result.structured_content.unwrap_or(Value::Null))
    };
    loop {
        let answer = search(&format!("warm up {}", rng.sentence(3)))?;
        if answer["mode"] == "hybrid" {
            break;
        }
        if started.elapsed() > Duration::from_secs(300) {
            bail!("the MCP server's model never loaded: {answer}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // Warm both paths (index build, caches of the SQLite pages).
    for _ in 0..20 {
        search(&rng.sentence(4))?;
        get(&format!("/api/memory/episodic/search?q={}&limit=8", rng.sentence(4).replace(' ', "%20")))?;
    }

    let (mut mcp, mut http) = (Vec::new(), Vec::new());
    for index in 0..options.queries {
        // A new text each time: the query embedding is always computed.
        let query = format!("{} {index}", rng.sentence(4));
        let started = Instant::now();
        let answer = search(&query)?;
        mcp.push(started.elapsed().as_secs_f64() * 1e3);
        if answer["hits"].as_array().is_none_or(Vec::is_empty) {
            bail!("MCP answered no hits for {query:?}: {answer}");
        }
        let started = Instant::now();
        let answer = get(&format!("/api/memory/episodic/search?q={}&limit=8", query.replace(' ', "%20")))?;
        http.push(started.elapsed().as_secs_f64() * 1e3);
        if answer["results"].as_array().is_none_or(Vec::is_empty) {
            bail!("HTTP answered no hits for {query:?}: {answer}");
        }
    }
    println!("rows={} queries={} model={}", options.rows, options.queries, options.model.display());
    report("mcp", mcp);
    report("http", http);
    runtime.block_on(client.cancel())?;
    drop(gateway);
    Ok(())
}
