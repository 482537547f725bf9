//! `pog agent` and `pog validator`: the long-running services (`pog_agent`, and
//! `pog_validator::app`), with their keys and stores in the data dir.

mod agent_health;

use crate::chain::ChainTarget;
use crate::cli::prove::ProverKind;
use crate::cli::service::{AgentArgs, ValidatorArgs};
use crate::cli::Global;
use crate::host::{collect_and_inspect, data_dir};
use crate::output::{say, Outcome, Verdict};
use crate::render::is_simulated;
use anyhow::{bail, Context, Result};
use pog_agent::agent::{self, Agent};
use pog_agent::reports;
use pog_anchor::service::{AnchorSchedule, LedgerSource, StatePublishing};
use pog_inspect::GpuVerdict;
use pog_local::provers::{CpuEngine, GpuEngine, ProverEngine};
use pog_net::serve::Limits;
use pog_proof::storage::StorageClaim;
use pog_proof::timing::now_ms;
use pog_proof::wire::GpuClaim;
use pog_records::reports::ReportReceipt;
use pog_records::{MemoryPolicy, PlanKind, Policy};
use pog_validator::app::{AfterCheckpoints, Settings, ValidatorApp};
use pog_validator::schedule::Schedule;
use pog_validator::validator::Config;
use std::sync::Arc;
use std::time::Duration;

/// The services' own runtime.
fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Runtime::new().context("starting the async runtime")
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
    let storage = match (&args.storage_dir, args.storage_size) {
        (Some(dir), Some(bytes)) => {
            let claim = StorageClaim::new(bytes, args.storage_class.into())
                .with_context(|| format!("--storage-size {bytes}"))?;
            let storage = pog_agent::storage::HostStorage::new(dir, claim)
                .with_context(|| format!("--storage-dir {}", dir.display()))?;
            say(format_args!(
                "{mark}claiming {} bytes of {} storage in {}",
                claim.bytes,
                claim.class,
                dir.display()
            ));
            Some(storage)
        }
        _ => None,
    };
    let storage_claim = storage.as_ref().map(|s| s.claim());
    let ram_claim = ram_claim(args.ram_claim, &report)?;
    if let Some(bytes) = ram_claim {
        say(format_args!("{mark}claiming {bytes} bytes of RAM"));
    }
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
        let mut service = Agent::new(identity, args.trust.clone(), gpus.clone(), engine)
            .watching(watch, metrics_listener.is_none());
        if let Some(storage) = storage {
            service = service.with_storage(storage);
        }
        if let Some(bytes) = ram_claim {
            service = service.with_ram(bytes);
        }
        let service = Arc::new(service);
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
            pog_agent::api::router(service),
            Limits::protocol_messages().serving_gpus(gpus.len()),
            stop,
            Duration::from_secs(10),
        ));
        let validator = args.validator.trim_end_matches('/');
        let host = Some(agent::host_claim(
            args.token_owner,
            storage_claim,
            ram_claim,
        ));
        let registered = agent::register(
            validator,
            &register_key,
            (&endpoint, host),
            &gpus,
            |e, wait| {
                tracing::warn!(
                    "{mark}validator at {validator}: {e}; retrying in {:.1} s",
                    wait.as_secs_f64()
                )
            },
        );
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
        // The GPUs' leases delivered through the operator's hook, on their own task.
        if let Some(hook) = &args.lease_hook {
            say(format_args!(
                "{mark}delivering leases through {} (grant at a lease's start, revoke at its end)",
                hook.display()
            ));
            tokio::spawn(deliver_leases(
                validator.to_string(),
                pog_signed::Identity::from_seed(register_key.seed()),
                args.trust.clone(),
                gpus.iter().map(|g| g.uuid.to_string()).collect(),
                pog_agent::leases::Hook {
                    path: hook.clone(),
                    timeout: pog_agent::leases::HOOK_TIMEOUT,
                },
                data_dir(global)?.join("leases.json"),
                mark,
            ));
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
                if let Err(e) = agent::register(&again, &key, (&endpoint, host), &gpus, quiet).await
                {
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
                    match engine.prepare(pog_proof::task::Task::Gemm(&shape)) {
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
    let mut settings = settings(global, args)?;
    settings.deposits = match (&args.escrow_rpc, &args.escrow_contract) {
        (Some(rpc), Some(contract)) => Some(Arc::new(EscrowDeposits {
            escrow: pog_anchor::escrow::Escrow::new(
                &pog_anchor::RpcUrl::parse(rpc).context("--escrow-rpc")?,
                pog_anchor::parse_address(contract).context("--escrow-contract")?,
                None,
            )?,
            runtime: rt.handle().clone(),
        })),
        _ => None,
    };
    settings.escrow_payments = match (
        &args.escrow_rpc,
        &args.escrow_contract,
        &args.escrow_key_file,
    ) {
        (Some(rpc), Some(contract), Some(key)) => {
            let payments = rt
                .block_on(EscrowSettlements::connect(
                    &pog_anchor::RpcUrl::parse(rpc).context("--escrow-rpc")?,
                    contract,
                    &pog_anchor::PublisherKey::from_file(key).context("--escrow-key-file")?,
                    rt.handle().clone(),
                ))
                .context("connecting to the escrow to settle leases")?;
            Some(Arc::new(payments) as Arc<dyn pog_validator::settlement::EscrowPayments>)
        }
        _ => None,
    };
    let app = ValidatorApp::open(settings)?;
    let mut publishing = match (
        &args.scores_contract,
        &args.anchor_rpc,
        &args.anchor_key_file,
    ) {
        (Some(scores), Some(rpc), Some(key)) => Some(StatePublishing {
            scores: pog_anchor::scores::Scores::new(
                &pog_anchor::RpcUrl::parse(rpc)?,
                pog_anchor::parse_address(scores).context("--scores-contract")?,
                Some(&pog_anchor::PublisherKey::from_file(key)?),
            )?,
            ledger: Arc::new(ValidatorLog(app.ledger().clone())),
            batch: pog_anchor::scores::DEFAULT_BATCH,
        }),
        _ => None,
    };
    let local = listener.local_addr().context("reading the bound address")?;
    say(format_args!("validator key: {}", app.public_key()));
    say(format_args!(
        "listening on {local}, registry {}",
        app.registry_place()
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
    if args.escrow_contract.is_none() {
        modes.push("bids NOT backed by deposits (no --escrow-contract)");
    } else if args.escrow_key_file.is_none() {
        modes.push("leases settled but NOT paid (no --escrow-key-file)");
    }
    if !modes.is_empty() {
        say(format_args!("mode: {}", modes.join("; ")));
    }
    if !args.market.clear_every.is_zero() {
        say(format_args!(
            "clearing the order book every {} s ({})",
            args.market.clear_every.as_secs_f64(),
            args.market.clear_mechanism
        ));
    }
    say(format_args!(
        "{} {} (log {}): a checkpoint every {} s when it grew, {} witness(es)",
        match app.ledger().is_fleets() {
            true => "the fleet's ledger (sequenced in the database, checkpoints signed by the log lease's holder), mirrored in",
            false => "ledger",
        },
        app.ledger_dir().display(),
        app.ledger().vkey(),
        args.checkpoint_every.as_secs_f64(),
        args.witnesses.len()
    ));
    // Each checkpoint signed is anchored on chain at the next look (its own task: a slow or
    // unreachable chain never holds up the checkpoints or the API).
    let anchors = anchoring.map(|target| -> AfterCheckpoints {
        say(format_args!(
            "anchoring checkpoints in the registry {} at {} every {} s",
            target.registry.address(),
            target.rpc,
            args.anchor_every.as_secs_f64()
        ));
        let mut schedule =
            AnchorSchedule::new(target.registry, app.ledger_dir(), args.anchor_every)
                .only_while(app.ledger().leading());
        if let Some(publishing) = publishing.take() {
            say(format_args!(
                "publishing the GPUs' states to {} after each anchoring",
                publishing.scores.address()
            ));
            schedule = schedule.publishing(publishing);
        }
        Box::new(move |stopped| tokio::spawn(schedule.run(stopped)))
    });
    rt.block_on(app.run(listener, signalled, anchors))?;
    Ok(Outcome(Verdict::Pass))
}

/// How often the agent reads its GPUs' leases from the validator.
const LEASES_EVERY: Duration = Duration::from_secs(30);

/// Follows the leases of `gpus` held by `agent` at the validator, and runs `hook` to grant
/// each when it starts and revoke it when it ends, keeping what was done in `state` (a
/// restarted agent neither grants twice nor forgets to revoke). Only a lease page signed by a
/// `trusted` validator key is acted on, and each lease's state is judged by this host's clock
/// from its signed times (a page replayed later grants nothing that ended). A validator that
/// does not answer is retried at the next look; a hook that fails, hangs or prints garbage
/// marks its lease failed (logged, kept, not retried), and a failed grant is reported to the
/// validator (signed by the agent's key) until it is taken, so the renter is refunded.
async fn deliver_leases(
    validator: String,
    identity: pog_signed::Identity,
    trusted: Vec<pog_signed::PublicKey>,
    gpus: std::collections::BTreeSet<String>,
    hook: pog_agent::leases::Hook,
    state: std::path::PathBuf,
    mark: &'static str,
) {
    use pog_agent::leases::Deliveries;
    let mut deliveries = match Deliveries::load(&state) {
        Ok(d) => d,
        Err(e) => {
            tracing::error!("{mark}{e}: leases are not delivered until it is fixed");
            return;
        }
    };
    let client = match pog_validator::client::MarketClient::new(&validator) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("{mark}the validator's client: {e}: leases are not delivered");
            return;
        }
    };
    let agent = identity.public_key();
    let filter = pog_validator::market::LeaseFilter {
        party: Some(agent.to_string()),
        limit: Some(1000),
        ..Default::default()
    };
    loop {
        match client.leases(&filter, &trusted).await {
            Ok(page) => {
                let listed: Vec<pog_agent::leases::Listed> = page
                    .leases
                    .iter()
                    .rev()
                    .map(|v| pog_agent::leases::Listed {
                        id: v.lease.id.clone(),
                        gpu: v.lease.gpu.to_string(),
                        provider: v.lease.provider.clone(),
                        state: v.lease.state_at(now_ms()).to_string(),
                        json: serde_json::to_vec(v).unwrap_or_default(),
                    })
                    .collect();
                let (hook, gpus, provider) = (hook.clone(), gpus.clone(), agent.to_string());
                let mut round = std::mem::take(&mut deliveries);
                let done = tokio::task::spawn_blocking(move || {
                    let ran = pog_agent::leases::deliver(
                        &listed,
                        &provider,
                        &gpus,
                        &hook,
                        &mut round,
                        now_ms(),
                    );
                    (ran, round)
                })
                .await;
                let Ok((ran, round)) = done else {
                    tracing::error!("{mark}delivering the leases failed (a bug)");
                    return;
                };
                deliveries = round;
                for (id, action, result) in &ran {
                    match result {
                        Ok(_) => tracing::info!(lease = %id, "{mark}lease {id}: {}", action.name()),
                        Err(e) => tracing::warn!(lease = %id, "{mark}lease {id} failed: {e}"),
                    }
                }
                // A grant that failed is reported to the validator, which refunds the renter
                // the hours after it; tried again each round until taken.
                let mut reported = false;
                for (id, at_ms, why) in deliveries.unreported() {
                    match client.report_undelivered(&identity, &id, at_ms, &why).await {
                        Ok(_) => {
                            deliveries.reported(&id, now_ms());
                            reported = true;
                        }
                        Err(e) => {
                            tracing::warn!(lease = %id, "{mark}reporting lease {id} undelivered: {e}")
                        }
                    }
                }
                if !ran.is_empty() || reported {
                    if let Err(e) = deliveries.save(&state) {
                        tracing::error!("{mark}{e}");
                    }
                }
            }
            Err(e) => tracing::warn!("{mark}reading the leases from {validator}: {e}"),
        }
        tokio::time::sleep(LEASES_EVERY).await;
    }
}

/// How long reading a bid's deposit from the escrow may take before the bid is refused (503,
/// nothing accepted).
const ESCROW_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The escrow's deposits as the market reads them to back bids: each read a call to the chain,
/// made from the market's blocking thread on the validator's runtime.
struct EscrowDeposits {
    escrow: pog_anchor::escrow::Escrow,
    runtime: tokio::runtime::Handle,
}

impl pog_market::backing::Deposits for EscrowDeposits {
    fn deposit_of(
        &self,
        owner: &pog_signed::PublicKey,
    ) -> Result<u128, pog_market::backing::DepositsUnavailable> {
        use pog_market::backing::DepositsUnavailable;
        let read = tokio::time::timeout(ESCROW_READ_TIMEOUT, self.escrow.account_of(owner));
        match self.runtime.block_on(read) {
            Ok(Ok(account)) => Ok(account.balance),
            Ok(Err(e)) => Err(DepositsUnavailable(e.to_string())),
            Err(_) => Err(DepositsUnavailable(format!(
                "the escrow at {} did not answer in {} s",
                self.escrow.address(),
                ESCROW_READ_TIMEOUT.as_secs()
            ))),
        }
    }
}

/// How long one submission of a settlement to the escrow may take before it is tried again at
/// the next pass.
const ESCROW_SEND_TIMEOUT: Duration = Duration::from_secs(60);

/// The escrow as the validator's settler pays through it: settlements signed with the
/// settlement key (`--escrow-key-file`) and submitted from its account, each made from the
/// settler's blocking thread on the validator's runtime.
struct EscrowSettlements {
    escrow: pog_anchor::escrow::Escrow,
    signer: pog_anchor::escrow::SettlementSigner,
    chain_id: u64,
    runtime: tokio::runtime::Handle,
}

impl EscrowSettlements {
    /// Reads the chain's id and checks that `key` is the escrow's settlement key.
    async fn connect(
        rpc: &pog_anchor::RpcUrl,
        contract: &str,
        key: &pog_anchor::PublisherKey,
        runtime: tokio::runtime::Handle,
    ) -> Result<EscrowSettlements> {
        let address = pog_anchor::parse_address(contract).context("--escrow-contract")?;
        let escrow = pog_anchor::escrow::Escrow::new(rpc, address, Some(key))?;
        let chain_id = escrow.chain_id().await?;
        let settler = escrow.settler().await?;
        if settler != key.address() {
            anyhow::bail!(
                "--escrow-key-file holds the key of {}, but the escrow at {address} is settled by {settler}",
                key.address()
            );
        }
        Ok(EscrowSettlements {
            signer: pog_anchor::escrow::SettlementSigner::new(key.clone(), chain_id, address),
            escrow,
            chain_id,
            runtime,
        })
    }

    /// The contract's form of `terms`.
    fn settlement(
        terms: &pog_validator::settlement::EscrowTerms,
    ) -> Result<
        pog_anchor::contract::IGpuEscrow::Settlement,
        pog_validator::settlement::EscrowUnavailable,
    > {
        pog_anchor::escrow::settlement_of(
            &terms.lease_id,
            terms.period,
            &terms.renter,
            &terms.payee,
            terms.paid_micro_usd,
        )
        .map_err(|e| pog_validator::settlement::EscrowUnavailable(e.to_string()))
    }
}

impl pog_validator::settlement::EscrowPayments for EscrowSettlements {
    fn sign(
        &self,
        terms: &pog_validator::settlement::EscrowTerms,
    ) -> Result<pog_records::EscrowPayment, pog_validator::settlement::EscrowUnavailable> {
        use pog_validator::settlement::EscrowUnavailable;
        let s = Self::settlement(terms)?;
        let signature = self
            .signer
            .sign_settlement(&s)
            .map_err(|e| EscrowUnavailable(e.to_string()))?;
        Ok(pog_records::EscrowPayment {
            chain_id: self.chain_id,
            contract: self.escrow.address().to_checksum(None),
            settler: self.signer.address().to_checksum(None),
            lease: s.lease.to_string(),
            renter_account: s.renter.to_string(),
            signature: format!("0x{}", hex::encode(signature)),
        })
    }

    fn deliver(
        &self,
        terms: &pog_validator::settlement::EscrowTerms,
        payment: &pog_records::EscrowPayment,
    ) -> Result<bool, pog_validator::settlement::EscrowUnavailable> {
        use pog_validator::settlement::EscrowUnavailable;
        let s = Self::settlement(terms)?;
        let signature = payment
            .signature
            .strip_prefix("0x")
            .and_then(|h| hex::decode(h).ok())
            .ok_or_else(|| {
                EscrowUnavailable(format!(
                    "a kept signature that is not hex: {}",
                    payment.signature
                ))
            })?;
        let submit = async {
            // Paid already (whoever submitted it): done.
            if self.escrow.is_settled(s.lease, s.period).await? {
                return Ok(());
            }
            self.escrow.settle(&s, &signature).await.map(|_| ())
        };
        match self
            .runtime
            .block_on(tokio::time::timeout(ESCROW_SEND_TIMEOUT, submit))
        {
            Ok(Ok(())) => Ok(true),
            Ok(Err(e)) => Err(EscrowUnavailable(e.to_string())),
            Err(_) => Err(EscrowUnavailable(format!(
                "the escrow at {} did not take it in {} s",
                self.escrow.address(),
                ESCROW_SEND_TIMEOUT.as_secs()
            ))),
        }
    }

    fn voucher(
        &self,
        renter: &pog_signed::PublicKey,
        amount_micro_usd: u64,
        expires_at_s: u64,
    ) -> Result<pog_validator::settlement::Voucher, pog_validator::settlement::EscrowUnavailable>
    {
        use pog_validator::settlement::EscrowUnavailable;
        let read = tokio::time::timeout(ESCROW_READ_TIMEOUT, self.escrow.account_of(renter));
        let account = match self.runtime.block_on(read) {
            Ok(Ok(account)) => account,
            Ok(Err(e)) => return Err(EscrowUnavailable(e.to_string())),
            Err(_) => {
                return Err(EscrowUnavailable(format!(
                    "the escrow at {} did not answer in {} s",
                    self.escrow.address(),
                    ESCROW_READ_TIMEOUT.as_secs()
                )))
            }
        };
        let w = pog_anchor::escrow::withdrawal_of(
            renter,
            amount_micro_usd,
            account.withdrawals,
            expires_at_s,
        );
        let signature = self
            .signer
            .sign_withdrawal(&w)
            .map_err(|e| EscrowUnavailable(e.to_string()))?;
        Ok(pog_validator::settlement::Voucher {
            renter: renter.clone(),
            amount_micro_usd,
            nonce: account.withdrawals,
            expires_at_s,
            chain_id: self.chain_id,
            contract: self.escrow.address().to_checksum(None),
            signature: format!("0x{}", hex::encode(signature)),
        })
    }
}

/// The validator's ledger as the anchoring schedule reads it to publish GPU states.
struct ValidatorLog(Arc<pog_validator::ledger::ValidatorLedger>);

impl LedgerSource for ValidatorLog {
    fn ledger(&self) -> &pog_ledger::store::Ledger {
        self.0.ledger()
    }
}

/// The RAM the agent claims: none without `--ram-claim`; its bytes, or with `all` the host's
/// total memory as its inventory reads it (refused on a simulated host, whose memory is not
/// this machine's). A claim outside the proof's range, or beyond the memory the inventory
/// reads, is refused.
fn ram_claim(
    asked: Option<crate::cli::service::RamClaim>,
    report: &pog_inspect::InspectReport,
) -> Result<Option<u64>> {
    use crate::cli::service::RamClaim;
    let total = report
        .inventory
        .host
        .memory_total_bytes
        .value()
        .copied()
        .filter(|_| !is_simulated(&report.inventory.origin));
    let claim = match asked {
        None => return Ok(None),
        Some(RamClaim::Bytes(bytes)) => bytes,
        Some(RamClaim::All) => total.context(
            "--ram-claim all: this host's total memory is not known (a simulated host, or an \
             inventory without it): give the bytes",
        )?,
    };
    pog_proof::ram::plan(claim, 1, pog_proof::ram::floor_rate())
        .with_context(|| format!("--ram-claim {claim}"))?;
    if let Some(total) = total.filter(|t| claim > *t) {
        bail!(
            "--ram-claim {claim}: beyond this host's {total} bytes of memory (the proof of RAM \
             would swap, and fail)"
        );
    }
    Ok(Some(claim))
}

/// The validator's settings from its flags: the policy, what it allows, its schedule, its
/// server's and its book's caps, its clearings and checkpoints.
fn settings(global: &Global, args: &ValidatorArgs) -> Result<Settings> {
    let policy = if args.test_plan {
        Policy {
            plan: PlanKind::Test,
            precision: args.precision,
            size: args.size,
            batch: args.batch,
            leaf_elements: None,
            expected_ms: args.expected_ms,
            samples: args.samples,
            expiry_ms: args.expiry_ms,
            memory: MemoryPolicy::test_shape(args.expected_ms),
            cpu: pog_records::CpuPolicy::test_shape(),
            ram: pog_records::RamPolicy::test_shape(),
            lease_check: false,
            storage: pog_records::StoragePolicy::test_shape(),
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
        cpu: pog_records::CpuPolicy {
            enabled: !args.no_cpu_proof,
            steps: args.cpu_lane_steps.unwrap_or(policy.cpu.steps),
            ..policy.cpu
        },
        ram: pog_records::RamPolicy {
            enabled: !args.no_ram_proof,
            walkers: args.ram_walkers.unwrap_or(policy.ram.walkers),
            walk_gbs: args.ram_walk_gbs,
            build_gibs_per_thread: args.ram_build_gibs_per_thread,
            ..policy.ram
        },
        storage: pog_records::StoragePolicy {
            enabled: !args.no_storage_proof,
            steps: args.storage_steps.unwrap_or(policy.storage.steps),
            samples: args
                .storage_steps
                .map_or(policy.storage.samples, |s| policy.storage.samples.min(s)),
            rebuild_after_ms: args.storage_rebuild_days * 86_400_000,
            ..policy.storage
        },
        ..policy
    };
    Ok(Settings {
        data_dir: data_dir(global)?,
        config: Config {
            accept_simulated: args.accept_simulated,
            allow_private_endpoints: args.allow_private_endpoints,
            max_gpus_per_agent: args.max_gpus_per_agent as usize,
            registrations_per_minute: args.registrations_per_minute,
            report_kib_per_gpu_per_hour: args.report_kib_per_gpu_per_hour,
            report_kib_per_source_per_hour: args.report_kib_per_source_per_hour,
        },
        schedule: Schedule {
            max_concurrent: args.max_concurrent_challenges as usize,
            release_after: args.release_after,
            max_clock_skew: Some(pog_validator::schedule::MAX_CLOCK_SKEW),
            ram_every: Duration::from_secs(args.ram_every_hours * 3600),
            ..Schedule::every(args.challenge_every, policy)
        },
        limits: Limits {
            max_connections: args.max_connections as usize,
            max_connections_per_source: args.max_connections_per_source as usize,
            header_timeout: args.request_timeout,
            body_timeout: args.request_timeout,
            max_inflight_body_bytes: (args.max_inflight_body_mib as usize) << 20,
            ..Limits::small_requests()
        },
        market: args.market.limits(),
        settlement: (
            pog_market::settlement::SettlementRules {
                period_ms: args.settlement_period_hours * 3_600_000,
                ..Default::default()
            },
            args.settle_every,
        ),
        escrow_payments: None,
        clearing: (!args.market.clear_every.is_zero())
            .then_some((args.market.clear_every, args.market.clear_mechanism)),
        checkpoint_every: args.checkpoint_every,
        witnesses: args.witnesses.clone(),
        witness_quorum: args.witness_quorum,
        witness_budget: pog_validator::ledger::WitnessBudget {
            per_minute: args.witness_requests_per_minute,
            ..Default::default()
        },
        database: args.database.clone(),
        log_key: match (&args.log_key_file, std::env::var("POG_LOG_KEY")) {
            (Some(path), _) => Some(pog_validator::app::LogKeySource::File(path.clone())),
            (None, Ok(hex)) => Some(pog_validator::app::LogKeySource::Hex(hex)),
            (None, Err(_)) => None,
        },
        rotate_log_key: args.rotate_log_key,
        adopt_fleet_schedule: args.adopt_fleet_schedule,
        deposits: None,
    })
}
