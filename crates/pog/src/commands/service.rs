//! `pog agent` and `pog validator`: the long-running services (crates/node), with their keys
//! and registry in the data dir.

mod agent_health;

use crate::chain::{anchor_on_schedule, ChainTarget};
use crate::cli::prove::ProverKind;
use crate::cli::service::{AgentArgs, ValidatorArgs};
use crate::cli::Global;
use crate::host::{collect_and_inspect, data_dir};
use crate::output::{say, Outcome, Verdict};
use crate::render::is_simulated;
use anyhow::{bail, Context, Result};
use pog_agent::agent::{self, Agent};
use pog_agent::reports;
use pog_inspect::GpuVerdict;
use pog_local::provers::{CpuEngine, GpuEngine, ProverEngine};
use pog_net::serve::Limits;
use pog_proof::timing::now_ms;
use pog_proof::wire::GpuClaim;
use pog_records::reports::ReportReceipt;
use pog_records::{MemoryPolicy, PlanKind, Policy};
use pog_validator::registry::Registry;
use pog_validator::schedule::Schedule;
use pog_validator::validator::{Config, Validator};
use std::sync::Arc;
use std::time::Duration;

/// The services' own runtime.
fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Runtime::new().context("starting the async runtime")
}

/// The validator's schedule's own runtime (two worker threads).
fn schedule_runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("pog-rounds")
        .enable_all()
        .build()
        .context("starting the schedule's runtime")
}

/// How often a running agent registers again.
const REREGISTER_EVERY: Duration = Duration::from_secs(300);

/// Binds `listen` (host:port, the host a name or an address) before anything is announced,
/// so a busy port is the first thing reported.
async fn bind(listen: &str) -> Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))
}

/// The simulated host an agent serves when its `--simulate` profile names none (`host=N`): the
/// first 8 bytes of its public key, so that agents of different keys serve different GPUs
/// (one validator takes many of them) and an agent keeps its GPUs across restarts.
fn sim_host(identity: &pog_signed::Identity) -> Result<u64> {
    let key = identity.public_key().to_bytes();
    let head: [u8; 8] = key[..8]
        .try_into()
        .context("the agent's public key is shorter than 8 bytes")?;
    Ok(u64::from_be_bytes(head))
}

/// Serves this host's genuine GPUs.
pub fn agent(global: &Global, args: &AgentArgs) -> Result<Outcome> {
    let rt = runtime()?;
    let listener = rt.block_on(bind(&args.listen))?;
    let stop = {
        let _runtime = rt.enter();
        pog_net::serve::stop_signal().context("installing the signal handlers")?
    };
    let identity = pog_net::keys::load_or_create(&data_dir(global)?.join("agent.key"))?;
    let report = collect_and_inspect(global, sim_host(&identity)?)?;
    let simulated = is_simulated(&report.inventory.origin);
    let gpus: Vec<GpuClaim> = report
        .inspection
        .gpus
        .iter()
        .filter(|g| g.verdict == GpuVerdict::Genuine)
        .filter_map(|g| {
            Some(GpuClaim {
                // NVML's UUID as records name GPUs; one that is not (never seen) is not served.
                uuid: pog_signed::GpuUuid::new(g.uuid.clone()?).ok()?,
                model: g.model.clone()?,
                bus_id: g.bus_id?.to_string(),
                simulated,
            })
        })
        .collect();
    if gpus.is_empty() {
        bail!("no genuine GPU on this host to serve (run `pog inspect` to see why)");
    }
    // The agent's own records, made once and sent after every registration: the inspection
    // it just ran and, when given, a saved benchmark report's figures.
    let bench = match &args.bench_report {
        Some(path) => Some(reports::SavedBench::read(path).context("--bench-report")?),
        None => None,
    };
    let made = reports::agent_reports(&identity, &report, &gpus, bench.as_ref(), now_ms())
        .context("making the agent's inspection and benchmark records")?;
    let local = listener.local_addr().context("reading the bound address")?;
    let endpoint = args
        .advertise
        .clone()
        .unwrap_or_else(|| format!("http://{local}"));
    let engine = prover_engine(global, args.prover, &report, &gpus)?;
    // Every line of an agent serving the simulated double says so.
    let mark = if simulated { "SIMULATED " } else { "" };
    let (watch, metrics_listener) = agent_health::start(&rt, &gpus, simulated, args)?;
    say(format_args!("{mark}agent key: {}", identity.public_key()));
    if let pog_facts::Origin::Simulated { profile } = &report.inventory.origin {
        say(format_args!(
            "SIMULATED host {profile:?}: its GPUs' UUIDs and serials come from host=N, which \
             defaults to a number derived from the agent key"
        ));
    }
    for why in &made.no_figures {
        say(format_args!("{mark}no benchmark record: {why}"));
    }
    say(format_args!(
        "{mark}serving {} GPU(s) at {endpoint} (listening on {local}); proving on the {}",
        gpus.len(),
        engine.name()
    ));
    rt.block_on(async {
        let register_key = pog_signed::Identity::from_seed(identity.seed());
        let service = Arc::new(
            Agent::new(identity, args.trust.clone(), gpus.clone(), engine)
                .watching(watch, metrics_listener.is_none()),
        );
        if let Some((listener, router)) = metrics_listener {
            tokio::spawn(pog_net::serve::serve(
                listener,
                router,
                Limits::small_requests(),
                std::future::pending(),
                Duration::from_secs(1),
            ));
        }
        let mut server = tokio::spawn(pog_net::serve::serve(
            listener,
            agent::router(service),
            Limits::protocol_messages().serving_gpus(gpus.len()),
            stop,
            Duration::from_secs(10),
        ));
        let validator = args.validator.trim_end_matches('/');
        let registered = agent::register(validator, &register_key, &endpoint, &gpus, |e, wait| {
            tracing::warn!(
                "{mark}validator at {validator}: {e}; retrying in {:.1} s",
                wait.as_secs_f64()
            )
        });
        tokio::select! {
            done = registered => {
                done.with_context(|| format!("registering with {validator}"))?;
                say(format_args!("{mark}registered with {validator}"));
                let sent = reports::send_reports(validator, &made.envelopes).await?;
                say(format_args!("{mark}{}", reports_line(&sent)));
            }
            stopped = &mut server => {
                stopped.context("the agent's server stopped")?.context("serving")?;
                return Ok(Outcome(Verdict::Pass));
            }
        }
        // Registered again every few minutes: a validator that released the GPUs (after an
        // outage, or a squatter's claim that has since been released) gets them back, and a
        // refusal is logged instead of ending the agent.
        // The reports go again after each registration: the validator answers the ones it
        // holds without recording them twice, and records those it missed.
        let (again, key, endpoint, gpus) = (
            validator.to_string(),
            register_key,
            endpoint.clone(),
            gpus.clone(),
        );
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(REREGISTER_EVERY).await;
                let quiet = |_: &pog_net::http::PostError, _: Duration| {};
                if let Err(e) = agent::register(&again, &key, &endpoint, &gpus, quiet).await {
                    tracing::warn!("{mark}registering again with {again}: {e}");
                    continue;
                }
                let sent = match reports::send_reports(&again, &made.envelopes).await {
                    Ok(sent) => sent,
                    Err(e) => {
                        tracing::warn!("{mark}sending the reports to {again}: {e}");
                        continue;
                    }
                };
                if sent
                    .iter()
                    .any(|r| r.is_err() || r.as_ref().is_ok_and(|r| r.recorded))
                {
                    tracing::info!("{mark}{}", reports_line(&sent));
                }
            }
        });
        server
            .await
            .context("the agent's server stopped")?
            .context("serving")?;
        Ok(Outcome(Verdict::Pass))
    })
}

/// One line on the reports sent after a registration: how many the validator recorded now,
/// held already, and each refusal.
fn reports_line(sent: &[Result<ReportReceipt, reports::SendError>]) -> String {
    let recorded = sent
        .iter()
        .filter(|r| r.as_ref().is_ok_and(|r| r.recorded))
        .count();
    let held = sent
        .iter()
        .filter(|r| r.as_ref().is_ok_and(|r| !r.recorded))
        .count();
    let mut line = format!(
        "reports sent: {recorded} recorded, {held} held already, {} refused",
        sent.len() - recorded - held
    );
    for e in sent.iter().filter_map(|r| r.as_ref().err()) {
        line.push_str(&format!("; {e}"));
    }
    line
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
                    .map(|d| (g.uuid.to_string(), d.ordinal as usize))
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
                    pog_records::Policy {
                        precision: Some(p),
                        ..pog_records::Policy::per_model_default()
                    }
                    .plan_for(spec)
                });
                for planned in plans.into_iter().flatten() {
                    // Only the shape matters to the preparation, not who the challenge is for.
                    let shape = planned.challenge(
                        [0; 32],
                        pog_proof::challenge::Addressee::shape_only(&g.uuid, &g.bus_id),
                    );
                    match engine.prepare(&shape) {
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
    let rt = runtime()?;
    let listener = rt.block_on(bind(&args.listen))?;
    let signalled = {
        let _runtime = rt.enter();
        pog_net::serve::stop_signal().context("installing the signal handlers")?
    };
    // The chain anchor's settings, checked before anything is opened or served (the chain
    // itself is reached on the schedule: a node that is down delays anchors, never the
    // validator).
    let anchoring = match (&args.anchor_rpc, &args.anchor_contract) {
        (Some(rpc), Some(contract)) => Some(
            ChainTarget::new(rpc, contract, args.anchor_key_file.as_deref())
                .context("--anchor-rpc/--anchor-contract/--anchor-key-file")?,
        ),
        _ => None,
    };
    let dir = data_dir(global)?;
    let identity = pog_net::keys::load_or_create(&dir.join("validator.key"))?;
    let registry_path = dir.join("registry.sqlite");
    let registry = Registry::open(Some(&registry_path))
        .with_context(|| format!("opening {}", registry_path.display()))?;
    let market_path = dir.join("market.sqlite");
    let market = pog_validator::market::Market::open(Some(&market_path), &identity.public_key())
        .with_context(|| format!("opening {}", market_path.display()))?
        .with_limits(args.market.limits());
    let market = Arc::new(market);
    // Every record the validator signs goes into its transparency log first.
    let ledger_dir = dir.join("ledger");
    let ledger = pog_validator::ledger::ValidatorLedger::open(&ledger_dir, &identity, None)
        .with_context(|| format!("opening the ledger in {}", ledger_dir.display()))?;
    let ledger = Arc::new(ledger);
    // Scheduled clearings are signed with the validator's key, as a manual one is.
    let clearer = pog_signed::Identity::from_seed(identity.seed());
    let policy = if args.test_plan {
        Policy {
            plan: PlanKind::Test,
            precision: args.precision,
            size: args.size,
            batch: args.batch,
            leaf_elements: pog_proof::params::LEAF_ELEMENTS,
            expected_ms: args.expected_ms,
            samples: args.samples,
            expiry_ms: args.expiry_ms,
            memory: MemoryPolicy::test_shape(args.expected_ms),
        }
    } else {
        Policy {
            precision: args.precision,
            samples: args.samples,
            expiry_ms: args.expiry_ms,
            ..Policy::per_model_default()
        }
    };
    let policy = Policy {
        memory: if args.no_memory_proof {
            MemoryPolicy::off()
        } else {
            policy.memory
        },
        ..policy
    };
    policy.validate()?;
    let config = Config {
        accept_simulated: args.accept_simulated,
        allow_private_endpoints: args.allow_private_endpoints,
        max_gpus_per_agent: args.max_gpus_per_agent as usize,
        registrations_per_minute: args.registrations_per_minute,
        report_kib_per_gpu_per_hour: args.report_kib_per_gpu_per_hour,
        report_kib_per_source_per_hour: args.report_kib_per_source_per_hour,
    };
    let local = listener.local_addr().context("reading the bound address")?;
    say(format_args!("validator key: {}", identity.public_key()));
    say(format_args!(
        "listening on {local}, registry {}",
        registry_path.display()
    ));
    let mut modes = Vec::new();
    if args.test_plan {
        modes.push("TEST PLAN: fixed challenges that prove no model");
    }
    if args.accept_simulated {
        modes.push("ACCEPTS SIMULATED GPUs");
    }
    if args.allow_private_endpoints {
        modes.push("private endpoints allowed");
    }
    if !modes.is_empty() {
        say(format_args!("mode: {}", modes.join("; ")));
    }
    let schedule = Schedule {
        max_concurrent: args.max_concurrent_challenges as usize,
        release_after: args.release_after,
        ..Schedule::every(args.challenge_every, policy)
    };
    let limits = Limits {
        max_connections: args.max_connections as usize,
        max_connections_per_source: args.max_connections_per_source as usize,
        header_timeout: args.request_timeout,
        body_timeout: args.request_timeout,
        max_inflight_body_bytes: (args.max_inflight_body_mib as usize) << 20,
        ..Limits::small_requests()
    };
    // Built before anything starts: a hardened client that cannot be built stops the validator
    // here rather than leaving it without its defences.
    let witness_client = pog_validator::ledger::witness_client()?;
    rt.block_on(async {
        let service = Arc::new(
            Validator::with_config(identity, registry, config)?.with_ledger(ledger.clone()),
        );
        let (stop, stopped) = tokio::sync::watch::channel(false);
        // Scores and prices from the validator's records, re-quoted as each record is stored.
        let pricing = pog_validator::pricing::Pricing::new(
            service.clone(),
            market.clone(),
            pog_market::Config::embedded(),
        );
        let priced = tokio::spawn(pricing.clone().run(stopped.clone()));
        let cleared = (!args.market.clear_every.is_zero()).then(|| {
            say(format_args!(
                "clearing the order book every {} s ({})",
                args.market.clear_every.as_secs_f64(),
                args.market.clear_mechanism
            ));
            tokio::spawn(pog_validator::pricing::clear_on_schedule(
                market.clone(),
                clearer,
                args.market.clear_every,
                args.market.clear_mechanism,
                stopped.clone(),
            ))
        });
        say(format_args!(
            "ledger {} (log {}): a checkpoint every {} s when it grew, {} witness(es)",
            ledger_dir.display(),
            ledger.vkey(),
            args.checkpoint_every.as_secs_f64(),
            args.witnesses.len()
        ));
        // Stopped after the rounds, so that their last records get a checkpoint; the anchors
        // after that, so that the last checkpoint is anchored too.
        let (checkpoint_stop, checkpoint_stopped) = tokio::sync::watch::channel(false);
        let (anchor_stop, anchor_stopped) = tokio::sync::watch::channel(false);
        // Each checkpoint signed is anchored on chain at the next look (its own task: a slow
        // or unreachable chain never holds up the checkpoints or the API).
        let anchors = anchoring.map(|target| {
            say(format_args!(
                "anchoring checkpoints in the registry {} at {} every {} s",
                target.registry.address(),
                target.rpc,
                args.anchor_every.as_secs_f64()
            ));
            tokio::spawn(anchor_on_schedule(
                ledger.clone(),
                ledger_dir.clone(),
                target.registry,
                args.anchor_every,
                anchor_stopped,
            ))
        });
        let checkpoints = tokio::spawn(pog_validator::ledger::checkpoint_on_schedule(
            ledger,
            args.checkpoint_every,
            (witness_client, args.witnesses.clone()),
            checkpoint_stopped,
        ));
        // The rounds run on a runtime of their own: a thousand challenges starting at once must
        // not queue the API's requests behind them (1000 GPUs on a 2-core machine: API p99
        // 190 ms on one shared runtime, 6 ms on two; docs/protocol.md, "Load").
        let rounds = {
            let (service, rounds_rt) = (service.clone(), schedule_runtime()?);
            std::thread::Builder::new()
                .name("pog-schedule".into())
                .spawn(move || {
                    rounds_rt.block_on(pog_validator::schedule::run(service, schedule, stopped))
                })
                .context("starting the schedule")?
        };
        pog_net::serve::serve(
            listener,
            pog_validator::pricing::router(service, market, pricing),
            limits,
            signalled,
            Duration::from_secs(10),
        )
        .await
        .context("serving")?;
        tracing::info!("stopping: finishing the challenges in flight");
        let _ = stop.send(true);
        let _ = tokio::task::spawn_blocking(move || rounds.join()).await;
        let _ = priced.await;
        let _ = checkpoint_stop.send(true);
        let _ = checkpoints.await;
        let _ = anchor_stop.send(true);
        if let Some(anchors) = anchors {
            let _ = anchors.await;
        }
        if let Some(cleared) = cleared {
            let _ = cleared.await;
        }
        Ok(Outcome(Verdict::Pass))
    })
}
