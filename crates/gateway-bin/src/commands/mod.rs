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
pub(crate) mod skills;

pub(crate) use memory::print_json;
pub(crate) use memory_forget::parse_time_bound;
