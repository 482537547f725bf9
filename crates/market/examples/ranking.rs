//! Scores and prices every model of the spec database with the default configuration, beside
//! SN27's table: what docs/market.md's ranking is made from.
//!
//! `cargo run -p pog-market --example ranking`
//!
//! Every model but the reference is estimated from the spec database (its datasheet scaled by
//! what pog measured of the reference card's own datasheet): marked "spec db".

use pog_market::config::Config;
use pog_market::quote::{quote, MarketState};
use pog_market::report::spec_figures;
use pog_market::score::{gpu_score, score, HostFigures, ReliabilityFigures};
use pog_spec::SpecDb;

/// SN27's hard-coded GPU scores (per GPU, × the GPU count up to 8), as issue 15 quotes them.
const SN27: [(&str, f64); 5] = [
    ("B200", 5.0),
    ("H200 SXM", 4.0),
    ("H100 SXM", 3.3),
    ("A100 SXM 80GB", 1.9),
    ("RTX 4090", 0.68),
];

fn main() {
    let config = Config::embedded();
    let db = SpecDb::embedded();
    let mut rows = Vec::new();
    for spec in db.all() {
        let Ok(figures) = spec_figures(spec, &config, db) else {
            continue;
        };
        let g = gpu_score(&figures, &config.score);
        let class = config
            .class_for_memory(&spec.memory_type)
            .map(|c| c.name.clone())
            .unwrap_or_else(|| "-".into());
        let price = quote(&g, &class, &MarketState::balanced(&config), 1.0, &config)
            .map(|q| format!("{:.2}", q.price.micro_usd() as f64 / 1e6))
            .unwrap_or_else(|_| "-".into());
        // Eight of the model in a host with 8× the reference CPU, RAM and storage.
        let eight = score(
            &HostFigures {
                gpus: vec![figures.clone(); 8],
                cpu: None,
                ram: None,
                storage: None,
                reliability: ReliabilityFigures {
                    proofs_passed: 1,
                    proofs_total: 1,
                    uptime: Some(1.0),
                    anomalies: Some(0),
                    ..ReliabilityFigures::default()
                },
            },
            &config,
        );
        rows.push((spec.model.clone(), g, class, price, eight.parts.gpu.value));
    }
    rows.sort_by(|a, b| b.1.score.total_cmp(&a.1.score));
    println!(
        "| model | source | tensor | FP32 | memory | bandwidth | sustained | GPU score | × H200 | 8 GPUs (GPU part) | SN27 | SN27 × H200 | class | $/GPU-h (balanced) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let h200 = rows
        .iter()
        .find(|r| r.0 == config.score.gpu.reference_model)
        .map(|r| r.1.score)
        .unwrap_or(1.0);
    for (model, g, class, price, eight) in &rows {
        let sn27 = SN27.iter().find(|(m, _)| m == model).map(|(_, s)| *s);
        let source = if *model == config.score.gpu.reference_model {
            "measured"
        } else {
            "spec db"
        };
        println!(
            "| {model} | {source} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.3} | {:.2} | {:.2} | {} | {} | {class} | {price} |",
            g.tensor,
            g.fp32,
            g.memory,
            g.bandwidth,
            g.sustained,
            g.score,
            g.score / h200,
            eight,
            sn27.map(|s| format!("{s}")).unwrap_or_else(|| "-".into()),
            sn27.map(|s| format!("{:.2}", s / 4.0)).unwrap_or_else(|| "-".into()),
        );
    }
}
