//! One GPU, one identity: the same UUID or serial on two GPUs means one device is being
//! counted twice (or identities are forged).

use super::Context;
use crate::finding::{Finding, Severity};
use std::collections::BTreeMap;

/// Two GPUs report the same UUID (NVML or CUDA).
pub const UUID: &str = "unique.uuid";
/// Two GPUs report the same serial number (placeholders such as `0` ignored).
pub const SERIAL: &str = "unique.serial";

/// Serial values boards report when they have none.
const PLACEHOLDER_SERIALS: [&str; 4] = ["", "0", "N/A", "0000000000000"];

/// Adds a finding for every UUID or serial that more than one GPU reports.
pub fn check(ctx: &Context, out: &mut Vec<Finding>) {
    let mut uuids: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut serials: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for view in &ctx.views {
        let at = view
            .bus_id
            .map_or("unknown bus id".to_string(), |b| b.to_string());
        // Every source's UUID counts: a GPU listed twice by CUDA alone is still listed twice.
        let mut own: Vec<&str> = Vec::new();
        own.extend(view.nvml.and_then(|g| g.uuid.value()).map(String::as_str));
        own.extend(view.cuda.and_then(|c| c.uuid.value()).map(String::as_str));
        own.sort();
        own.dedup();
        for uuid in own {
            uuids.entry(uuid).or_default().push(at.clone());
        }
        if let Some(serial) = view.nvml.and_then(|g| g.serial.value()) {
            if !PLACEHOLDER_SERIALS.contains(&serial.trim()) {
                serials.entry(serial.as_str()).or_default().push(at.clone());
            }
        }
    }
    for (rule, what, map) in [(UUID, "UUID", uuids), (SERIAL, "serial number", serials)] {
        for (value, places) in map.into_iter().filter(|(_, p)| p.len() > 1) {
            out.push(
                Finding::new(
                    rule,
                    Severity::Fail,
                    None,
                    format!("{} GPUs report the same {what}", places.len()),
                )
                .with(what, value)
                .with("GPUs", places.join(", ")),
            );
        }
    }
}
