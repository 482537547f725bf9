//! The host a command works on: its platform (this machine, or the simulated test double
//! that `--simulate` asks for), its inspection, and the data dir where pog keeps its keys,
//! registry, ledger and history.

use crate::cli::Global;
use crate::output;
use anyhow::{anyhow, Result};
use pog_device::{RealConfig, RealPlatform};
use pog_facts::Platform;
use pog_inspect::InspectReport;
use pog_sim::SimPlatform;
use std::path::PathBuf;

/// The machine to work on: this one, or the simulated double when `--simulate` asks for it,
/// as host number `sim_host` unless its profile names another (`host=N`).
pub fn platform(global: &Global, sim_host: u64) -> Result<Box<dyn Platform>> {
    Ok(match &global.simulate {
        Some(profile) => Box::new(
            SimPlatform::from_profile_or_host(profile, sim_host)
                .map_err(|e| anyhow!("bad --simulate profile {profile:?}: {e}"))?,
        ),
        None => Box::new(RealPlatform::new(RealConfig {
            nvidia_smi: global.nvidia_smi.clone(),
            nvidia_smi_timeout: global.nvidia_smi_timeout,
            ..RealConfig::default()
        })),
    })
}

/// Collects and inspects (with a spinner on a terminal, as nvidia-smi can take seconds); a
/// simulated host is number `sim_host` unless its profile names another.
pub fn collect_and_inspect(global: &Global, sim_host: u64) -> Result<InspectReport> {
    let platform = platform(global, sim_host)?;
    let spinner = output::spinner(
        global.json,
        "reading NVML, CUDA, nvidia-smi, sysfs and procfs",
    );
    let report = pog_inspect::run(platform.as_ref());
    spinner.finish_and_clear();
    Ok(report)
}

/// The data dir: --data-dir / POG_DATA_DIR, else $XDG_DATA_HOME/pog, else ~/.local/share/pog.
pub fn data_dir(global: &Global) -> Result<PathBuf> {
    if let Some(dir) = &global.data_dir {
        return Ok(dir.clone());
    }
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(xdg).join("pog"));
    }
    let home = std::env::var_os("HOME").ok_or_else(|| {
        anyhow!("no --data-dir, POG_DATA_DIR, XDG_DATA_HOME or HOME to keep pog's keys in")
    })?;
    Ok(PathBuf::from(home).join(".local/share/pog"))
}
