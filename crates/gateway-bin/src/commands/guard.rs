//! `cairn guard scan`.

use std::process::ExitCode;

use crate::cli::ScanArgs;

pub(crate) fn scan(_args: &ScanArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("guard scan is not built yet")
}
