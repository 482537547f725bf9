//! `pog specs`: the GPU model database pog judges against.

use super::{print_json, Outcome};
use crate::cli::Global;
use crate::render;
use anyhow::{bail, Result};
use pog_spec::SpecDb;

pub fn run(global: &Global, model: Option<&str>) -> Result<Outcome> {
    let db = SpecDb::embedded();
    match model {
        Some(name) => {
            let Some(spec) = db.by_model(name).or_else(|| db.by_name(name)) else {
                let known: Vec<&str> = db.all().iter().map(|g| g.model.as_str()).collect();
                bail!(
                    "no model {name:?} in the database; known models: {}",
                    known.join(", ")
                );
            };
            if global.json {
                print_json(spec)?;
            } else {
                render::spec_detail(spec);
            }
        }
        None if global.json => print_json(&db.all())?,
        None => render::spec_list(db.all()),
    }
    Ok(Outcome::Passed)
}
