//! `pog agent`'s health monitor: its GPUs sampled through NVML every second into
//! `pog_agent::watch`, whose metrics it serves (at `/metrics` on the API's address, or on
//! `--metrics-listen`) and whose recent history answers validators' health requests. A host
//! serving the simulated double has no telemetry to sample (pog-sim simulates none): its GPUs
//! are listed as SIMULATED and unsampled.

use crate::cli::service::AgentArgs;
use crate::output::say;
use anyhow::{Context, Result};
use pog_agent::watch::Watch;
use pog_monitor::prometheus::GpuIdentity;
use pog_proof::wire::GpuClaim;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Seconds between two samples of the agent's GPUs.
const INTERVAL: Duration = Duration::from_secs(1);

/// A bound `--metrics-listen` address and what it serves.
type MetricsListener = (tokio::net::TcpListener, axum::Router);

/// Starts the monitor of `gpus` (the sampler on a thread of its own) and binds
/// `--metrics-listen` when given.
pub(super) fn start(
    rt: &tokio::runtime::Runtime,
    gpus: &[GpuClaim],
    simulated: bool,
    args: &AgentArgs,
) -> Result<(Arc<Watch>, Option<MetricsListener>)> {
    let hostname = pog_device::monitor::hostname();
    let identities = gpus
        .iter()
        .enumerate()
        .map(|(i, g)| GpuIdentity {
            index: i as u32,
            uuid: g.uuid.to_string(),
            model_name: g.model.clone(),
            hostname: hostname.clone(),
            pci_bus_id: Some(g.bus_id.clone()),
            driver_version: None,
        })
        .collect();
    let watch = Arc::new(Watch::new(identities, simulated));
    let listener = match &args.metrics_listen {
        Some(listen) => {
            let listener = rt
                .block_on(tokio::net::TcpListener::bind(listen))
                .with_context(|| format!("cannot listen on {listen} for the metrics"))?;
            let local = listener.local_addr().context("the metrics address")?;
            say(format_args!(
                "metrics at http://{local}/metrics, the dashboard at http://{local}/"
            ));
            Some((listener, pog_agent::watch::metrics_router(watch.clone())))
        }
        None => None,
    };
    if simulated {
        say(format_args!(
            "SIMULATED health monitor: the simulated host has no telemetry to sample; its GPUs \
             are listed as SIMULATED and unsampled, health summaries say simulated"
        ));
        return Ok((watch, listener));
    }
    let uuids: Vec<String> = gpus.iter().map(|g| g.uuid.to_string()).collect();
    let sampled = watch.clone();
    std::thread::Builder::new()
        .name("pog-health".into())
        .spawn(move || {
            // The agent runs until its process ends; so does its sampler.
            let never = AtomicBool::new(false);
            if let Err(e) = pog_agent::watch::run_nvml(&sampled, &uuids, INTERVAL, &never) {
                tracing::warn!(
                    "health monitor: {e}: no telemetry is sampled; /metrics lists the GPUs \
                     unsampled and health summaries report no samples"
                );
            }
        })
        .context("starting the health monitor")?;
    Ok((watch, listener))
}
