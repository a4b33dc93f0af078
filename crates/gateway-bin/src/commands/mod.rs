//! One module per subcommand; [`crate::cli::run`] dispatches to them.

pub(crate) mod agents;
pub(crate) mod config;
pub(crate) mod context;
pub(crate) mod dashboard;
pub(crate) mod embed;
pub(crate) mod guard;
pub(crate) mod hooks;
pub(crate) mod host_hook;
pub(crate) mod host_install;
pub(crate) mod import;
pub(crate) mod memory;
pub(crate) mod memory_consolidate;
mod memory_episodic;
pub(crate) mod memory_files;
pub(crate) mod memory_forget;
pub(crate) mod memory_review;
pub(crate) mod memory_transfer;
pub(crate) mod model;
mod progress;
pub(crate) mod skills;

pub(crate) use memory::print_json;
pub(crate) use memory_forget::parse_time_bound;

/// The lines of `path`, or of standard input for `-`.
pub(crate) fn input_lines(path: &std::path::Path) -> anyhow::Result<Box<dyn std::io::BufRead>> {
    use anyhow::Context as _;
    if path.as_os_str() == "-" {
        return Ok(Box::new(std::io::stdin().lock()));
    }
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    Ok(Box::new(std::io::BufReader::new(file)))
}
