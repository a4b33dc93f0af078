//! `cairn mcp probe` of five MCP servers at once against each server alone.
//!
//! The five: `mcp-server-time` twice (two time zones), the reference
//! `server-everything` over stdio, `cairn mcp serve`, and a scripted server
//! that answers after two seconds. Each round probes every server alone
//! (`--server NAME`) and then all five in one call; the medians are
//! printed, with the ratio of the parallel probe to the slowest alone.
//!
//! ```text
//! cargo build --bin cairn
//! CAIRN_TEST_MCP_TIME=... CAIRN_TEST_MCP_EVERYTHING=... cargo run -p cairn-tools --bin mcp_probe_parallel
//! ```
//!
//! `CAIRN_TEST_MCP_TIME` is the `mcp-server-time` executable and
//! `CAIRN_TEST_MCP_EVERYTHING` the server's `dist/index.js` (`.ci/run`
//! installs both and exports the variables); `CAIRN_BIN` picks the binary
//! (default `target/debug/cairn`), `ROUNDS` the number of rounds (default 5);
//! `SERVERS=scripted` swaps in five scripted servers that only wait 0.4 to
//! 2 s before answering.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn probe(
    cairn: &PathBuf,
    home: &std::path::Path,
    user: &std::path::Path,
    only: Option<&str>,
) -> anyhow::Result<(Duration, Value)> {
    let mut command = Command::new(cairn);
    command
        .arg("--home")
        .arg(home)
        .args(["mcp", "probe", "--json"])
        .env("HOME", user)
        .env("CAIRN_SKIP_MODEL_DOWNLOAD", "1");
    if let Some(name) = only {
        command.args(["--server", name]);
    }
    let started = Instant::now();
    let output = command.output().context("running cairn mcp probe")?;
    let elapsed = started.elapsed();
    if !output.status.success() {
        bail!("cairn mcp probe failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let report: Value = serde_json::from_slice(&output.stdout)?;
    for result in report["results"].as_array().into_iter().flatten() {
        if result["status"] != "ok" {
            bail!("{} did not probe ok: {result}", result["name"]);
        }
    }
    Ok((elapsed, report))
}

fn main() -> anyhow::Result<()> {
    let time = PathBuf::from(std::env::var_os("CAIRN_TEST_MCP_TIME").context("set CAIRN_TEST_MCP_TIME")?);
    let everything =
        PathBuf::from(std::env::var_os("CAIRN_TEST_MCP_EVERYTHING").context("set CAIRN_TEST_MCP_EVERYTHING")?);
    let cairn = std::env::var_os("CAIRN_BIN").map_or_else(|| PathBuf::from("target/debug/cairn"), PathBuf::from);
    let rounds: usize = std::env::var("ROUNDS").ok().and_then(|text| text.parse().ok()).unwrap_or(5);
    let root = tempfile::tempdir()?;
    let user = root.path().join("user");
    let home = root.path().join("home");
    std::fs::create_dir_all(user.join(".kiro/settings"))?;
    std::fs::create_dir_all(&home)?;
    let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"slow","version":"1"}}}"#;
    let tools = r#"{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"wait","inputSchema":{"type":"object"}}]}}"#;
    let scripted = |name: &str, delay: &str| -> anyhow::Result<Value> {
        let path = root.path().join(format!("{name}.sh"));
        let script =
            format!("read line\nsleep {delay}\necho '{answer}'\nread line\nread line\necho '{tools}'\nsleep 60\n");
        std::fs::write(&path, script)?;
        Ok(json!({"command": "sh", "args": [path]}))
    };
    let servers = if std::env::var("SERVERS").as_deref() == Ok("scripted") {
        // Five servers that only wait (no start-up work): the probe's own
        // parallelism, without CPU contention between the servers.
        json!({
            "wait-0.4": scripted("a", "0.4")?,
            "wait-0.8": scripted("b", "0.8")?,
            "wait-1.2": scripted("c", "1.2")?,
            "wait-1.6": scripted("d", "1.6")?,
            "wait-2.0": scripted("e", "2")?,
        })
    } else {
        json!({
            "time-utc": {"command": time, "args": ["--local-timezone", "UTC"]},
            "time-tokyo": {"command": time, "args": ["--local-timezone", "Asia/Tokyo"]},
            "everything": {"command": "node", "args": [everything, "stdio"]},
            "cairn": {"command": cairn.canonicalize()?, "args": ["--home", root.path().join("own"), "mcp", "serve"]},
            "slow": scripted("slow", "2")?,
        })
    };
    std::fs::write(
        user.join(".kiro/settings/mcp.json"),
        serde_json::to_string_pretty(&json!({"mcpServers": servers}))?,
    )?;
    let names: Vec<String> = servers.as_object().expect("an object").keys().cloned().collect();

    let mut alone: Vec<Vec<Duration>> = vec![Vec::new(); names.len()];
    let mut together = Vec::new();
    // One warm-up round so first-run caches (Python bytecode, npm) do not count.
    probe(&cairn, &home, &user, None)?;
    for _ in 0..rounds {
        for (index, name) in names.iter().enumerate() {
            alone[index].push(probe(&cairn, &home, &user, Some(name))?.0);
        }
        together.push(probe(&cairn, &home, &user, None)?.0);
    }
    let mut slowest = Duration::ZERO;
    let mut sum = Duration::ZERO;
    for (name, times) in names.iter().zip(alone) {
        let median = median(times);
        slowest = slowest.max(median);
        sum += median;
        println!("{name:<12} alone      median {:>7.0} ms", median.as_secs_f64() * 1000.0);
    }
    let together = median(together);
    println!("all five     in parallel median {:>7.0} ms", together.as_secs_f64() * 1000.0);
    println!("sum of the five alone      {:>7.0} ms", sum.as_secs_f64() * 1000.0);
    println!("parallel / slowest alone = {:.2} ({rounds} rounds)", together.as_secs_f64() / slowest.as_secs_f64());
    Ok(())
}
