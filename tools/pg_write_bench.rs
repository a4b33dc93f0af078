//! Parallel writers against `cairn serve`: clients `PUT /api/memory/semantic`
//! distinct keys for a fixed time, every write acknowledged, on
//! (a) one gateway on SQLite, (b) one gateway on PostgreSQL, (c) two
//! gateways on one PostgreSQL database (the clients split between them),
//! (d) one gateway on PostgreSQL with a single client. Prints writes/s,
//! the latency percentiles and the slowest write of each as a Markdown table.
//!
//! ```text
//! cargo build --release -p cairn-gateway-bin -p cairn-tools
//! target/release/pg_write_bench --cairn target/release/cairn \
//!     --postgres-url postgres://cairn@127.0.0.1:PORT/cairn_test --seconds 15 --clients 8
//! ```
//!
//! `--setups bcbc` runs the setups named by letter, in that order (all four,
//! once each, by default). `--gateway-config JSON` writes that document as
//! every gateway's `config.json` (e.g. `{"embedding":{"pool_workers":4}}`).
//!
//! Each PostgreSQL setup gets a fresh database, created beside the one in
//! `--postgres-url` and dropped afterwards. No model is loaded (keyword
//! only), so a write is the store's work and the HTTP around it.

#[path = "support/serve_address.rs"]
mod serve_address;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::json;

struct Options {
    cairn: PathBuf,
    postgres_url: String,
    seconds: u64,
    clients: usize,
    /// Which setups run, by letter (a to d, as in the module doc); all by default.
    setups: String,
    /// Written as each gateway's `config.json` when given.
    gateway_config: Option<String>,
}

fn options() -> anyhow::Result<Options> {
    let mut options = Options {
        cairn: PathBuf::from("target/release/cairn"),
        postgres_url: String::new(),
        seconds: 15,
        clients: 8,
        setups: "abcd".to_owned(),
        gateway_config: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--cairn" => options.cairn = PathBuf::from(value()?),
            "--postgres-url" => options.postgres_url = value()?,
            "--seconds" => options.seconds = value()?.parse()?,
            "--clients" => options.clients = value()?.parse()?,
            "--setups" => options.setups = value()?,
            "--gateway-config" => {
                let document = value()?;
                serde_json::from_str::<serde_json::Value>(&document)
                    .context("--gateway-config takes a JSON document")?;
                options.gateway_config = Some(document);
            }
            other => bail!("unknown option {other}"),
        }
    }
    if options.setups.is_empty() || !options.setups.chars().all(|setup| "abcd".contains(setup)) {
        bail!("--setups takes letters from a to d");
    }
    if options.postgres_url.is_empty() {
        bail!("--postgres-url is required");
    }
    Ok(options)
}

struct Server {
    child: Child,
    base: String,
    token: String,
    _home: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(cairn: &Path, storage_url: Option<&str>, config: Option<&str>) -> anyhow::Result<Server> {
    let home = tempfile::tempdir()?;
    if let Some(config) = config {
        std::fs::write(home.path().join("config.json"), config)?;
    }
    let port_file = home.path().join("port");
    let mut command = Command::new(cairn);
    command
        .arg("--home")
        .arg(home.path())
        .args(["serve", "--port", "0", "--port-file"])
        .arg(&port_file)
        .env("CAIRN_SKIP_MODEL_DOWNLOAD", "1")
        .env_remove("CAIRN_EMBED_MODEL_URL")
        .env_remove("CAIRN_STORAGE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(url) = storage_url {
        command.env("CAIRN_STORAGE_URL", url);
    }
    let mut child = command.spawn().with_context(|| format!("starting {}", cairn.display()))?;
    let address = serve_address::wait_for_address(&mut child, &port_file)?;
    let token = std::fs::read_to_string(home.path().join("server.token"))?.trim().to_owned();
    Ok(Server { child, base: format!("http://{address}"), token, _home: home })
}

/// A fresh database beside the one in `url`; its URL.
fn fresh_database(url: &str, name: &str) -> anyhow::Result<String> {
    let mut client = postgres::Client::connect(url, postgres::NoTls)?;
    // One statement per call: several in one query string run as one transaction, which these refuse.
    client.batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))?;
    client.batch_execute(&format!("CREATE DATABASE {name}"))?;
    let (base, query) = url.split_once('?').map_or((url, None), |(base, query)| (base, Some(query)));
    let (server, _) = base.rsplit_once('/').context("the URL names no database")?;
    Ok(match query {
        Some(query) => format!("{server}/{name}?{query}"),
        None => format!("{server}/{name}"),
    })
}

fn drop_database(url: &str, name: &str) {
    if let Ok(mut client) = postgres::Client::connect(url, postgres::NoTls) {
        let _ = client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
    }
}

struct Measured {
    writes: usize,
    failed: usize,
    seconds: f64,
    latencies_ms: Vec<f64>,
}

/// `clients` threads, client `n` on `servers[n % len]`, each writing new keys
/// until `seconds` have passed.
fn load(servers: &[&Server], clients: usize, seconds: u64, tag: &str) -> Measured {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|client| {
            let server = servers[client % servers.len()];
            let (url, auth) = (format!("{}/api/memory/semantic", server.base), format!("Bearer {}", server.token));
            let tag = tag.to_owned();
            std::thread::spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .timeout_global(Some(Duration::from_secs(30)))
                    .build()
                    .into();
                let (mut latencies, mut failed) = (Vec::new(), 0);
                let mut n = 0u64;
                while Instant::now() < deadline {
                    let body = json!({"key": format!("user.bench_{tag}_c{client}_{n}"), "value": format!("value {n}")});
                    let sent = Instant::now();
                    let response = agent.put(&url).header("Authorization", &auth).send_json(&body);
                    // The answer is read whole: an unread body would keep its
                    // connection from going back to the agent's pool.
                    let acknowledged = response.is_ok_and(|mut response| {
                        response.status().is_success() && response.body_mut().read_to_vec().is_ok()
                    });
                    if acknowledged {
                        latencies.push(sent.elapsed().as_secs_f64() * 1000.0);
                    } else {
                        failed += 1;
                    }
                    n += 1;
                }
                (latencies, failed)
            })
        })
        .collect();
    let mut measured = Measured { writes: 0, failed: 0, seconds: 0.0, latencies_ms: Vec::new() };
    for thread in threads {
        let (latencies, failed) = thread.join().expect("a client thread panicked");
        measured.writes += latencies.len();
        measured.failed += failed;
        measured.latencies_ms.extend(latencies);
    }
    measured.seconds = started.elapsed().as_secs_f64();
    measured.latencies_ms.sort_by(f64::total_cmp);
    measured
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn main() -> anyhow::Result<()> {
    let options = options()?;
    let mut rows = Vec::new();
    let mut report = |setup: &str, measured: Measured| {
        let per_second = measured.writes as f64 / measured.seconds;
        eprintln!("{setup}: {} writes, {} failed", measured.writes, measured.failed);
        rows.push(format!(
            "| {setup} | {:.0} | {:.1} ms | {:.1} ms | {:.1} ms | {:.0} ms | {} |",
            per_second,
            percentile(&measured.latencies_ms, 0.50),
            percentile(&measured.latencies_ms, 0.95),
            percentile(&measured.latencies_ms, 0.99),
            measured.latencies_ms.last().copied().unwrap_or(f64::NAN),
            measured.failed
        ));
    };
    let clients = options.clients;

    let name = format!("cairn_bench_{}", std::process::id());
    // In the order given, so setups can be alternated (`--setups bcbc`).
    for (round, setup) in options.setups.chars().enumerate() {
        let database = format!("{name}_{round}");
        let tag = setup.to_string();
        match setup {
            'a' => {
                let sqlite = start(&options.cairn, None, options.gateway_config.as_deref())?;
                report(
                    &format!("one gateway on SQLite, {clients} clients"),
                    load(&[&sqlite], clients, options.seconds, &tag),
                );
            }
            'b' => {
                let url = fresh_database(&options.postgres_url, &database)?;
                let one = start(&options.cairn, Some(&url), options.gateway_config.as_deref())?;
                report(
                    &format!("one gateway on PostgreSQL, {clients} clients"),
                    load(&[&one], clients, options.seconds, &tag),
                );
                drop(one);
                drop_database(&options.postgres_url, &database);
            }
            'c' => {
                let url = fresh_database(&options.postgres_url, &database)?;
                let (first, second) = (
                    start(&options.cairn, Some(&url), options.gateway_config.as_deref())?,
                    start(&options.cairn, Some(&url), options.gateway_config.as_deref())?,
                );
                report(
                    &format!("two gateways on one PostgreSQL database, {clients} clients"),
                    load(&[&first, &second], clients, options.seconds, &tag),
                );
                drop((first, second));
                drop_database(&options.postgres_url, &database);
            }
            'd' => {
                let url = fresh_database(&options.postgres_url, &database)?;
                let single = start(&options.cairn, Some(&url), options.gateway_config.as_deref())?;
                report("one gateway on PostgreSQL, 1 client", load(&[&single], 1, options.seconds, &tag));
                drop(single);
                drop_database(&options.postgres_url, &database);
            }
            other => unreachable!("options() refuses setup {other:?}"),
        }
    }

    println!("| setup | writes/s | p50 | p95 | p99 | max | failed |\n|---|---|---|---|---|---|---|");
    for row in rows {
        println!("{row}");
    }
    Ok(())
}
