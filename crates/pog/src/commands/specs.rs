//! `pog specs`: the GPU model database pog judges against.

use crate::cli::Global;
use crate::output::{print_json, Outcome, Verdict};
use crate::render;
use anyhow::{bail, Result};
use pog_spec::SpecDb;
use serde::Serialize;

/// What `pog specs --json` reports: every model, or the one asked for.
#[derive(Serialize)]
struct SpecsReport<'a> {
    models: Vec<&'a pog_spec::GpuSpec>,
}

/// `pog specs [MODEL]`: the database as a table, or one model's full entry.
pub fn run(global: &Global, model: Option<&str>) -> Result<Outcome> {
    let db = SpecDb::embedded();
    let models: Vec<&pog_spec::GpuSpec> = match model {
        Some(name) => {
            let Some(spec) = db.by_model(name).or_else(|| db.by_name(name)) else {
                let known: Vec<&str> = db.all().iter().map(|g| g.model.as_str()).collect();
                bail!(
                    "no model {name:?} in the database; known models: {}",
                    known.join(", ")
                );
            };
            vec![spec]
        }
        None => db.all().iter().collect(),
    };
    if global.json {
        let summary = format!("{} model(s)", models.len());
        print_json(
            "specs",
            Verdict::Pass,
            &summary,
            false,
            &SpecsReport { models },
        )?;
    } else if let [spec] = models[..] {
        if model.is_some() {
            render::spec_detail(spec);
        } else {
            render::spec_list(db.all());
        }
    } else {
        render::spec_list(db.all());
    }
    Ok(Outcome(Verdict::Pass))
}
