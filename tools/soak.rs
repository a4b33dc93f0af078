//! Soak and kill test of `cairn serve` on loopback.
//!
//! Phase 1 (soak): starts the gateway on a fresh home, then sends mixed
//! semantic searches and semantic writes at a fixed rate for a bounded time
//! (and at most `rate × seconds` requests), recording every status, the
//! latency percentiles and the server's resident memory once a second.
//!
//! Phase 2 (kill): starts a fresh gateway, runs the same load, SIGKILLs the
//! server mid-load, runs `PRAGMA integrity_check` on `memory.db` and checks
//! that every write that received a 2xx is stored, then restarts the server
//! and reads the rows back over HTTP.
//!
//! ```text
//! cargo build --release -p cairn-gateway-bin
//! cargo run --release -p cairn-tools --bin soak -- --cairn target/release/cairn --seconds 60 --rate 400
//! ```
//!
//! Options: `--threads N` (default 32), `--write-every N` (default 5: one
//! request in five is a semantic write, the rest searches, as on a gateway
//! that searches on every message and learns a fact now and then; 2 gives
//! the 1:1 mix), `--keys N` (default 1,000: the soak's writes cycle over N
//! keys, so the store stops growing and resident memory can settle; 0 for
//! a new key per write; the kill phase always writes new keys), `--model DIR` (default: the installed all-MiniLM-L6-v2,
//! when present; `--model none` for keyword only), `--kill-after SECS`
//! (default 10), `--skip-kill`, `--gateway-config JSON` (written as the
//! gateway's `config.json`, e.g. `{"embedding":{"pool_workers":2}}`).

#[path = "support/serve_address.rs"]
mod serve_address;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

const WORDS: &[&str] = &[
    "editor", "theme", "rust", "python", "deploy", "release", "database", "backup", "cache", "memory", "agent",
    "review", "testing", "coffee", "morning", "meeting", "project", "gateway", "vector", "search", "model", "kernel",
];

struct Options {
    cairn: PathBuf,
    seconds: u64,
    rate: u64,
    threads: usize,
    write_every: u64,
    keys: u64,
    model: Option<PathBuf>,
    kill_after: u64,
    skip_kill: bool,
    /// Written as the gateway's `config.json` when given.
    gateway_config: Option<String>,
}

fn options() -> anyhow::Result<Options> {
    let mut args = std::env::args().skip(1);
    let installed = dirs::data_dir().map(|dir| dir.join("cairn/models/all-MiniLM-L6-v2")).filter(|dir| dir.is_dir());
    let mut options = Options {
        cairn: PathBuf::from("target/release/cairn"),
        seconds: 60,
        rate: 400,
        threads: 32,
        write_every: 5,
        keys: 1_000,
        model: installed,
        kill_after: 10,
        skip_kill: false,
        gateway_config: None,
    };
    while let Some(flag) = args.next() {
        let mut value = || args.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--cairn" => options.cairn = PathBuf::from(value()?),
            "--seconds" => options.seconds = value()?.parse()?,
            "--rate" => options.rate = value()?.parse()?,
            "--threads" => options.threads = value()?.parse()?,
            "--write-every" => options.write_every = value()?.parse()?,
            "--keys" => options.keys = value()?.parse()?,
            "--model" => {
                let text = value()?;
                options.model = (text != "none").then(|| PathBuf::from(text));
            }
            "--kill-after" => options.kill_after = value()?.parse()?,
            "--skip-kill" => options.skip_kill = true,
            "--gateway-config" => {
                let document = value()?;
                serde_json::from_str::<Value>(&document).context("--gateway-config takes a JSON document")?;
                options.gateway_config = Some(document);
            }
            other => bail!("unknown option {other}"),
        }
    }
    if options.seconds == 0 || options.seconds > 3_600 || options.rate == 0 || options.rate > 100_000 {
        bail!("--seconds must be 1..=3600 and --rate 1..=100000");
    }
    if options.write_every == 0 {
        bail!("--write-every must be at least 1");
    }
    Ok(options)
}

struct Server {
    child: Child,
    base: String,
    token: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

fn start(options: &Options, home: &Path) -> anyhow::Result<Server> {
    let port_file = home.join("port");
    let _ = std::fs::remove_file(&port_file);
    if let Some(config) = &options.gateway_config {
        std::fs::write(home.join("config.json"), config)?;
    }
    let mut command = Command::new(&options.cairn);
    command
        .arg("--home")
        .arg(home)
        .args(["serve", "--port", "0", "--port-file"])
        .arg(&port_file)
        .env("CAIRN_SKIP_MODEL_DOWNLOAD", "1")
        .env_remove("CAIRN_EMBED_MODEL_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    if let Some(model) = &options.model {
        command.arg("--model-path").arg(model);
    }
    let mut child = command.spawn().with_context(|| format!("starting {}", options.cairn.display()))?;
    let address = serve_address::wait_for_address(&mut child, &port_file)?;
    let token = std::fs::read_to_string(home.join("server.token"))?.trim().to_owned();
    let server = Server { child, base: format!("http://{address}"), token };
    if options.model.is_some() {
        let agent = agent();
        let started = Instant::now();
        loop {
            let status: Value = agent
                .get(&format!("{}/api/memory/embedding-status", server.base))
                .header("Authorization", &format!("Bearer {}", server.token))
                .call()?
                .into_body()
                .read_json()?;
            if status["setup_step"] == "done" {
                break;
            }
            if status["setup_step"] == "error" || started.elapsed() > Duration::from_secs(120) {
                bail!("the model did not load: {status}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Ok(server)
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|line| line.strip_prefix("VmRSS:")?.trim().strip_suffix("kB")?.trim().parse().ok())
}

#[derive(Default)]
struct Tally {
    statuses: BTreeMap<String, u64>,
    search_micros: Vec<u64>,
    write_micros: Vec<u64>,
    acknowledged: Vec<String>,
}

fn percentile(sorted: &[u64], fraction: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[index] as f64 / 1000.0
}

/// Sends the mixed load until `deadline`, `max_requests`, or `stop`.
/// Runs the mix; writes cycle over `keys` keys (`0`: a new key per write).
fn load(server: &Server, options: &Options, seconds: u64, stop: &AtomicBool, prefix: &str, keys: u64) -> Tally {
    let tally = Mutex::new(Tally::default());
    let next = AtomicU64::new(0);
    let max_requests = options.rate * seconds;
    let interval = Duration::from_secs_f64(1.0 / options.rate as f64);
    let start = Instant::now();
    let deadline = start + Duration::from_secs(seconds);
    std::thread::scope(|scope| {
        for _ in 0..options.threads {
            scope.spawn(|| {
                let agent = agent();
                let auth = format!("Bearer {}", server.token);
                let mut local = Tally::default();
                loop {
                    let ticket = next.fetch_add(1, Ordering::Relaxed);
                    if ticket >= max_requests || stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let due = start + interval.mul_f64(ticket as f64);
                    if due > deadline {
                        break;
                    }
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    let word = |salt: u64| {
                        WORDS[(ticket.wrapping_mul(2_654_435_761).wrapping_add(salt) % WORDS.len() as u64) as usize]
                    };
                    let sent = Instant::now();
                    let (kind, key, result) = if !ticket.is_multiple_of(options.write_every) {
                        let query = format!("{}%20{}", word(1), word(7));
                        let url = format!("{}/api/memory/semantic?q={query}&limit=8", server.base);
                        ("search", None, agent.get(&url).header("Authorization", &auth).call())
                    } else {
                        let slot = if keys == 0 { ticket } else { ticket % keys };
                        let key = format!("project.{prefix}.k{slot}");
                        let value = format!("{} prefers {} with {} on {}", word(2), word(3), word(5), word(11));
                        let url = format!("{}/api/memory/semantic", server.base);
                        let body = json!({"key": key, "value": value});
                        ("write", Some(key), agent.put(&url).header("Authorization", &auth).send_json(&body))
                    };
                    let micros = sent.elapsed().as_micros() as u64;
                    let status = match result {
                        Ok(response) => {
                            let status = response.status().as_u16();
                            let _ = response.into_body().read_to_string();
                            status.to_string()
                        }
                        Err(_) => "transport_error".to_owned(),
                    };
                    if status.starts_with('2')
                        && let Some(key) = key
                    {
                        local.acknowledged.push(key);
                    }
                    *local.statuses.entry(format!("{kind} {status}")).or_default() += 1;
                    match kind {
                        "search" => local.search_micros.push(micros),
                        _ => local.write_micros.push(micros),
                    }
                }
                let mut tally = tally.lock().unwrap();
                for (status, count) in local.statuses {
                    *tally.statuses.entry(status).or_default() += count;
                }
                tally.search_micros.extend(local.search_micros);
                tally.write_micros.extend(local.write_micros);
                tally.acknowledged.extend(local.acknowledged);
            });
        }
    });
    tally.into_inner().unwrap()
}

fn soak(options: &Options) -> anyhow::Result<()> {
    let home = tempfile::tempdir()?;
    let server = start(options, home.path())?;
    let pid = server.child.id();
    println!(
        "soak: {} s at {} req/s, {} threads, one write in {} over {} keys, model: {}",
        options.seconds,
        options.rate,
        options.threads,
        options.write_every,
        options.keys,
        options.model.as_ref().map_or("none (keyword only)".to_owned(), |model| model.display().to_string())
    );
    let stop = AtomicBool::new(false);
    let rss = Arc::new(Mutex::new(Vec::new()));
    let started = Instant::now();
    let tally = std::thread::scope(|scope| {
        let sampler = scope.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                if let Some(kib) = rss_kib(pid) {
                    rss.lock().unwrap().push((started.elapsed().as_secs(), kib));
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        });
        let never = AtomicBool::new(false);
        let tally = load(&server, options, options.seconds, &never, "soak", options.keys);
        stop.store(true, Ordering::Relaxed);
        let _ = sampler.join();
        tally
    });
    let elapsed = started.elapsed().as_secs_f64();
    let mut tally = tally;
    tally.search_micros.sort_unstable();
    tally.write_micros.sort_unstable();
    let total = tally.search_micros.len() + tally.write_micros.len();
    let unexpected_5xx: u64 = tally
        .statuses
        .iter()
        .filter(|(status, _)| status.contains(" 5") && !status.ends_with(" 503"))
        .map(|(_, count)| *count)
        .sum();
    let deliberate_503: u64 =
        tally.statuses.iter().filter(|(status, _)| status.ends_with(" 503")).map(|(_, count)| *count).sum();
    println!("requests: {total} in {elapsed:.1} s = {:.0} req/s", total as f64 / elapsed);
    println!("statuses: {:?}", tally.statuses);
    println!("5xx other than 503: {unexpected_5xx}; deliberate 503: {deliberate_503}");
    for (kind, sorted) in [("search", &tally.search_micros), ("write", &tally.write_micros)] {
        println!(
            "{kind}: n={} p50={:.2} ms p95={:.2} ms p99={:.2} ms max={:.2} ms",
            sorted.len(),
            percentile(sorted, 0.50),
            percentile(sorted, 0.95),
            percentile(sorted, 0.99),
            percentile(sorted, 1.0)
        );
    }
    let mut all: Vec<u64> = tally.search_micros.iter().chain(&tally.write_micros).copied().collect();
    all.sort_unstable();
    println!("all: p50={:.2} ms p99={:.2} ms", percentile(&all, 0.50), percentile(&all, 0.99));
    let rss = rss.lock().unwrap().clone();
    let warm = rss.iter().find(|(second, _)| *second >= 10).or(rss.first()).copied();
    let last = rss.last().copied();
    let peak = rss.iter().map(|(_, kib)| *kib).max().unwrap_or(0);
    if let (Some((warm_at, warm_kib)), Some((last_at, last_kib))) = (warm, last) {
        println!(
            "rss: {warm_kib} KiB at {warm_at} s (after warm-up) -> {last_kib} KiB at {last_at} s ({:+.1}%), peak {peak} KiB",
            (last_kib as f64 - warm_kib as f64) / warm_kib as f64 * 100.0
        );
    }
    let series: Vec<String> = rss.iter().step_by(5).map(|(second, kib)| format!("{second}s:{}M", kib / 1024)).collect();
    println!("rss every 5 s: {}", series.join(" "));
    drop(server);
    if unexpected_5xx > 0 {
        bail!("{unexpected_5xx} unexpected 5xx answers");
    }
    Ok(())
}

fn kill_test(options: &Options) -> anyhow::Result<()> {
    let home = tempfile::tempdir()?;
    let mut server = start(options, home.path())?;
    let stop = Arc::new(AtomicBool::new(false));
    let kill_after = Duration::from_secs(options.kill_after);
    let tally = std::thread::scope(|scope| {
        let killer_stop = Arc::clone(&stop);
        let pid = server.child.id();
        let killer = scope.spawn(move || {
            std::thread::sleep(kill_after);
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
            killer_stop.store(true, Ordering::Relaxed);
        });
        let tally = load(&server, options, options.kill_after + 30, &stop, "kill", 0);
        let _ = killer.join();
        tally
    });
    let _ = server.child.wait();
    let acknowledged: HashSet<String> = tally.acknowledged.into_iter().collect();
    println!(
        "kill: SIGKILL after {} s; {} writes acknowledged; statuses {:?}",
        options.kill_after,
        acknowledged.len(),
        tally.statuses
    );
    let db = rusqlite::Connection::open(home.path().join("memory.db"))?;
    let integrity: String = db.query_row("PRAGMA integrity_check", [], |row| row.get(0))?;
    println!("integrity_check: {integrity}");
    let mut statement = db.prepare("SELECT key FROM semantic_memory WHERE is_deleted = 0")?;
    let stored: HashSet<String> = statement.query_map([], |row| row.get(0))?.collect::<Result<_, _>>()?;
    let missing = acknowledged.iter().filter(|key| !stored.contains(*key)).count();
    println!("acknowledged writes missing after restart: {missing} (stored rows: {})", stored.len());
    drop(statement);
    drop(db);
    server = start(options, home.path())?;
    let listed: Value = agent()
        .get(&format!("{}/api/memory/semantic?prefix=project.kill.", server.base))
        .header("Authorization", &format!("Bearer {}", server.token))
        .call()?
        .into_body()
        .with_config()
        .limit(256 * 1024 * 1024)
        .read_json()?;
    println!("restarted server lists {} rows", listed["count"]);
    drop(server);
    if integrity != "ok" || missing > 0 {
        bail!("kill test failed");
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let options = options()?;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("machine: {} cpus, loadavg {}", std::thread::available_parallelism().map_or(0, usize::from), load.trim());
    soak(&options)?;
    if !options.skip_kill {
        kill_test(&options)?;
    }
    Ok(())
}
