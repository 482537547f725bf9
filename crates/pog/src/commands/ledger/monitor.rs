//! `pog ledger monitor URL --log-key VKEY`: follows a log's checkpoint and tiles
//! ([`pog_ledger::monitor::Watch`]: every new checkpoint verified against the last one, kept
//! in `DATA_DIR/ledger-monitor/`, every new entry read) and alerts on a log line, a webhook
//! and `/metrics`. `--once` runs one pass and fails (exit 1) on any alert. With `--chain` and
//! `--contract`, each pass also checks the chain's latest anchor of the log: a size beyond the
//! log or a root its tree does not extend is an alert.

use crate::cli::ledger::MonitorLogArgs;
use crate::cli::Global;
use crate::host::data_dir;
use crate::output::{print_json, verdict_line, Outcome, Verdict};
use anyhow::{anyhow, bail, Context, Result};
use pog_ledger::monitor::{Alert, Pass, Policy, Watch};
use pog_ledger::note::ALG_ED25519;
use pog_monitor::webhook::Webhook;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long one pass may take to read the checkpoint and every tile it needs: a hostile log
/// chooses how many there are.
const PASS_BUDGET: Duration = Duration::from_secs(300);

/// What `/metrics` shows of the monitor.
#[derive(Default)]
struct Metrics {
    /// Alerts raised, by kind.
    alerts: Mutex<BTreeMap<&'static str, u64>>,
    /// The size verified last.
    size: AtomicU64,
    /// Passes run, and those that could not run.
    passes: AtomicU64,
    failed_passes: AtomicU64,
}

impl Metrics {
    /// The Prometheus text exposition (0.0.4).
    fn render(&self) -> String {
        let mut out = String::from(
            "# HELP pog_ledger_monitor_alerts_total Alerts raised, by kind.\n\
             # TYPE pog_ledger_monitor_alerts_total counter\n",
        );
        let alerts = self.alerts.lock().unwrap_or_else(|e| e.into_inner());
        for (kind, n) in alerts.iter() {
            out.push_str(&format!(
                "pog_ledger_monitor_alerts_total{{kind=\"{kind}\"}} {n}\n"
            ));
        }
        out.push_str(&format!(
            "# HELP pog_ledger_monitor_verified_size The log's tree size verified last.\n\
             # TYPE pog_ledger_monitor_verified_size gauge\n\
             pog_ledger_monitor_verified_size {}\n\
             # HELP pog_ledger_monitor_passes_total Passes run.\n\
             # TYPE pog_ledger_monitor_passes_total counter\n\
             pog_ledger_monitor_passes_total {}\n\
             # HELP pog_ledger_monitor_failed_passes_total Passes that could not read or check the log.\n\
             # TYPE pog_ledger_monitor_failed_passes_total counter\n\
             pog_ledger_monitor_failed_passes_total {}\n",
            self.size.load(Ordering::Relaxed),
            self.passes.load(Ordering::Relaxed),
            self.failed_passes.load(Ordering::Relaxed),
        ));
        out
    }
}

/// What `--json` reports.
#[derive(Serialize)]
struct Report {
    /// The log's URL prefix.
    url: String,
    /// The log's origin (its key's name).
    origin: String,
    /// The state file.
    state: String,
    /// Passes run.
    passes: u64,
    /// The size verified before the first pass and after the last.
    previous_size: u64,
    size: u64,
    /// Entries read over all passes.
    entries_read: u64,
    /// Every alert raised, in order.
    alerts: Vec<Alert>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// One pass over the log at `base`: its checkpoint and tiles read within [`PASS_BUDGET`]; then,
/// with `chain`, the chain's latest anchor of the log checked against the tree just verified.
fn pass(
    watch: &mut Watch,
    log: pog_ledger::bundle::LogKeys<'_>,
    base: &str,
    args: &MonitorLogArgs,
    chain: Option<(&tokio::runtime::Runtime, &pog_anchor::Registry)>,
) -> Result<Pass> {
    let mut tiles = pog_validator::ledger::HttpTiles::new(
        &format!("{base}/"),
        PASS_BUDGET,
        !args.allow_private,
    )?;
    let note = tiles.checkpoint()?;
    let policy = Policy {
        silent_after_ms: args.silent_after.saturating_mul(1000),
    };
    let mut done = watch.pass(log, (&note, &mut tiles), policy, now_ms())?;
    // Only over a checkpoint the pass verified (no alert about the log itself).
    let verified = !done.alerts.iter().any(|a| {
        matches!(
            a,
            Alert::Fork { .. }
                | Alert::Rollback { .. }
                | Alert::BadSignature { .. }
                | Alert::TilesDiffer { .. }
        )
    });
    if let (Some((rt, registry)), true) = (chain, verified) {
        let checkpoint = pog_ledger::checkpoint::SignedCheckpoint::parse(&note)?.checkpoint;
        done.alerts
            .extend(anchor_alerts(rt, registry, &checkpoint, &mut tiles)?);
    }
    Ok(done)
}

/// What the chain's latest anchor of `checkpoint`'s origin says against the log's tree: none
/// when it is a tree the log has (at most its size, extended by the checkpoint: a consistency
/// proof read from the tiles, which binds both roots whatever the tiles' server does).
fn anchor_alerts(
    rt: &tokio::runtime::Runtime,
    registry: &pog_anchor::Registry,
    checkpoint: &pog_ledger::checkpoint::Checkpoint,
    tiles: &mut pog_validator::ledger::HttpTiles,
) -> Result<Vec<Alert>> {
    let Some(latest) = rt
        .block_on(registry.latest(&checkpoint.origin))
        .context("reading the chain's latest anchor")?
    else {
        return Ok(Vec::new());
    };
    let size = checkpoint.size;
    if latest.size > size {
        return Ok(vec![Alert::AnchorBeyondLog {
            anchored_size: latest.size,
            size,
        }]);
    }
    let extends = if latest.size == size {
        latest.root == checkpoint.root
    } else {
        let proof = pog_ledger::tiles::TiledTree::new(tiles, size)
            .consistency_proof(latest.size)
            .context("reading a consistency proof from the log's tiles")?;
        pog_merkle::verify_consistency(latest.size, size, &latest.root, &checkpoint.root, &proof)
    };
    Ok(if extends {
        Vec::new()
    } else {
        vec![Alert::AnchorNotInLog {
            anchored_size: latest.size,
            anchored_root: hex::encode(latest.root),
            size,
        }]
    })
}

/// `pog ledger monitor`.
pub fn monitor_command(global: &Global, args: &MonitorLogArgs) -> Result<Outcome> {
    let log = super::vkey(&args.log_key, "log key")?;
    let validators = super::validator_keys(&args.validator_keys)?;
    if log.alg() != ALG_ED25519 {
        bail!(
            "log key {} is not an Ed25519 note key (type 0x01)",
            log.name()
        );
    }
    // The URL is the operator's; one inside the network needs --allow-private (a name is
    // checked again at every connection).
    let base = pog_net::endpoint::validate(&args.url, args.allow_private)
        .map_err(|e| anyhow!("{e}; give --allow-private to monitor a log inside your network"))?;
    let webhook_url = match &args.webhook {
        Some(url) => Some(Webhook::parse_url(url).map_err(|e| anyhow!("--webhook {e}"))?),
        None => None,
    };
    let state_dir = match &args.state_dir {
        Some(dir) => dir.clone(),
        None => data_dir(global)?.join("ledger-monitor"),
    };
    let mut watch = Watch::load(&state_dir, &log)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("pog-ledger-monitor")
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let stop = Arc::new(AtomicBool::new(false));
    let (wake, mut woken) = tokio::sync::watch::channel(());
    {
        let _runtime = rt.enter();
        let signal = pog_net::serve::stop_signal().context("installing the signal handlers")?;
        let stop = stop.clone();
        rt.spawn(async move {
            signal.await;
            stop.store(true, Ordering::Relaxed);
            let _ = wake.send(());
        });
    }
    let metrics = Arc::new(Metrics::default());
    if let Some(listen) = &args.listen {
        let listener = rt
            .block_on(tokio::net::TcpListener::bind(listen))
            .with_context(|| format!("cannot listen on {listen}"))?;
        let local = listener
            .local_addr()
            .context("the metrics listener's address")?;
        let served = metrics.clone();
        let router = axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || {
                let text = served.render();
                async move {
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8",
                        )],
                        text,
                    )
                }
            }),
        );
        let stopped = stop.clone();
        rt.spawn(pog_net::serve::serve(
            listener,
            router,
            pog_net::serve::Limits::small_requests(),
            async move {
                while !stopped.load(Ordering::Relaxed) {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Duration::from_secs(2),
        ));
        eprintln!("pog ledger monitor: serving metrics at http://{local}/metrics");
    }
    let webhook = match webhook_url {
        Some(url) => Some(Webhook::start(url, rt.handle().clone())?),
        None => None,
    };
    let origin = log.name().to_string();
    let mut report = Report {
        url: base.clone(),
        origin: origin.clone(),
        state: Watch::path(&state_dir, &log).display().to_string(),
        passes: 0,
        previous_size: 0,
        size: 0,
        entries_read: 0,
        alerts: Vec::new(),
    };
    let registry = match (&args.chain, &args.contract) {
        (Some(rpc), Some(contract)) => {
            Some(crate::chain::ChainTarget::new(rpc, contract, None)?.registry)
        }
        _ => None,
    };
    loop {
        let started = watch.checkpoint.is_some();
        let keys = pog_ledger::bundle::LogKeys {
            log: &log,
            validators: &validators,
        };
        let result = pass(
            &mut watch,
            keys,
            &base,
            args,
            registry.as_ref().map(|r| (&rt, r)),
        );
        metrics.passes.fetch_add(1, Ordering::Relaxed);
        match result {
            Ok(done) => {
                if report.passes == 0 {
                    report.previous_size = done.previous_size;
                }
                report.passes += 1;
                report.size = done.size;
                report.entries_read += done.entries_read;
                metrics.size.store(done.size, Ordering::Relaxed);
                tracing::info!(log = %origin, size = done.size, entries = done.entries_read, started, "ledger monitor pass");
                for alert in &done.alerts {
                    tracing::error!(log = %origin, kind = alert.kind(), "{alert}");
                    *metrics
                        .alerts
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .entry(alert.kind())
                        .or_default() += 1;
                    if let Some(w) = &webhook {
                        let mut value = serde_json::to_value(alert).unwrap_or_default();
                        if let Some(map) = value.as_object_mut() {
                            map.insert("log".into(), origin.clone().into());
                            map.insert("message".into(), alert.to_string().into());
                        }
                        w.send(value);
                    }
                }
                report.alerts.extend(done.alerts);
                watch.save(&state_dir, &log)?;
            }
            Err(e) if args.once => return Err(e),
            Err(e) => {
                metrics.failed_passes.fetch_add(1, Ordering::Relaxed);
                tracing::error!(log = %origin, "ledger monitor pass failed: {e:#}");
            }
        }
        if args.once || stop.load(Ordering::Relaxed) {
            break;
        }
        rt.block_on(async {
            let _ = tokio::time::timeout(args.every, woken.changed()).await;
        });
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    if let Some(w) = webhook {
        w.drain(pog_monitor::webhook::DRAIN);
    }
    let verdict = if report.alerts.is_empty() {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    let summary = format!(
        "{} alert(s) on {origin} in {} pass(es); verified size {} (was {}), {} entries read",
        report.alerts.len(),
        report.passes,
        report.size,
        report.previous_size,
        report.entries_read
    );
    if global.json {
        print_json("ledger.monitor", verdict, &summary, false, &report)?;
    } else {
        for alert in &report.alerts {
            println!("ALERT {}: {alert}", alert.kind());
        }
        verdict_line(verdict, &summary, false);
    }
    Ok(Outcome(verdict))
}
