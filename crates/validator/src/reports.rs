//! The validator's side of the agents' signed reports (the ledger's kinds 2 and 3, made by
//! `pog_agent::reports`): it takes them at `POST /v1/reports` ([`ReportDesk::accept`]):
//! only from the agent key the GPU is registered to, of one of the two kinds, with a body that
//! parses strictly and holds sane values, at most [`MAX_REPORT_BYTES`]; a report whose
//! content it holds already (the same signer, kind and body, whatever its `recorded_at_ms` or
//! spelling: [`content_id`]) is answered again without a second record; new records are
//! charged their bytes to an hourly budget of their GPU's and one of their source address's,
//! so that what the log takes grows with registered GPUs, not with keys (which are free).
//! Each is stored as it was signed (the agent's signature, never the validator's), the
//! ledger first, then the registry.

use crate::registry::RegistryError;
use crate::store::{RecordStore, StoreError};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use pog_ledger::entry::{signed_bytes, Entry, EntryError};
use pog_net::http::ApiError;
use pog_net::locked::Locked;
use pog_records::reports::{
    BadValue, BenchmarkFigures, InspectionSummary, ReportReceipt, MAX_REPORT_BYTES,
};
use pog_signed::{Envelope, GpuUuid, PublicKey, RecordKind, WireError};
use serde::Serialize;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The least a new report is charged of its budgets, however small: a budget then bounds how
/// many records it buys (64 an hour per GPU at the default), not only their bytes.
pub const MIN_REPORT_CHARGE: usize = 1 << 10;

/// KiB of new reports each registered GPU may add per hour by default (a burst of that much,
/// refilled evenly). An agent's start costs each of its GPUs about 7.5 KiB (two records of
/// 16 KiB at most), and a restart that finds the same content costs nothing: eight starts
/// with new content an hour fit. At most 64 KiB × 25 = 1,600 KiB in any 24 hours per GPU.
pub const DEFAULT_REPORT_KIB_PER_GPU_PER_HOUR: u32 = 64;

/// KiB of new reports all the GPUs reported from one source address may add per hour by
/// default: about a thousand GPUs behind one address starting in the same hour (8 MiB).
pub const DEFAULT_REPORT_KIB_PER_SOURCE_PER_HOUR: u32 = 8 << 10;

/// Why a report was refused. Each maps to an HTTP status ([`ReportError::status`]).
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The body is larger than [`MAX_REPORT_BYTES`] (its size in bytes).
    #[error("a report may be at most {MAX_REPORT_BYTES} bytes; this one is {0}")]
    TooLarge(usize),
    /// The body does not decode as an envelope.
    #[error("not a signed envelope: {0}")]
    Envelope(serde_json::Error),
    /// The envelope's kind is neither `inspection` nor `benchmark`.
    #[error("kind {0:?} is not a report: POST /v1/reports takes \"inspection\" and \"benchmark\" envelopes")]
    Kind(String),
    /// The envelope fails the wire checks (its signature, size or encoding).
    #[error(transparent)]
    Wire(WireError),
    /// A field of the body is out of bounds or malformed.
    #[error(transparent)]
    Invalid(BadValue),
    /// The GPU the report is about is not registered here.
    #[error("GPU {0} is not registered with this validator")]
    UnknownGpu(GpuUuid),
    /// The report is signed by another agent than the GPU's owner.
    #[error("GPU {uuid} is registered to agent {owner}, not to the report's signer {signer}")]
    NotOwner {
        /// The GPU.
        uuid: GpuUuid,
        /// The agent it is registered to.
        owner: PublicKey,
        /// The report's signer.
        signer: PublicKey,
    },
    /// The GPU has used its hourly budget of new reports.
    #[error("GPU {uuid} has used its budget of {kib_per_hour} KiB of new reports an hour; this one (charged {charge} bytes) fits in {retry_after_s} s: retry then")]
    GpuBudget {
        /// The GPU.
        uuid: GpuUuid,
        /// Its budget, KiB of new reports an hour.
        kib_per_hour: u64,
        /// What this report is charged, bytes.
        charge: usize,
        /// Seconds until the budget has room for it.
        retry_after_s: u64,
    },
    /// The GPUs reported from one address have used its hourly budget of new reports.
    #[error("the GPUs reported from {address} have used its budget of {kib_per_hour} KiB of new reports an hour; this one (charged {charge} bytes) fits in {retry_after_s} s: retry then")]
    SourceBudget {
        /// The source address reports came from.
        address: String,
        /// Its budget, KiB of new reports an hour.
        kib_per_hour: u64,
        /// What this report is charged, bytes.
        charge: usize,
        /// Seconds until the budget has room for it.
        retry_after_s: u64,
    },
    /// The budget table is full of budgets used within the hour: no new one can be tracked.
    #[error("the validator tracks the report budgets of {MAX_TRACKED} GPUs or addresses already, none unused for an hour: retry in {CROWDED_RETRY_S} s")]
    Crowded,
    /// Another request is recording the same report now.
    #[error("the same report is being recorded by another request")]
    InFlight,
    /// The report cannot be a ledger entry (too large for one, for instance).
    #[error("the report cannot be a ledger entry: {0}")]
    Entry(EntryError),
    /// The validator's store failed.
    #[error("storing the report failed: {0}")]
    Store(#[from] StoreError),
}

impl ReportError {
    /// The HTTP status that answers it.
    pub fn status(&self) -> StatusCode {
        match self {
            ReportError::TooLarge(_) | ReportError::Entry(EntryError::TooLarge(_)) => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            ReportError::Wire(WireError::Signature(_)) | ReportError::NotOwner { .. } => {
                StatusCode::FORBIDDEN
            }
            ReportError::Wire(WireError::TooLarge(_)) => StatusCode::PAYLOAD_TOO_LARGE,
            ReportError::UnknownGpu(_) => StatusCode::NOT_FOUND,
            ReportError::GpuBudget { .. } | ReportError::SourceBudget { .. } => {
                StatusCode::TOO_MANY_REQUESTS
            }
            ReportError::Crowded => StatusCode::SERVICE_UNAVAILABLE,
            ReportError::InFlight => StatusCode::CONFLICT,
            ReportError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ReportError::Envelope(_)
            | ReportError::Kind(_)
            | ReportError::Wire(_)
            | ReportError::Invalid(_)
            | ReportError::Entry(_) => StatusCode::BAD_REQUEST,
        }
    }

    /// Seconds after which the same report may be taken (the `Retry-After` header), for a
    /// refusal that time undoes.
    pub fn retry_after_s(&self) -> Option<u64> {
        match self {
            ReportError::GpuBudget { retry_after_s, .. }
            | ReportError::SourceBudget { retry_after_s, .. } => Some(*retry_after_s),
            ReportError::Crowded => Some(CROWDED_RETRY_S),
            _ => None,
        }
    }
}

impl From<ReportError> for ApiError {
    fn from(e: ReportError) -> Self {
        ApiError::new(e.status(), e.to_string())
    }
}

/// A report that passed every check before the store: its envelope, signer, GPU, id and what
/// it is charged.
#[derive(Debug, Clone)]
pub struct CheckedReport {
    /// The signed envelope as received.
    pub envelope: Envelope,
    /// `inspection` or `benchmark`.
    pub kind: &'static str,
    /// The signer.
    pub signer: PublicKey,
    /// The GPU it is about.
    pub gpu_uuid: GpuUuid,
    /// `report-<hex content hash>` ([`content_id`]).
    pub id: String,
    /// What it costs of its GPU's and its source's hourly budgets: its bytes as received, at
    /// least [`MIN_REPORT_CHARGE`]. Never less than what the ledger takes for it (its entry,
    /// 64 bytes of hashes and 8 of index: [`LEDGER_OVERHEAD_BYTES`] more than the envelope at
    /// most).
    pub charge: usize,
}

/// What the ledger takes for an entry beyond its bytes: its leaf's and completed subtrees'
/// hashes (64 bytes an entry) and its index record (8). An entry (115 bytes of framing, the
/// UUID, the body) is never longer than the envelope it came in (at least 249 bytes around the
/// body), so a report takes at most its envelope and this much of the ledger's disk.
pub const LEDGER_OVERHEAD_BYTES: usize = 72;

/// A report's id: `report-` and the hex SHA-256 of 0x00 ‖ signer ‖ the signed bytes of its
/// kind and of its body as this validator encodes it with `recorded_at_ms` 0. Its content,
/// then: the same findings or figures sent again at another time (an agent restarting), or
/// with other whitespace, key order or number spelling, have the same id and are stored once.
pub fn content_id(signer: &[u8; 32], kind: RecordKind, timeless_body: &str) -> String {
    let mut content = signer.to_vec();
    content.extend_from_slice(&signed_bytes(kind, timeless_body));
    format!("report-{}", hex::encode(pog_merkle::leaf_hash(&content)))
}

/// A body's JSON as this validator encodes it (field order of the schema, no whitespace): the
/// canonical spelling [`content_id`] hashes.
fn canonical<T: Serialize>(body: &T) -> Result<String, ReportError> {
    serde_json::to_string(body).map_err(|e| ReportError::Wire(WireError::Encode(e)))
}

/// Checks a report's bytes as they arrive, before anything is stored: its size, the envelope,
/// its kind, the agent's signature (strict, weak keys refused), the body (parsed with unknown
/// fields refused, then its values), that `owner_of` (the registry) gives the GPU to the
/// signer, and that it makes a valid ledger entry; and names its content ([`content_id`]).
/// `now_ms` is the validator's clock.
pub fn check_report(
    bytes: &[u8],
    now_ms: u64,
    owner_of: impl FnOnce(&str) -> Result<Option<PublicKey>, RegistryError>,
) -> Result<CheckedReport, ReportError> {
    if bytes.len() > MAX_REPORT_BYTES {
        return Err(ReportError::TooLarge(bytes.len()));
    }
    let envelope: Envelope = serde_json::from_slice(bytes).map_err(ReportError::Envelope)?;
    let (kind, gpu_uuid, signer, timeless) = match RecordKind::from_wire_kind(&envelope.kind) {
        Some(RecordKind::Inspection) => {
            let (mut s, signer): (InspectionSummary, PublicKey) =
                pog_signed::decode(bytes, RecordKind::Inspection.wire_kind())
                    .map_err(ReportError::Wire)?;
            s.check(now_ms).map_err(ReportError::Invalid)?;
            s.recorded_at_ms = 0;
            let timeless = canonical(&s)?;
            (
                RecordKind::Inspection.wire_kind(),
                s.gpu_uuid,
                signer,
                timeless,
            )
        }
        Some(RecordKind::Benchmark) => {
            let (mut b, signer): (BenchmarkFigures, PublicKey) =
                pog_signed::decode(bytes, RecordKind::Benchmark.wire_kind())
                    .map_err(ReportError::Wire)?;
            b.check(now_ms).map_err(ReportError::Invalid)?;
            b.recorded_at_ms = 0;
            let timeless = canonical(&b)?;
            (
                RecordKind::Benchmark.wire_kind(),
                b.gpu_uuid,
                signer,
                timeless,
            )
        }
        _ => return Err(ReportError::Kind(envelope.kind.chars().take(64).collect())),
    };
    match owner_of(&gpu_uuid).map_err(StoreError::from)? {
        None => return Err(ReportError::UnknownGpu(gpu_uuid)),
        Some(owner) if owner != signer => {
            return Err(ReportError::NotOwner {
                uuid: gpu_uuid,
                owner,
                signer,
            })
        }
        Some(_) => {}
    }
    let entry = Entry::from_envelope(&envelope).map_err(ReportError::Entry)?;
    let id = content_id(&entry.signer, entry.kind, &timeless);
    Ok(CheckedReport {
        envelope,
        kind,
        signer,
        gpu_uuid,
        id,
        charge: bytes.len().max(MIN_REPORT_CHARGE),
    })
}

/// Hourly budgets of report bytes: a token bucket per key (a GPU's UUID, or a source address
/// as text) holding at most an hour's budget, refilled evenly over the hour
/// ([`pog_net::buckets::TokenBuckets`], a token a byte).
struct Budgets(pog_net::buckets::TokenBuckets<String>);

/// GPUs (or addresses) a budget remembers at once; beyond this, full buckets (unused for an
/// hour) are forgotten first, and a report for a new one waits ([`ReportError::Crowded`]).
const MAX_TRACKED: usize = 100_000;

/// Seconds a report refused for [`ReportError::Crowded`] is told to wait.
const CROWDED_RETRY_S: u64 = 60;

impl Budgets {
    /// Budgets of `kib_per_hour` KiB an hour each, never less than one report of
    /// [`MAX_REPORT_BYTES`] (every report must fit some time).
    fn new(kib_per_hour: u32) -> Budgets {
        Budgets(pog_net::buckets::TokenBuckets::new(
            (f64::from(kib_per_hour) * 1024.0).max(MAX_REPORT_BYTES as f64),
            Duration::from_secs(3600),
            MAX_TRACKED,
        ))
    }

    /// The budget in KiB an hour, as refusals state it.
    fn kib_per_hour(&self) -> u64 {
        (self.0.capacity() / 1024.0) as u64
    }

    /// Whole seconds from `now` until `key` has `charge` bytes (0: it has them now); `None`
    /// when the budget tracks as many keys as it may and none can be forgotten.
    fn wait_s(&mut self, key: &str, charge: usize, now: Instant) -> Option<u64> {
        let wait = self.0.wait(&key.to_string(), charge as f64, now)?;
        Some(if wait.is_zero() {
            0
        } else {
            wait.as_secs_f64().ceil().max(1.0) as u64
        })
    }

    /// Spends `charge` bytes of `key`'s, which [`Budgets::wait_s`] found there.
    fn spend(&mut self, key: &str, charge: usize, now: Instant) {
        self.0.spend(&key.to_string(), charge as f64, now);
    }
}

/// Both budgets a new report is charged to.
struct ReportBudgets {
    /// Per registered GPU (by UUID): what the log takes grows with GPUs, not keys.
    gpus: Budgets,
    /// Per source address (an IPv4 address or IPv6 /64, as text): registered GPUs are claims,
    /// not proven hardware, so this bounds what one address's registrations can multiply.
    sources: Budgets,
}

/// The validator's state for reports: the hourly byte budgets per GPU and per source address,
/// and the reports being stored.
pub struct ReportDesk {
    budgets: Mutex<ReportBudgets>,
    in_flight: Mutex<HashSet<String>>,
}

impl ReportDesk {
    /// A desk whose budgets are `kib_per_gpu_hour` per GPU and `kib_per_source_hour` per source
    /// address ([`crate::validator::Config`]).
    pub fn new(kib_per_gpu_hour: u32, kib_per_source_hour: u32) -> ReportDesk {
        ReportDesk {
            budgets: Mutex::new(ReportBudgets {
                gpus: Budgets::new(kib_per_gpu_hour),
                sources: Budgets::new(kib_per_source_hour),
            }),
            in_flight: Mutex::new(HashSet::new()),
        }
    }
}

/// Forgets a report id from the in-flight set when the request handling it ends.
struct InFlight<'a> {
    set: &'a Mutex<HashSet<String>>,
    id: String,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.set.locked().remove(&self.id);
    }
}

impl ReportDesk {
    /// Takes an agent's report (the bytes of a signed `inspection` or `benchmark` envelope):
    /// checked ([`check_report`]), then, unless the validator already holds its content,
    /// charged to its GPU's and its source address's hourly budgets and stored as the agent
    /// signed it (ledger first, then the registry, like the validator's own records). A report
    /// whose content is held already is answered with `recorded: false` and costs nothing: the
    /// agent sends its reports again after every registration, and again when it restarts.
    pub fn accept(
        &self,
        records: &RecordStore,
        bytes: &[u8],
        source: std::net::IpAddr,
    ) -> Result<ReportReceipt, ReportError> {
        let checked = check_report(bytes, records.now_ms(), |uuid| {
            Ok(records.registry().gpu(uuid)?.map(|g| g.agent))
        })?;
        let receipt = |recorded, log_index| ReportReceipt {
            id: checked.id.clone(),
            kind: checked.kind.into(),
            gpu_uuid: checked.gpu_uuid.clone(),
            recorded,
            log_index,
        };
        let desk = self;
        if !desk.in_flight.locked().insert(checked.id.clone()) {
            return Err(ReportError::InFlight);
        }
        let _in_flight = InFlight {
            set: &desk.in_flight,
            id: checked.id.clone(),
        };
        if records
            .registry()
            .has_record(&checked.id)
            .map_err(StoreError::from)?
        {
            return Ok(receipt(false, None));
        }
        // Charged to both budgets or neither: a report one refuses costs the other nothing.
        let (now, charge) = (Instant::now(), checked.charge);
        let source = pog_net::serve::source_key(source).to_string();
        let mut budgets = desk.budgets.locked();
        let b = &mut *budgets;
        let (Some(gpu_wait), Some(source_wait)) = (
            b.gpus.wait_s(&checked.gpu_uuid, charge, now),
            b.sources.wait_s(&source, charge, now),
        ) else {
            return Err(ReportError::Crowded);
        };
        if gpu_wait > 0 && gpu_wait >= source_wait {
            return Err(ReportError::GpuBudget {
                uuid: checked.gpu_uuid.clone(),
                kib_per_hour: b.gpus.kib_per_hour(),
                charge,
                retry_after_s: gpu_wait,
            });
        }
        if source_wait > 0 {
            return Err(ReportError::SourceBudget {
                address: source,
                kib_per_hour: b.sources.kib_per_hour(),
                charge,
                retry_after_s: source_wait,
            });
        }
        b.gpus.spend(&checked.gpu_uuid, charge, now);
        b.sources.spend(&source, charge, now);
        drop(budgets);
        let log_index = records.store_envelope(
            &checked.envelope,
            (&checked.id, None),
            &checked.gpu_uuid,
            false,
        )?;
        tracing::info!(gpu = %checked.gpu_uuid, agent = %checked.signer, kind = checked.kind, charge, "recorded the agent's report");
        Ok(receipt(true, log_index))
    }
}

/// `POST /v1/reports`, taking reports into `records` through `desk`.
pub fn router(records: Arc<RecordStore>, desk: Arc<ReportDesk>) -> axum::Router {
    axum::Router::new()
        .route("/v1/reports", axum::routing::post(post_report))
        .with_state((records, desk))
}

/// `POST /v1/reports`: an agent's signed report ([`ReportDesk::accept`]); a refusal that
/// time undoes carries `Retry-After`.
async fn post_report(
    State((records, desk)): State<(Arc<RecordStore>, Arc<ReportDesk>)>,
    axum::extract::ConnectInfo(from): axum::extract::ConnectInfo<std::net::SocketAddr>,
    body: Bytes,
) -> Response {
    // The checks, the ledger's durable append and the registry's write: off the API's workers.
    let accepted =
        tokio::task::spawn_blocking(move || desk.accept(&records, &body, from.ip())).await;
    let Ok(accepted) = accepted else {
        return ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "storing the report failed",
        )
        .into_response();
    };
    match accepted {
        Ok(receipt) => (StatusCode::OK, axum::Json(receipt)).into_response(),
        Err(e) => {
            let retry_after = e.retry_after_s();
            let mut response = ApiError::from(e).into_response();
            if let Some(s) = retry_after {
                response
                    .headers_mut()
                    .insert(axum::http::header::RETRY_AFTER, s.into());
            }
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pog_agent::reports::{agent_reports, SavedBench};
    use pog_bench::{BenchOptions, Suite};
    use pog_facts::Inventory;
    use pog_inspect::InspectReport;
    use pog_proof::timing::CLOCK_SKEW_MS;
    use pog_proof::wire::GpuClaim;
    use pog_records::reports::{Figure, Finding, Provenance, BODY_VERSION};
    use pog_signed::Identity;
    use pog_sim::SimPlatform;

    fn summary(uuid: &str) -> InspectionSummary {
        InspectionSummary {
            version: BODY_VERSION,
            gpu_uuid: uuid.parse().unwrap(),
            model: "H200 SXM".into(),
            bus_id: "0000:00:06.0".into(),
            driver_version: "580.95.05".into(),
            verdict: "pass".into(),
            findings: vec![],
            provenance: Provenance::SelfReported,
            recorded_at_ms: 1_000,
        }
    }

    #[test]
    fn reports_are_checked_before_anything_is_stored() {
        let agent = Identity::from_seed([3; 32]);
        let owner = |who: &Identity| {
            let key = who.public_key();
            move |uuid: &str| Ok((uuid == "GPU-1").then(|| key.clone()))
        };
        let bytes = |e: &Envelope| serde_json::to_vec(e).unwrap();
        let good = agent
            .seal(RecordKind::Inspection.wire_kind(), &summary("GPU-1"))
            .unwrap();
        let checked = check_report(&bytes(&good), 2_000, owner(&agent)).unwrap();
        assert_eq!(checked.signer, agent.public_key());
        assert!(checked.id.starts_with("report-") && checked.id.len() == 7 + 64);
        // The id is the content's: the same report spelled with an uppercase signer has it too.
        let mut upper = good.clone();
        upper.signer = upper.signer.to_ascii_uppercase();
        assert_eq!(
            check_report(&bytes(&upper), 2_000, owner(&agent))
                .unwrap()
                .id,
            checked.id
        );
        let status = |r: Result<CheckedReport, ReportError>| r.unwrap_err().status().as_u16();
        let other = Identity::from_seed([4; 32]);
        assert_eq!(
            status(check_report(&bytes(&good), 2_000, owner(&other))),
            403
        );
        let unknown = agent
            .seal(RecordKind::Inspection.wire_kind(), &summary("GPU-2"))
            .unwrap();
        assert_eq!(
            status(check_report(&bytes(&unknown), 2_000, owner(&agent))),
            404
        );
        let future = InspectionSummary {
            recorded_at_ms: 2_000 + CLOCK_SKEW_MS + 1,
            ..summary("GPU-1")
        };
        let mut bad = vec![
            future,
            InspectionSummary {
                version: 2,
                ..summary("GPU-1")
            },
            InspectionSummary {
                provenance: Provenance::Measured,
                ..summary("GPU-1")
            },
            InspectionSummary {
                verdict: "genuine".into(),
                ..summary("GPU-1")
            },
            InspectionSummary {
                model: String::new(),
                ..summary("GPU-1")
            },
            InspectionSummary {
                driver_version: "5\u{7}".into(),
                ..summary("GPU-1")
            },
        ];
        let mut f = summary("GPU-1");
        f.findings.push(Finding {
            code: "x".into(),
            severity: "severe".into(),
            message: "m".into(),
        });
        bad.push(f);
        for s in bad {
            let e = agent.seal(RecordKind::Inspection.wire_kind(), &s).unwrap();
            let err = check_report(&bytes(&e), 2_000, owner(&agent)).unwrap_err();
            assert!(matches!(err, ReportError::Invalid { .. }), "{s:?}: {err}");
            assert_eq!(err.status().as_u16(), 400);
        }
        let figures = |value: f64| BenchmarkFigures {
            version: BODY_VERSION,
            gpu_uuid: "GPU-1".parse().unwrap(),
            suite: "quick".into(),
            figures: vec![Figure {
                name: "hbm_read_gbs".into(),
                value,
                unit: "GB/s".into(),
                method: "m".into(),
            }],
            provenance: Provenance::SelfReported,
            recorded_at_ms: 1_000,
        };
        let e = agent
            .seal(RecordKind::Benchmark.wire_kind(), &figures(4000.0))
            .unwrap();
        check_report(&bytes(&e), 2_000, owner(&agent)).unwrap();
        let mut empty = figures(1.0);
        empty.figures.clear();
        let e = agent
            .seal(RecordKind::Benchmark.wire_kind(), &empty)
            .unwrap();
        assert_eq!(status(check_report(&bytes(&e), 2_000, owner(&agent))), 400);
        // A body of one kind under the other kind's name, another kind, forged, too large.
        let e = agent
            .seal(RecordKind::Benchmark.wire_kind(), &summary("GPU-1"))
            .unwrap();
        assert_eq!(status(check_report(&bytes(&e), 2_000, owner(&agent))), 400);
        let e = agent.seal("register", &summary("GPU-1")).unwrap();
        assert!(matches!(
            check_report(&bytes(&e), 2_000, owner(&agent)),
            Err(ReportError::Kind(_))
        ));
        let mut forged = good.clone();
        forged.body = forged.body.replace("580.95.05", "580.95.06");
        assert_eq!(
            status(check_report(&bytes(&forged), 2_000, owner(&agent))),
            403
        );
        let big = vec![b' '; MAX_REPORT_BYTES + 1];
        assert_eq!(status(check_report(&big, 2_000, owner(&agent))), 413);
        assert_eq!(status(check_report(b"\xff{", 2_000, owner(&agent))), 400);
    }

    /// What the size cap is measured against: a real H200's inspection (the captured
    /// inventory of our test machine) and the figures of a standard and a full `pog bench` of
    /// an H200 (the simulated double's: the same 25 figures, in the same words, as the real
    /// standard run of docs/captures has).
    #[test]
    fn an_h200s_reports_are_far_under_the_size_cap() {
        let inventory: Inventory = serde_json::from_str(include_str!(
            "../../inspect/tests/fixtures/h200-inventory.json"
        ))
        .unwrap();
        let inspection = pog_inspect::inspect(&inventory, pog_spec::SpecDb::embedded());
        let real = InspectReport {
            inventory,
            inspection,
        };
        let g = &real.inspection.gpus[0];
        let gpu = GpuClaim {
            uuid: g.uuid.clone().unwrap().parse().unwrap(),
            model: g.model.clone().unwrap(),
            bus_id: g.bus_id.unwrap().to_string(),
            simulated: false,
        };
        let agent = Identity::from_seed([3; 32]);
        let size = |e: &Envelope| serde_json::to_vec(e).unwrap().len();
        let made = agent_reports(&agent, &real, &[gpu], None, 1_796_000_001_000).unwrap();
        let inspection = size(&made.envelopes[0]);
        assert!((500..1_000).contains(&inspection), "{inspection} bytes");
        for suite in [Suite::Standard, Suite::Full] {
            let platform = SimPlatform::from_profile("H200 SXM").unwrap();
            let report = pog_inspect::run(&platform);
            let options = BenchOptions {
                no_host: true,
                ..BenchOptions::suite(suite)
            };
            let bench =
                pog_bench::measure(&platform, &report.inventory, &options, &mut ()).unwrap();
            let mut json = serde_json::to_value(&bench).unwrap();
            json["schema"] = "pog.bench/1".into();
            let saved =
                SavedBench::parse(&json.to_string().into_bytes(), Some(1_796_000_000_000)).unwrap();
            let g = &report.inspection.gpus[0];
            let gpu = GpuClaim {
                uuid: g.uuid.clone().unwrap().parse().unwrap(),
                model: g.model.clone().unwrap(),
                bus_id: g.bus_id.unwrap().to_string(),
                simulated: true,
            };
            let made =
                agent_reports(&agent, &report, &[gpu], Some(&saved), 1_796_000_001_000).unwrap();
            let (figures, _): (BenchmarkFigures, PublicKey) = pog_signed::decode(
                &serde_json::to_vec(&made.envelopes[1]).unwrap(),
                RecordKind::Benchmark.wire_kind(),
            )
            .unwrap();
            assert_eq!(figures.figures.len(), 25, "{suite:?}: nothing was trimmed");
            let benchmark = size(&made.envelopes[1]);
            assert!(
                (5_000..8_000).contains(&benchmark),
                "{suite:?}: {benchmark} bytes"
            );
            // Both records of a GPU's start fit in an eighth of its default hourly budget.
            let start = inspection.max(MIN_REPORT_CHARGE) + benchmark;
            assert!(8 * start <= DEFAULT_REPORT_KIB_PER_GPU_PER_HOUR as usize * 1024);
            assert!(2 * benchmark < MAX_REPORT_BYTES);
        }
    }

    #[test]
    fn the_hourly_budgets_charge_bytes_refill_and_say_when_to_retry() {
        let mut b = Budgets::new(16);
        assert_eq!(b.kib_per_hour(), 16);
        let t = Instant::now();
        let take = |b: &mut Budgets, key: &str, charge: usize, at: Instant| {
            let wait = b.wait_s(key, charge, at).unwrap();
            if wait == 0 {
                b.spend(key, charge, at);
            }
            wait
        };
        assert_eq!(take(&mut b, "a", 10 << 10, t), 0);
        assert_eq!(take(&mut b, "a", 6 << 10, t), 0);
        // Empty: 4 KiB more come in a quarter of an hour.
        assert_eq!(take(&mut b, "a", 4 << 10, t), 900);
        assert_eq!(take(&mut b, "b", 16 << 10, t), 0, "another key has its own");
        let quarter = t + Duration::from_secs(900);
        assert_eq!(take(&mut b, "a", 4 << 10, quarter), 0);
        assert_eq!(take(&mut b, "a", 1, quarter), 1);
        // Two hours on: full again, but never more than an hour's budget.
        let later = t + Duration::from_secs(7200);
        assert_eq!(take(&mut b, "a", 16 << 10, later), 0);
        assert_eq!(take(&mut b, "a", 1 << 10, later), 225);
        // A budget below one report of the largest size is raised to it.
        assert_eq!(
            Budgets::new(1).kib_per_hour(),
            (MAX_REPORT_BYTES >> 10) as u64
        );
    }

    #[test]
    fn a_reports_id_is_its_content_whatever_its_time_or_spelling() {
        let agent = Identity::from_seed([3; 32]);
        let owner = |uuid: &str| Ok((uuid == "GPU-1").then(|| agent.public_key()));
        let id = |e: &Envelope| {
            check_report(&serde_json::to_vec(e).unwrap(), 1_000_000, owner)
                .unwrap()
                .id
        };
        let first = id(&agent
            .seal(RecordKind::Inspection.wire_kind(), &summary("GPU-1"))
            .unwrap());
        let later = InspectionSummary {
            recorded_at_ms: 999_000,
            ..summary("GPU-1")
        };
        assert_eq!(
            id(&agent
                .seal(RecordKind::Inspection.wire_kind(), &later)
                .unwrap()),
            first
        );
        let spaced = serde_json::to_string_pretty(&later).unwrap();
        assert_eq!(
            id(&agent.seal_body(RecordKind::Inspection.wire_kind(), spaced)),
            first
        );
        let failed = InspectionSummary {
            verdict: "fail".into(),
            ..later
        };
        assert_ne!(
            id(&agent
                .seal(RecordKind::Inspection.wire_kind(), &failed)
                .unwrap()),
            first
        );
    }
}
