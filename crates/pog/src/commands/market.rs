//! `pog score`, `pog price` and `pog market`: the Proof-of-GPU score of this host (or of a
//! saved `pog check --json` report), its price per GPU-hour, and the validator's order book
//! (`pog_market`, `pog_validator::market`; docs/market.md).

use crate::cli::market::{MarketAction, MarketArgs, PriceArgs, ReportArgs, ScoreArgs};
use crate::cli::Global;
use crate::host::{data_dir, platform};
use crate::output::{print_json, table, verdict_line, Bar, Outcome, Verdict, JSON_SCHEMA};
use crate::render::is_simulated;
use anyhow::{anyhow, bail, Context, Result};
use comfy_table::Table;
use pog_market::config::Config;
use pog_market::quote::{quote, MarketState, Quote};
use pog_market::report::{check_figures, spec_figures, CheckFigures};
use pog_market::score::{gpu_score, score, simulated, GpuScore, ProofStatus, Score};
use pog_market::{GpuClass, Order, OrderId, Price};
use pog_spec::SpecDb;
use pog_validator::client::MarketClient;
use pog_validator::market::PostedPrice;
use pog_validator::pricing::ScoreView;
use serde::Serialize;
use std::path::PathBuf;

fn config(args: &ReportArgs) -> Result<Config> {
    match &args.config {
        None => Ok(Config::embedded()),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            Config::parse(&text).with_context(|| format!("in {}", path.display()))
        }
    }
}

/// The host's figures: from the saved report, or a fresh `pog check`.
fn figures(global: &Global, args: &ReportArgs) -> Result<CheckFigures> {
    let report = match &args.report {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            serde_json::from_str(&text)
                .with_context(|| format!("{} is not JSON", path.display()))?
        }
        None => {
            let platform = platform(global, pog_sim::DEFAULT_HOST)?;
            let mut progress = Bar::new(global.json);
            let report = pog_local::check::run(platform.as_ref(), &mut progress)?;
            progress.finish();
            let simulated = is_simulated(&report.inspect.inventory.origin);
            let mut value =
                serde_json::to_value(&report).context("serializing the check report")?;
            // What `pog check --json`'s envelope adds, so both paths read alike.
            value["schema"] = format!("pog.check/{}", JSON_SCHEMA).into();
            value["simulated"] = simulated.into();
            value
        }
    };
    let read = check_figures(&report, SpecDb::embedded())?;
    Ok(read)
}

/// A host's score; a simulated host's is 0 in everything, with the reason SIMULATED.
fn host_score(read: &CheckFigures, config: &Config) -> Score {
    let s = score(&read.host, config);
    if read.simulated {
        simulated(s)
    } else {
        s
    }
}

/// What `pog score --json` reports after the envelope.
#[derive(Serialize)]
struct ScoreReport<'a> {
    #[serde(flatten)]
    score: &'a Score,
    notes: &'a [String],
}

/// The verdict of a score: fail when a GPU failed its proof or inspection, warn when a GPU
/// has no proof (nothing verified), pass when every GPU counts.
fn score_verdict(read: &CheckFigures) -> Verdict {
    let failed = read
        .host
        .gpus
        .iter()
        .any(|g| !g.genuine || matches!(g.proof, ProofStatus::Failed { .. }));
    if failed || read.host.gpus.is_empty() {
        Verdict::Fail
    } else if read
        .host
        .gpus
        .iter()
        .any(|g| !matches!(g.proof, ProofStatus::Accepted { proves_model: true }))
    {
        Verdict::Warn
    } else {
        Verdict::Pass
    }
}

fn gpu_rows(t: &mut Table, gpus: &[GpuScore]) {
    for g in gpus {
        t.add_row(vec![
            g.label.clone(),
            g.model.clone().unwrap_or_else(|| "-".into()),
            format!("{:.2}", g.tensor),
            format!("{:.2}", g.fp32),
            format!("{:.2}", g.memory),
            format!("{:.2}", g.bandwidth),
            format!("{:.2}", g.sustained),
            format!("{:.3}", g.score),
            format!("{:.3}", g.weight),
            g.zeroed.clone().unwrap_or_default(),
        ]);
    }
}

/// `pog score`: the Proof-of-GPU score of this host, or of a saved report.
pub fn score_run(global: &Global, args: &ScoreArgs) -> Result<Outcome> {
    let config = config(&args.source)?;
    let read = figures(global, &args.source)?;
    let s = host_score(&read, &config);
    let verdict = score_verdict(&read);
    let summary = format!(
        "score {:.3} (reference H200 host = 1): {} GPU(s) counted, reliability {:.2}",
        s.score, s.gpus_counted, s.reliability.factor
    );
    if global.json {
        print_json(
            "score",
            verdict,
            &summary,
            read.simulated,
            &ScoreReport {
                score: &s,
                notes: &read.notes,
            },
        )?;
        return Ok(Outcome(verdict));
    }
    if read.simulated {
        println!("SIMULATED host: nothing below is a measurement, and no GPU is verified");
    }
    let mut t = table([
        "GPU",
        "model",
        "tensor",
        "FP32",
        "memory",
        "bandwidth",
        "sustained",
        "score",
        "weight",
        "why 0",
    ]);
    gpu_rows(&mut t, &s.gpus);
    println!("{t}");
    let mut t = table(["part", "weight", "value", "weighted", "note"]);
    for (name, p) in [
        ("GPU", &s.parts.gpu),
        ("CPU", &s.parts.cpu),
        ("RAM", &s.parts.ram),
        ("storage", &s.parts.storage),
    ] {
        t.add_row(vec![
            name.to_string(),
            format!("{:.2}", p.weight),
            format!("{:.3}", p.value),
            format!("{:.3}", p.weighted),
            p.note.clone().unwrap_or_default(),
        ]);
    }
    t.add_row(vec![
        "reliability".to_string(),
        String::new(),
        format!("× {:.3}", s.reliability.factor),
        String::new(),
        s.reliability.notes.join("; "),
    ]);
    println!("{t}");
    for note in &read.notes {
        println!("note: {note}");
    }
    verdict_line(verdict, &summary, read.simulated);
    Ok(Outcome(verdict))
}

/// What `pog price --json` reports after the envelope.
#[derive(Serialize)]
struct PriceReport {
    /// What was priced: a GPU's label, or a model.
    subject: String,
    /// The model priced from the spec database (estimated), or measured on this host.
    source: &'static str,
    quote: Option<Quote>,
    /// Why there is no price, when there is none.
    unpriced: Option<String>,
}

/// `pog price`: the price per GPU-hour of this host's GPUs or of a model, or the prices a
/// validator posted.
pub fn price_run(global: &Global, args: &PriceArgs) -> Result<Outcome> {
    if let Some(url) = &args.validator {
        return validator_prices(global, url, args.gpu.as_deref());
    }
    let config = config(&args.source)?;
    let db = SpecDb::embedded();
    let state = MarketState {
        utilization: args.utilization.unwrap_or(config.price.target_utilization),
        demand_trend: args.demand_trend,
        clearing_pull: 0.0,
    };
    let (subject, source, gpu, reliability, memory_type, simulated, zeroed) = match &args.model {
        Some(name) => {
            let spec = db.by_model(name).ok_or_else(|| {
                anyhow!("no model {name:?} in the spec database (see `pog specs`)")
            })?;
            let g = gpu_score(&spec_figures(spec, &config, db)?, &config.score);
            (
                spec.model.clone(),
                "spec_database",
                g,
                1.0,
                spec.memory_type.clone(),
                false,
                None,
            )
        }
        None => {
            let read = figures(global, &args.source)?;
            let s = host_score(&read, &config);
            let Some(best) = s.best_gpu().cloned() else {
                bail!("the report has no GPU to price");
            };
            let memory_type = best
                .model
                .as_deref()
                .and_then(|m| db.by_model(m))
                .map(|spec| spec.memory_type.clone())
                .ok_or_else(|| anyhow!("GPU {} has no model in the spec database", best.label))?;
            let zeroed = best.zeroed.clone();
            (
                best.label.clone(),
                "measured",
                best,
                s.reliability.factor,
                memory_type,
                read.simulated,
                zeroed,
            )
        }
    };
    let class = config
        .class_for_memory(&memory_type)
        .ok_or_else(|| anyhow!("no price class lists memory type {memory_type:?}"))?
        .name
        .clone();
    let (quote, unpriced, verdict) = match zeroed {
        Some(why) => (None, Some(why), Verdict::Fail),
        None => (
            Some(quote(&gpu, &class, &state, reliability, &config)?),
            None,
            Verdict::Pass,
        ),
    };
    let summary = match (&quote, &unpriced) {
        (Some(q), _) => format!("{subject}: ${} per GPU-hour ({})", q.price, q.class),
        (None, Some(why)) => format!("{subject}: not priced: it counts 0 ({why})"),
        (None, None) => format!("{subject}: not priced"),
    };
    let report = PriceReport {
        subject,
        source,
        quote,
        unpriced,
    };
    if global.json {
        print_json("price", verdict, &summary, simulated, &report)?;
    } else if let Some(q) = &report.quote {
        let mut t = table(["", ""]);
        // "Verified" only where a validator measured it: a model's figures come from the spec
        // database (datasheets), a host's from its own check (measured here, self-reported).
        let tflops = match report.source {
            "spec_database" => "TFLOP/s (datasheet, spec database)",
            _ => "TFLOP/s (measured by this host's check, self-reported)",
        };
        for (k, v) in [
            ("priced", format!("{} ({})", report.subject, report.source)),
            ("class", q.class.clone()),
            ("GPU score (reference GPUs)", format!("{:.3}", q.gpu_score)),
            (tflops, format!("{:.1}", q.verified_tflops)),
            ("$ per TFLOP-hour", format!("{}", q.usd_per_tflop_hour)),
            ("base $/GPU-hour", format!("{:.4}", q.base_usd)),
            (
                "market factor",
                format!(
                    "×{:.3} (utilization factor ×{:.3}, demand factor ×{:.3}, clearing factor ×{:.3})",
                    q.market_factor, q.utilization_factor, q.demand_factor, q.clearing_factor
                ),
            ),
            ("reliability factor", format!("×{:.3}", q.reliability)),
            ("price per GPU-hour", format!("${}", q.price)),
        ] {
            t.add_row(vec![k.to_string(), v]);
        }
        println!("{t}");
        verdict_line(verdict, &summary, simulated);
    } else {
        verdict_line(verdict, &summary, simulated);
    }
    Ok(Outcome(verdict))
}

/// A signing key: the file given, else `default` in the data dir (made if missing).
fn key(global: &Global, explicit: &Option<PathBuf>, default: &str) -> Result<pog_signed::Identity> {
    let path = match explicit {
        Some(p) => p.clone(),
        None => data_dir(global)?.join(default),
    };
    pog_net::keys::load_or_create(&path).with_context(|| format!("the key {}", path.display()))
}

/// Orders as a table, in the order given, each with its expiry where known.
fn orders_table<'o>(orders: impl IntoIterator<Item = (&'o Order, Option<u64>)>) -> Table {
    let mut t = table([
        "id",
        "side",
        "class",
        "GPU-hours",
        "$/GPU-hour",
        "GPUs offered",
        "owner",
        "expires (UTC)",
    ]);
    for (o, expires_at_ms) in orders {
        let gpus = match o.gpus() {
            [] => "-".to_string(),
            [one] => one.to_string(),
            many => format!("{} ({} more)", many[0], many.len() - 1),
        };
        t.add_row(vec![
            o.id().to_string(),
            o.side().to_string(),
            o.class().to_string(),
            o.quantity().to_string(),
            format!("${}", o.price()),
            gpus,
            o.owner()[..16].to_string() + "…",
            expires_at_ms.map_or_else(|| "-".into(), pog_market::evidence::utc),
        ]);
    }
    t
}

/// `pog market …`: one request to the validator's API.
pub fn market_run(global: &Global, args: &MarketArgs) -> Result<Outcome> {
    let url = args
        .validator
        .clone()
        .ok_or_else(|| anyhow!("which validator? pass --validator URL (or set POG_VALIDATOR)"))?;
    let client = MarketClient::new(&url)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let name = args.action.name();
    let class = |c: &str| GpuClass::new(c).map_err(|e| anyhow!("--class {c:?}: {e}"));
    let (summary, value, human): (String, serde_json::Value, Option<Table>) = match &args.action {
        MarketAction::Submit {
            id,
            side,
            class: c,
            quantity,
            price,
            lifetime_hours,
            key: k,
            gpus,
            ssh_key,
            container,
        } => {
            let owner = key(global, k, "agent.key")?;
            let price: Price = price
                .parse()
                .map_err(|e| anyhow!("--price {price:?}: {e}"))?;
            let order = Order::new(
                match id {
                    Some(id) => {
                        OrderId::new(id.clone()).map_err(|e| anyhow!("--id {id:?}: {e}"))?
                    }
                    None => pog_validator::market::fresh_order_id(),
                },
                owner.public_key(),
                *side,
                class(c)?,
                *quantity,
                price,
            )
            .map_err(|e| anyhow!("the order: {e}"))?;
            let gpus = gpus
                .iter()
                .map(|g| g.parse().map_err(|e| anyhow!("--gpu {g:?}: {e}")))
                .collect::<Result<Vec<pog_signed::GpuUuid>>>()?;
            let access = match (ssh_key, container) {
                (Some(path), _) => {
                    let line = std::fs::read_to_string(path)
                        .with_context(|| format!("reading --ssh-key {}", path.display()))?;
                    Some(
                        pog_market::lease::Access::ssh(&line)
                            .map_err(|e| anyhow!("--ssh-key {}: {e}", path.display()))?,
                    )
                }
                (None, Some(image)) => Some(
                    pog_market::lease::Access::container(image)
                        .map_err(|e| anyhow!("--container {image:?}: {e}"))?,
                ),
                (None, None) => None,
            };
            let order = order
                .offering(gpus)
                .and_then(|o| o.granting(access))
                .map_err(|e| anyhow!("the order: {e}"))?;
            let lifetime = std::time::Duration::from_secs_f64(lifetime_hours * 3600.0);
            let done = rt.block_on(client.submit(&owner, order, lifetime))?;
            (
                format!("order {} submitted (sequence {})", done.id, done.sequence),
                serde_json::to_value(&done)?,
                None,
            )
        }
        MarketAction::Cancel { id, key: k } => {
            let owner = key(global, k, "agent.key")?;
            let id = OrderId::new(id.clone()).map_err(|e| anyhow!("--id {id:?}: {e}"))?;
            let done = rt.block_on(client.cancel(&owner, id))?;
            (
                format!(
                    "order {} cancelled ({} GPU-hours were open)",
                    done.order.id(),
                    done.order.quantity()
                ),
                serde_json::to_value(&done)?,
                Some(orders_table([(&done.order, None)])),
            )
        }
        MarketAction::Book { class: c } => {
            let c = c.as_deref().map(class).transpose()?;
            // By price: bids highest first, asks lowest first (the client sorts the whole book).
            let book = rt.block_on(client.book(c.as_ref()))?;
            let all = book
                .bids
                .iter()
                .chain(&book.asks)
                .map(|e| (&e.order, Some(e.expires_at_ms)));
            let table = orders_table(all);
            (
                format!(
                    "{} bid(s), {} ask(s) open",
                    book.bids.len(),
                    book.asks.len()
                ),
                serde_json::to_value(&book)?,
                Some(table),
            )
        }
        MarketAction::Clear {
            class: c,
            mechanism,
        } => {
            let operator = key(global, &None, "validator.key")?;
            let record = rt.block_on(client.clear(&operator, class(c)?, *mechanism))?;
            let price = record
                .clearing
                .buyer_price
                .map(|p| format!(" at ${p} per GPU-hour"))
                .unwrap_or_default();
            let mut t = table([
                "bid",
                "ask",
                "GPU-hours",
                "buyer pays $/GPU-hour",
                "seller gets $/GPU-hour",
            ]);
            // An id is its owner's: each side as id and the owner key's start.
            let named =
                |id: &OrderId, owner: &str| format!("{id} ({}…)", owner.get(..8).unwrap_or(owner));
            for trade in &record.clearing.trades {
                t.add_row(vec![
                    named(&trade.bid, &trade.bid_owner),
                    named(&trade.ask, &trade.ask_owner),
                    trade.quantity.to_string(),
                    format!("${}", trade.buyer_pays),
                    format!("${}", trade.seller_gets),
                ]);
            }
            (
                format!(
                    "clearing {} of {} ({}) at {}: {} GPU-hour(s) traded{price}",
                    record.number,
                    record.class,
                    record.clearing.mechanism,
                    pog_market::evidence::utc(record.at_ms),
                    record.clearing.units
                ),
                serde_json::to_value(&record)?,
                Some(t),
            )
        }
        MarketAction::History {
            after,
            gpu: Some(uuid),
            limit,
        } => {
            let page = rt.block_on(client.price_history(uuid, after.map(|a| a as i64), *limit))?;
            (
                format!("{} posted price(s) of {uuid}", page.points.len()),
                serde_json::to_value(&page)?,
                Some(price_table(&page.points)),
            )
        }
        MarketAction::History {
            after,
            gpu: None,
            limit,
        } => {
            let page = rt.block_on(client.history(*after, *limit))?;
            let mut t = table([
                "#",
                "cleared (UTC)",
                "class",
                "rule",
                "bids",
                "asks",
                "GPU-hours bid",
                "GPU-hours asked",
                "GPU-hours traded",
                "buyer pays $/GPU-hour",
                "seller gets $/GPU-hour",
            ]);
            for r in &page.clearings {
                let show =
                    |p: Option<Price>| p.map(|p| format!("${p}")).unwrap_or_else(|| "-".into());
                // A clearing replayed from a store older than clearing times has none.
                let when = match r.at_ms {
                    0 => "-".to_string(),
                    at => pog_market::evidence::utc(at),
                };
                t.add_row(vec![
                    r.number.to_string(),
                    when,
                    r.class.to_string(),
                    r.clearing.mechanism.to_string(),
                    r.bids.to_string(),
                    r.asks.to_string(),
                    r.bid_hours.to_string(),
                    r.ask_hours.to_string(),
                    r.clearing.units.to_string(),
                    show(r.clearing.buyer_price),
                    show(r.clearing.seller_price),
                ]);
            }
            (
                format!("{} clearing(s)", page.clearings.len()),
                serde_json::to_value(&page)?,
                Some(t),
            )
        }
        MarketAction::Leases {
            party,
            all,
            gpu,
            limit,
            key: k,
        } => {
            let party = match (party, all) {
                (Some(p), _) => Some(p.clone()),
                (None, true) => None,
                (None, false) => Some(key(global, k, "agent.key")?.public_key().to_string()),
            };
            let filter = pog_validator::market::LeaseFilter {
                party,
                gpu: gpu.clone(),
                id: None,
                limit: Some(*limit),
            };
            let trusted = [rt.block_on(client.info())?.validator];
            let page = rt.block_on(client.leases(&filter, &trusted))?;
            (
                format!("{} lease(s)", page.leases.len()),
                serde_json::to_value(&page)?,
                Some(leases_table(&page)),
            )
        }
        MarketAction::Lease { id } => {
            let filter = pog_validator::market::LeaseFilter {
                id: Some(id.clone()),
                limit: Some(1),
                ..Default::default()
            };
            let trusted = [rt.block_on(client.info())?.validator];
            let page = rt.block_on(client.leases(&filter, &trusted))?;
            let Some(lease) = page.leases.first() else {
                bail!("the validator has no lease {id:?}");
            };
            (
                format!(
                    "lease {id}: {} {} for {} GPU-hour(s), {}",
                    lease.class, lease.lease.gpu, lease.lease.hours, lease.state
                ),
                serde_json::to_value(lease)?,
                Some(leases_table(&page)),
            )
        }
        MarketAction::Settlements {
            party,
            lease,
            all,
            limit,
            key: k,
        } => {
            let party = match (party, all, lease) {
                (Some(p), _, _) => Some(p.clone()),
                (None, true, _) | (None, false, Some(_)) => None,
                (None, false, None) => Some(key(global, k, "agent.key")?.public_key().to_string()),
            };
            let filter = pog_validator::settlement::SettlementFilter {
                party,
                lease: lease.clone(),
                limit: Some(*limit),
            };
            let trusted = [rt.block_on(client.info())?.validator];
            let page = rt.block_on(client.settlements(&filter, &trusted))?;
            (
                format!("{} settlement(s)", page.settlements.len()),
                serde_json::to_value(&page)?,
                Some(settlements_table(&page)),
            )
        }
        MarketAction::Withdraw { amount, key: k } => {
            let owner = key(global, k, "agent.key")?;
            let amount = pog_market::Price::from_usd(*amount)
                .map_err(|e| anyhow!("--amount {amount}: {e}"))?
                .micro_usd();
            let voucher = rt.block_on(client.withdraw(&owner, amount))?;
            (
                format!(
                    "a voucher for {} of {}'s account (withdrawal {}), good until {}: submit it from the account's owner",
                    usd(Some(voucher.amount_micro_usd)),
                    voucher.renter,
                    voucher.nonce,
                    pog_market::evidence::utc(voucher.expires_at_s.saturating_mul(1000))
                ),
                serde_json::to_value(&voucher)?,
                None,
            )
        }
    };
    if global.json {
        print_json(name, Verdict::Pass, &summary, false, &value)?;
    } else {
        if let Some(t) = human {
            println!("{t}");
        }
        verdict_line(Verdict::Pass, &summary, false);
    }
    Ok(Outcome(Verdict::Pass))
}

fn usd(micro: Option<u64>) -> String {
    micro.map_or_else(
        || "-".into(),
        |m| {
            format!(
                "${}",
                Price::from_micro_usd(m).map_or_else(|_| m.to_string(), |p| p.to_string())
            )
        },
    )
}

/// Leases as a table, times in UTC.
fn leases_table(page: &pog_validator::market::LeasePage) -> Table {
    let mut t = table([
        "lease",
        "class",
        "GPU",
        "renter",
        "provider",
        "from (UTC)",
        "to (UTC)",
        "GPU-hours",
        "$/GPU-hour",
        "state",
    ]);
    let short = |key: &str| key.chars().take(16).collect::<String>();
    for v in &page.leases {
        let l = &v.lease;
        t.add_row(vec![
            l.id.clone(),
            v.class.to_string(),
            l.gpu.to_string(),
            short(&l.renter),
            short(&l.provider),
            pog_market::evidence::utc(l.start_ms),
            pog_market::evidence::utc(l.end_ms),
            l.hours.to_string(),
            usd(Some(l.price_micro_usd)),
            v.state.clone(),
        ]);
    }
    t
}

/// A GPU's posted prices as a table.
fn settlements_table(page: &pog_validator::settlement::SettlementPage) -> Table {
    let mut t = table([
        "lease",
        "period",
        "from (UTC)",
        "GPU-hours proven",
        "paid",
        "refunded",
        "state",
    ]);
    for kept in &page.settlements {
        let r = &kept.record;
        t.add_row(vec![
            r.lease_id.clone(),
            r.period.to_string(),
            pog_market::evidence::utc(r.from_ms),
            format!("{:.3} of {}", r.proven_hours_ppm as f64 / 1e6, r.hours),
            usd(Some(r.paid_micro_usd)),
            usd(Some(r.refunded_micro_usd)),
            serde_json::to_value(kept.state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
        ]);
    }
    t
}

fn price_table(points: &[PostedPrice]) -> Table {
    let mut t = table(["#", "when", "$/GPU-hour", "score", "cause", "why unpriced"]);
    for p in points {
        t.add_row(vec![
            p.seq.to_string(),
            pog_market::evidence::utc(p.at_ms),
            usd(p.price_micro_usd),
            format!("{:.3}", p.score),
            p.cause.clone(),
            p.unpriced.clone().unwrap_or_default(),
        ]);
    }
    t
}

/// What `pog price --validator URL --gpu UUID --json` reports after the envelope.
#[derive(Serialize)]
struct GpuPriceReport {
    score: ScoreView,
    history: pog_validator::pricing::PricePage,
}

/// `pog price --validator URL [--gpu UUID]`: what the validator scored and posted.
fn validator_prices(global: &Global, url: &str, gpu: Option<&str>) -> Result<Outcome> {
    let client = MarketClient::new(url)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let Some(uuid) = gpu else {
        let page = rt.block_on(client.scores(None, pog_validator::pricing::MAX_PAGE))?;
        let priced = page
            .scores
            .iter()
            .filter(|s| s.price_micro_usd.is_some())
            .count();
        let summary = format!(
            "{} GPU(s) scored by {url}, {priced} priced",
            page.scores.len()
        );
        let simulated = page.scores.iter().any(|s| s.simulated);
        if global.json {
            print_json("price", Verdict::Pass, &summary, simulated, &page)?;
        } else {
            let mut t = table(["GPU", "model", "score", "$/GPU-hour", "reasons"]);
            for s in &page.scores {
                t.add_row(vec![
                    s.gpu_uuid.to_string(),
                    s.model.clone().unwrap_or_else(|| "-".into()),
                    format!("{:.3}", s.score),
                    usd(s.price_micro_usd),
                    s.reasons.join("; "),
                ]);
            }
            println!("{t}");
            verdict_line(Verdict::Pass, &summary, simulated);
        }
        return Ok(Outcome(Verdict::Pass));
    };
    let score = rt.block_on(client.score(uuid))?;
    let history =
        rt.block_on(client.price_history(uuid, None, pog_validator::pricing::MAX_PAGE))?;
    let verdict = if score.price_micro_usd.is_some() {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    let summary = match score.price_micro_usd {
        Some(m) => format!(
            "{uuid}: {} per GPU-hour, score {:.3} ({} posted price(s))",
            usd(Some(m)),
            score.score,
            history.points.len()
        ),
        None => format!(
            "{uuid}: not priced, score {:.3}: {}",
            score.score,
            score
                .posted
                .as_ref()
                .and_then(|p| p.unpriced.clone())
                .unwrap_or_else(|| "no price posted yet".into())
        ),
    };
    let simulated = score.simulated;
    if global.json {
        print_json(
            "price",
            verdict,
            &summary,
            simulated,
            &GpuPriceReport { score, history },
        )?;
    } else {
        let mut t = table(["", ""]);
        t.add_row(vec!["GPU".to_string(), uuid.to_string()]);
        t.add_row(vec![
            "model".to_string(),
            score.model.clone().unwrap_or_else(|| "-".into()),
        ]);
        t.add_row(vec!["score".to_string(), format!("{:.3}", score.score)]);
        t.add_row(vec![
            "worth (reference GPUs, after reliability)".to_string(),
            format!("{:.3}", score.assessment.gpu_worth),
        ]);
        t.add_row(vec![
            "proofs passed (recent)".to_string(),
            format!(
                "{} of {}",
                score.assessment.proofs_passed, score.assessment.proofs_total
            ),
        ]);
        let m = &score.assessment.measured;
        let figure = |value: Option<f64>, unit: &str, pace: Option<f64>| match (value, pace) {
            (Some(v), Some(p)) => format!("{v:.1} {unit} (pace {p:.3} of its model)"),
            (Some(v), None) => format!("{v:.1} {unit}"),
            _ => "-".to_string(),
        };
        t.add_row(vec![
            "GEMM proof, measured by the validator".to_string(),
            figure(m.gemm_tflops, "TFLOP/s", m.compute_pace),
        ]);
        t.add_row(vec![
            "memory walk, measured by the validator".to_string(),
            figure(m.walk_gbs, "GB/s", m.memory_pace),
        ]);
        if let Some(signals) = score.posted.as_ref().and_then(|p| p.signals.as_ref()) {
            t.add_row(vec![
                format!("its class, last {} h", signals.window_hours),
                format!(
                    "{:.1} of {:.0} proven GPU-hours leased ({:.1} counted, {} renter(s)); {:.0} traded{}",
                    signals.leased_hours,
                    signals.available_hours,
                    signals.counted_hours,
                    signals.renters,
                    signals.traded_hours,
                    signals
                        .traded_vwap_micro_usd
                        .map(|v| format!(" at {} per GPU-hour", usd(Some(v))))
                        .unwrap_or_default()
                ),
            ]);
        }
        t.add_row(vec![
            "price per GPU-hour".to_string(),
            usd(score.price_micro_usd),
        ]);
        t.add_row(vec!["reasons".to_string(), score.reasons.join("\n")]);
        println!("{t}");
        println!("{}", price_table(&history.points));
        verdict_line(verdict, &summary, simulated);
    }
    Ok(Outcome(verdict))
}
