//! `pog verify --validator URL --gpu UUID`: a token holder's verification with nothing but the
//! validator's address and the keys. The GPU's history comes page by page from the validator's
//! `GET /v1/bundles/{uuid}`; each page must continue the one before (its records the GPU's
//! next, its checkpoint consistent with the last: `verify_bundle_from`); and what was verified
//! is kept in `DATA_DIR/verify/`, so the next run fetches and checks only what is new and
//! notices a rollback or a fork of the log between runs (as Go's sumdb client does with its
//! cache). The log's tail is read from the same validator's `/ledger/` afterwards.

use crate::cli::Global;
use crate::host::data_dir;
use anyhow::{bail, Context, Result};
use pog_ledger::bundle::{
    verify_bundle_from, Bundle, BundleReport, ChainLink, ChainState, LogKeys, WitnessPolicy,
};
use pog_ledger::checkpoint::SignedCheckpoint;
use pog_validator::ledger::HttpTiles;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::time::Duration;

/// The state file's format and version.
const STATE_FORMAT: &str = "pog-verify-state/v1";
/// The most bytes of one page (the validator's pages hold at most 1000 records of about 3 KB).
const MAX_PAGE_BYTES: usize = 16 << 20;
/// The most bytes of a state file read back.
const MAX_STATE_BYTES: usize = 1 << 20;

/// What a holder keeps of one GPU's history between runs.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct State {
    format: String,
    /// The log (its key's name) and the GPU this state is of.
    log: String,
    gpu_uuid: String,
    /// The checkpoint the history was last verified at (note text, with its cosignatures).
    checkpoint: String,
    /// Where the GPU's chain of records stood.
    chain: ChainState,
    /// Records verified over all runs.
    records: u64,
}

/// What a fetch did besides its bundle and report.
pub struct Fetched {
    /// The GPU's last record verified, in this run or before it: the log's tail is read from
    /// after it.
    pub known: Option<ChainLink>,
    /// Pages fetched.
    pub pages: usize,
    /// Records verified in earlier runs.
    pub before: u64,
    /// Where the state is kept.
    pub state_path: PathBuf,
}

/// Where the state of `uuid` in the log named `log` is kept: a file named by a hash of both,
/// so no name the validator or the holder chose becomes a path.
fn state_path(global: &Global, log: &str, uuid: &str) -> Result<PathBuf> {
    let key = Sha256::digest(format!("{log}\n{uuid}").as_bytes());
    Ok(data_dir(global)?
        .join("verify")
        .join(format!("{}.json", hex::encode(&key[..16]))))
}

/// Fetches and verifies what is new of GPU `uuid`'s history from the validator at `url`: the
/// last page's checkpoint as a bundle without records (each page's records are verified as it
/// comes and not kept, so a long history costs the holder one page of memory), with the log's
/// `/ledger/` as `log`; every page's report in one (their records and problems, the last
/// page's checkpoint and chain); and what the fetch did.
pub fn fetch(
    global: &Global,
    url: &str,
    uuid: &str,
    log_keys: LogKeys<'_>,
    witnesses: &WitnessPolicy,
    timeout: Duration,
) -> Result<(Bundle, BundleReport, Fetched)> {
    let log_key = log_keys.log;
    let base = url.trim_end_matches('/');
    let state_path = state_path(global, log_key.name(), uuid)?;
    let state = read_state(&state_path, log_key.name(), uuid)?;
    let mut held: Option<SignedCheckpoint> = match &state {
        Some(s) => Some(
            SignedCheckpoint::parse(s.checkpoint.as_bytes())
                .with_context(|| format!("the checkpoint kept in {}", state_path.display()))?,
        ),
        None => None,
    };
    let mut chain = state.as_ref().map(|s| s.chain.clone());
    let before = state.as_ref().map_or(0, |s| s.records);
    let mut pages = HttpTiles::new(&format!("{base}/v1/bundles/"), timeout, false)?;
    let mut reports = Vec::new();
    let mut problems = Vec::new();
    let mut count = 0usize;
    let (page, report) = loop {
        let after = chain.as_ref().and_then(|c| c.last).map(|l| l.index);
        let mut query = format!("{}?limit=1000", pog_validator::client::path_segment(uuid));
        if let Some(a) = after {
            query.push_str(&format!("&after={a}"));
        }
        if let Some(h) = &held {
            query.push_str(&format!("&since={}", h.checkpoint.size));
        }
        let bytes = pages.fetch(&query, MAX_PAGE_BYTES)?;
        let page =
            Bundle::parse(&bytes).with_context(|| format!("the page {base}/v1/bundles/{query}"))?;
        if page.gpu_uuid != uuid {
            bail!(
                "the validator answered with a bundle of {:?} for {uuid:?}",
                page.gpu_uuid
            );
        }
        count += 1;
        let report = verify_bundle_from(&page, log_keys, witnesses, held.as_ref(), chain.as_ref());
        let offset = reports.len();
        reports.extend(report.records.iter().cloned().map(|mut r| {
            r.position += offset;
            r
        }));
        problems.extend(report.problems.iter().cloned());
        let more = page.next_after;
        let done = !report.ok() || more.is_none();
        if !done && more <= after {
            bail!(
                "the validator's pages do not advance (next after {more:?}, asked after {after:?})"
            );
        }
        if done {
            break (page, report);
        }
        held = Some(page.checkpoint.clone());
        chain = Some(report.chain.clone());
    };
    let bundle = Bundle {
        records: Vec::new(),
        consistency: None,
        log: Some(format!("{base}/ledger/")),
        next_after: None,
        ..page
    };
    let report = BundleReport {
        records: reports,
        problems,
        ..report
    };
    let fetched = Fetched {
        known: report.chain.last,
        pages: count,
        before,
        state_path,
    };
    Ok((bundle, report, fetched))
}

/// Keeps what a run verified: `report` (of `bundle`, fetched with `fetched`) with no problem.
pub fn save(fetched: &Fetched, bundle: &Bundle, report: &BundleReport, log: &str) -> Result<()> {
    let state = State {
        format: STATE_FORMAT.into(),
        log: log.into(),
        gpu_uuid: bundle.gpu_uuid.clone(),
        checkpoint: bundle.checkpoint.to_text(),
        chain: report.chain.clone(),
        records: fetched.before + report.records.len() as u64,
    };
    let dir = fetched.state_path.parent().expect("a file in verify/");
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let temp = fetched.state_path.with_extension("json.tmp");
    let json = serde_json::to_string_pretty(&state).expect("plain data serializes");
    std::fs::write(&temp, json).with_context(|| format!("writing {}", temp.display()))?;
    std::fs::rename(&temp, &fetched.state_path)
        .with_context(|| format!("replacing {}", fetched.state_path.display()))
}

/// The state kept for `uuid` of log `log`, if any.
fn read_state(path: &std::path::Path, log: &str, uuid: &str) -> Result<Option<State>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    if bytes.len() > MAX_STATE_BYTES {
        bail!(
            "{} is over {MAX_STATE_BYTES} bytes: not a state pog wrote",
            path.display()
        );
    }
    let state: State = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not a verify state", path.display()))?;
    if state.format != STATE_FORMAT || state.log != log || state.gpu_uuid != uuid {
        bail!(
            "{} is not the state of {uuid} in {log} (format {:?}, log {:?}, GPU {:?}); remove it to start over",
            path.display(),
            state.format,
            state.log,
            state.gpu_uuid
        );
    }
    Ok(Some(state))
}
