//! Waiting for a `cairn serve --port 0 --port-file FILE` child to write
//! its address (shared by the measurement programs that start a gateway).

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::bail;

/// The `host:port` the gateway wrote to `port_file` (a complete line), or
/// an error when `child` exits first or a minute passes.
pub fn wait_for_address(child: &mut Child, port_file: &Path) -> anyhow::Result<String> {
    let started = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(port_file)
            && text.ends_with('\n')
        {
            return Ok(text.trim().to_owned());
        }
        if let Some(status) = child.try_wait()? {
            bail!("cairn serve exited: {status}");
        }
        if started.elapsed() > Duration::from_secs(60) {
            bail!("cairn serve did not start");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
