//! Tracing subscriber: human-readable, to stderr, filtered by `RUST_LOG`.

use tracing_subscriber::EnvFilter;

/// Installs the process-wide subscriber. Nothing else in Cairn installs one,
/// and nothing but command output goes to stdout.
pub(crate) fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_target(true).try_init();
}
