//! `pog agent` and `pog validator`: the long-running services (crates/node), with their keys
//! and registry in the data dir.

use super::{Outcome, Verdict};
use crate::cli::{AgentArgs, Global, ProverKind, ValidatorArgs};
use anyhow::{anyhow, bail, Context, Result};
use pog_inspect::GpuVerdict;
use pog_node::agent::{self, Agent};
use pog_node::provers::{CpuEngine, GpuEngine, ProverEngine};
use pog_node::registry::Registry;
use pog_node::validator::{self, Policy, Validator};
use pog_proof::wire::GpuClaim;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The data dir: --data-dir / POG_DATA_DIR, else $XDG_DATA_HOME/pog, else ~/.local/share/pog.
fn data_dir(global: &Global) -> Result<PathBuf> {
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

/// Prints a status line; a closed stdout (a supervisor that stopped reading) must not stop a
/// service, so write errors are ignored.
fn say(line: std::fmt::Arguments) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout(), "{line}");
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Runtime::new().context("starting the async runtime")
}

/// Serves this host's genuine GPUs.
pub fn agent(global: &Global, args: &AgentArgs) -> Result<Outcome> {
    let identity = pog_node::keys::load_or_create(&data_dir(global)?.join("agent.key"))
        .map_err(|e| anyhow!(e))?;
    let report = super::inspect::collect_and_inspect(global)?;
    let simulated = crate::render::is_simulated(&report.inventory.origin);
    let gpus: Vec<GpuClaim> = report
        .inspection
        .gpus
        .iter()
        .filter(|g| g.verdict == GpuVerdict::Genuine)
        .filter_map(|g| {
            Some(GpuClaim {
                uuid: g.uuid.clone()?,
                model: g.model.clone()?,
                bus_id: g.bus_id?.to_string(),
                simulated,
            })
        })
        .collect();
    if gpus.is_empty() {
        bail!("no genuine GPU on this host to serve (run `pog inspect` to see why)");
    }
    let endpoint = args
        .advertise
        .clone()
        .unwrap_or_else(|| format!("http://{}", args.listen));
    let engine = prover_engine(global, args.prover, &report, &gpus)?;
    // Every line of an agent serving the simulated double says so.
    let mark = if simulated { "SIMULATED " } else { "" };
    say(format_args!("{mark}agent key: {}", identity.public_hex()));
    say(format_args!(
        "{mark}serving {} GPU(s) at {endpoint}; proving on the {}",
        gpus.len(),
        engine.name()
    ));
    let rt = runtime()?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("listening on {}", args.listen))?;
        let register_key = pog_proof::wire::Identity::from_seed(identity.seed());
        let service = Arc::new(Agent::new(
            identity,
            args.trust.clone(),
            gpus.clone(),
            engine,
        ));
        let server = tokio::spawn(pog_node::http::serve(listener, agent::router(service)));
        agent::register(
            &args.validator,
            &register_key,
            &endpoint,
            &gpus,
            Duration::from_secs(30),
        )
        .await
        .map_err(|e| anyhow!("registering with {}: {e}", args.validator))?;
        say(format_args!("{mark}registered with {}", args.validator));
        server
            .await
            .context("the agent's server stopped")?
            .context("serving")?;
        Ok(Outcome(Verdict::Pass))
    })
}

/// The engine `pog agent --prover` asks for. The GPU engine starts a worker per claimed GPU
/// and prepares each for the challenge its validator's per-model plan will send.
fn prover_engine(
    global: &Global,
    kind: ProverKind,
    report: &pog_inspect::InspectReport,
    gpus: &[GpuClaim],
) -> Result<Arc<dyn ProverEngine>> {
    let cpu = || -> Arc<dyn ProverEngine> {
        Arc::new(CpuEngine {
            behaviour: pog_proof::prover::Behaviour::Honest,
        })
    };
    if kind == ProverKind::Cpu || (kind == ProverKind::Auto && global.simulate.is_some()) {
        return Ok(cpu());
    }
    let ordinals: Option<Vec<(String, usize)>> = report.inventory.cuda.value().and_then(|cuda| {
        gpus.iter()
            .map(|g| {
                cuda.devices
                    .iter()
                    .find(|d| {
                        d.pci_bus_id.value().map(|b| b.to_string()).as_deref() == Some(&g.bus_id)
                    })
                    .map(|d| (g.uuid.clone(), d.ordinal as usize))
            })
            .collect()
    });
    let started = match ordinals {
        Some(ordinals) => GpuEngine::start(&ordinals).map_err(|e| e.to_string()),
        None => Err("CUDA does not see every GPU the agent serves".to_string()),
    };
    match (started, kind) {
        (Ok(engine), _) => {
            // Every shape a per-model validator may ask (its pick, or any proof precision it
            // is told to use) gets its GEMM algorithm chosen now, outside any timed window.
            for g in gpus {
                let Some(spec) = pog_spec::SpecDb::embedded().by_model(&g.model) else {
                    continue;
                };
                let plans = pog_proof::params::PROOF_PRECISIONS.map(|p| {
                    pog_node::validator::Policy {
                        precision: Some(p),
                        ..pog_node::validator::Policy::per_model_default()
                    }
                    .plan_for(spec)
                });
                for planned in plans.into_iter().flatten() {
                    match engine.prepare(&planned.challenge([0; 32], &g.uuid, &g.bus_id)) {
                        Ok(algorithm) => say(format_args!(
                            "GPU {}: ready for {} n={} ({})",
                            g.uuid,
                            planned.precision,
                            planned.size,
                            algorithm.unwrap_or_default()
                        )),
                        Err(e) => say(format_args!("GPU {}: not prepared: {e}", g.uuid)),
                    }
                }
            }
            Ok(Arc::new(engine))
        }
        (Err(e), ProverKind::Auto) => {
            say(format_args!(
                "the GPU prover is unavailable ({e}); proving on the CPU"
            ));
            Ok(cpu())
        }
        (Err(e), _) => bail!("the GPU prover is unavailable: {e}"),
    }
}

/// Runs the validator.
pub fn validator(global: &Global, args: &ValidatorArgs) -> Result<Outcome> {
    let dir = data_dir(global)?;
    let identity =
        pog_node::keys::load_or_create(&dir.join("validator.key")).map_err(|e| anyhow!(e))?;
    let registry_path = dir.join("registry.sqlite");
    let registry = Registry::open(Some(&registry_path))
        .with_context(|| format!("opening {}", registry_path.display()))?;
    say(format_args!("validator key: {}", identity.public_hex()));
    say(format_args!(
        "listening on {}, registry {}",
        args.listen,
        registry_path.display()
    ));
    let policy = Policy {
        precision: args.precision,
        size: args.size,
        batch: args.batch,
        leaf_elements: pog_proof::params::LEAF_ELEMENTS,
        expected_ms: args.expected_ms,
        samples: args.samples,
        expiry_ms: args.expiry_ms,
        per_model: args.per_model,
    };
    let rt = runtime()?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("listening on {}", args.listen))?;
        let mut service = Validator::new(identity, registry);
        if args.accept_simulated {
            service = service.accepting_simulated();
        }
        let service = Arc::new(service);
        tokio::spawn(validator::run_schedule(
            service.clone(),
            args.challenge_every,
            policy,
        ));
        pog_node::http::serve(listener, validator::router(service))
            .await
            .context("serving")?;
        Ok(Outcome(Verdict::Pass))
    })
}
