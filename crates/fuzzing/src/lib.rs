//! Fuzzing harnesses for every message the services decode, shared by the cargo-fuzz targets in
//! `fuzz/` and by this crate's smoke test.
//!
//! Random bytes at [`pog_signed::decode`] almost never get past the signature check, so each body
//! harness takes its input as the message body's JSON text, signs it into a valid envelope
//! with a fixed key, decodes that as a service does, and then runs what the services run on
//! the decoded message (the validator's [`ValidatorSession`], the agent's prover). [`envelope`]
//! still takes raw bytes, for the envelope parser and the checks before the signature.
//!
//! A harness returns what it got to (or why it stopped); it must never panic.

#![warn(missing_docs)]

use pog_proof::challenge::CHALLENGE_VERSION;
use pog_proof::memory::{MemoryChallenge, MEMORY_VERSION};
use pog_proof::prover::{Behaviour, CpuProver, Prover};
use pog_proof::session::{Outcome, ValidatorSession};
use pog_proof::storage::session::{
    kind as storage_kind, AuditMessage, AuditOpeningsMessage, BuildingMessage, BuiltMessage,
    DatasetMessage, OpenMessage, OpeningsMessage, RoundMessage, WalkMessage as StorageWalkMessage,
};
use pog_proof::wire::{
    self, kind, ChallengeMessage, Commitment, MemoryChallengeMessage, MemoryReady, OpenRequest,
    Openings, Register, WalkMessage,
};
use pog_proof::Challenge;
use pog_signed::{GpuUuid, Identity, RecordKind};
use pog_spec::Precision;
use serde::de::DeserializeOwned;
use std::sync::OnceLock;

/// The harnesses' signing identity: the agent to the validator's session, and the validator
/// to the agent alike.
fn identity() -> &'static Identity {
    static IDENTITY: OnceLock<Identity> = OnceLock::new();
    IDENTITY.get_or_init(|| Identity::from_seed([0x5e; 32]))
}

/// `body` (invalid UTF-8 replaced, as the envelope carries text) signed as a message of `kind`,
/// encoded as it arrives over the network.
pub fn seal(kind: &str, body: &[u8]) -> Vec<u8> {
    let body = String::from_utf8_lossy(body).into_owned();
    serde_json::to_vec(&identity().seal_body(kind, body)).expect("an envelope always encodes")
}

/// A small challenge and its honest answer, computed once: the state the validator's session
/// and the agent's prover are in when the fuzzed commitment, openings or open request arrive.
pub struct Fixture {
    /// The challenge as the validator issued it.
    pub message: ChallengeMessage,
    /// The honest agent's computation of it.
    pub prover: CpuProver,
}

/// The validator's spot-check secret in the fixture's session.
const SECRET: [u8; 32] = [0x33; 32];

impl Fixture {
    /// The honest agent's commitment.
    pub fn commitment(&self) -> Commitment {
        Commitment {
            challenge_id: self.message.id.clone(),
            gpu_uuid: self.message.challenge.to.gpu_uuid.clone(),
            root: hex::encode(self.prover.root()),
            leaf_count: self.prover.leaf_count(),
            agent_ms: 1.0,
        }
    }

    /// A fresh validator session for the challenge, answerable by the harnesses' identity.
    fn session(&self) -> ValidatorSession {
        ValidatorSession::new(
            self.message.clone(),
            identity().public_key(),
            1000.0,
            SECRET,
            4,
        )
    }

    /// When a commitment arrives: just after the challenge was issued.
    fn now_ms(&self) -> u64 {
        self.message.issued_at_ms + 1
    }
}

/// The GPU every harness's messages name.
pub fn fuzz_gpu() -> GpuUuid {
    GpuUuid::new("GPU-fuzz").expect("a constant, valid GPU UUID")
}

/// The shared [`Fixture`].
pub fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let challenge = Challenge {
            version: CHALLENGE_VERSION,
            nonce: [0x11; 32],
            to: pog_proof::challenge::Addressee {
                gpu_uuid: fuzz_gpu(),
                gpu_bus_id: "00000000:00:06.0".into(),
                agent_key: identity().public_key(),
                validator_key: identity().public_key(),
            },
            precision: Precision::Fp32,
            size: 8,
            batch: 2,
            leaf_elements: 16,
        };
        let prover = CpuProver::compute(&challenge, Behaviour::Honest);
        Fixture {
            message: ChallengeMessage {
                id: "fuzz-challenge".into(),
                challenge,
                issued_at_ms: 1_000_000,
                expires_at_ms: 1_060_000,
            },
            prover,
        }
    })
}

/// Raw bytes as an envelope of every kind: the size bound, the envelope parser, version, kind
/// and signature checks. Returns the kind it was accepted as, if any.
pub fn envelope(bytes: &[u8]) -> Option<&'static str> {
    let decoded = [
        (
            kind::REGISTER,
            pog_signed::decode::<Register>(bytes, kind::REGISTER).is_ok(),
        ),
        (
            kind::CHALLENGE,
            pog_signed::decode::<ChallengeMessage>(bytes, kind::CHALLENGE).is_ok(),
        ),
        (
            kind::COMMITMENT,
            pog_signed::decode::<Commitment>(bytes, kind::COMMITMENT).is_ok(),
        ),
        (
            kind::OPEN,
            pog_signed::decode::<OpenRequest>(bytes, kind::OPEN).is_ok(),
        ),
        (
            kind::OPENINGS,
            pog_signed::decode::<pog_proof::wire::OpeningsDigest>(bytes, kind::OPENINGS).is_ok(),
        ),
        (
            kind::MEMORY_CHALLENGE,
            pog_signed::decode::<MemoryChallengeMessage>(bytes, kind::MEMORY_CHALLENGE).is_ok(),
        ),
        (
            kind::MEMORY_READY,
            pog_signed::decode::<MemoryReady>(bytes, kind::MEMORY_READY).is_ok(),
        ),
        (
            kind::MEMORY_WALK,
            pog_signed::decode::<WalkMessage>(bytes, kind::MEMORY_WALK).is_ok(),
        ),
        (
            kind::RAM_CHALLENGE,
            pog_signed::decode::<MemoryChallengeMessage>(bytes, kind::RAM_CHALLENGE).is_ok(),
        ),
        (
            kind::RAM_READY,
            pog_signed::decode::<MemoryReady>(bytes, kind::RAM_READY).is_ok(),
        ),
        (
            kind::RAM_WALK,
            pog_signed::decode::<WalkMessage>(bytes, kind::RAM_WALK).is_ok(),
        ),
    ];
    decoded.into_iter().find_map(|(k, ok)| ok.then_some(k))
}

/// A signed registration body, decoded as the validator's `/v1/register` does.
pub fn register(body: &[u8]) -> Result<Register, String> {
    decode(body, kind::REGISTER)
}

/// A signed challenge body, decoded and shape-checked as the agent's `/v1/challenge` does,
/// then the seeds of its first GEMM, its cost and its leaf layout derived from it.
pub fn challenge(body: &[u8]) -> Result<ChallengeMessage, String> {
    let message: ChallengeMessage = decode(body, kind::CHALLENGE)?;
    let c = &message.challenge;
    c.check_shape().map_err(|e| e.to_string())?;
    std::hint::black_box((c.gemm(0), c.flops(), c.leaf_count(), c.leaf_len(0)));
    Ok(message)
}

/// A small memory challenge as the validator issues it, for the memory harnesses' seeds.
pub fn memory_message() -> MemoryChallengeMessage {
    MemoryChallengeMessage {
        id: "fuzz-memory".into(),
        challenge: MemoryChallenge {
            version: MEMORY_VERSION,
            nonce: [0x22; 32],
            to: pog_proof::challenge::Addressee {
                gpu_uuid: fuzz_gpu(),
                gpu_bus_id: "00000000:00:06.0".into(),
                agent_key: identity().public_key(),
                validator_key: identity().public_key(),
            },
            items: 64,
            item_rounds: 2,
            walkers: 16,
            steps: 2,
            span: 4,
            walkers_per_leaf: 4,
        },
        issued_at_ms: 1_000_000,
        expires_at_ms: 1_060_000,
    }
}

/// A signed walk challenge body of message kind `kind`, decoded, shape-checked and held to
/// `planned` as the agent's set-up endpoint does, then its sizes and keys derived (the work
/// before any allocation).
fn walk_challenge(
    body: &[u8],
    kind: &str,
    planned: impl FnOnce(&pog_proof::memory::MemoryChallenge) -> Result<(), String>,
) -> Result<MemoryChallengeMessage, String> {
    let message: MemoryChallengeMessage = decode(body, kind)?;
    let c = &message.challenge;
    c.check_shape().map_err(|e| e.to_string())?;
    planned(c)?;
    std::hint::black_box((
        c.dataset_key(),
        c.dataset_bytes(),
        c.reads(),
        c.leaf_count(),
    ));
    Ok(message)
}

/// A signed memory challenge body, as the agent's `/v1/memory/build` takes it in
/// ([`walk_challenge`]).
pub fn memory_challenge(body: &[u8]) -> Result<MemoryChallengeMessage, String> {
    walk_challenge(body, kind::MEMORY_CHALLENGE, |_| Ok(()))
}

/// The RAM the harnesses' agent claims: 1 MiB, the proof's smallest claim.
pub const FUZZ_RAM_CLAIM: u64 = pog_proof::ram::MIN_CLAIM_BYTES;

/// A signed RAM challenge body, as the agent's `/v1/ram/build` takes it in, held to the plan
/// for the harnesses' claim ([`walk_challenge`]).
pub fn ram_challenge(body: &[u8]) -> Result<MemoryChallengeMessage, String> {
    walk_challenge(body, kind::RAM_CHALLENGE, |c| {
        pog_proof::ram::admissible(FUZZ_RAM_CLAIM)
            .map_err(|e| e.to_string())?
            .admits(c)
            .map_err(|e| e.to_string())
    })
}

/// A signed "ready" body, decoded as the validator does.
pub fn memory_ready(body: &[u8]) -> Result<MemoryReady, String> {
    decode(body, kind::MEMORY_READY)
}

/// A signed walk body, decoded as the agent's `/v1/memory/walk` does, then the walk key it
/// gives the harnesses' memory challenge and one walker recomputed from it.
pub fn memory_walk(body: &[u8]) -> Result<[u8; 16], String> {
    let walk: WalkMessage = decode(body, kind::MEMORY_WALK)?;
    let c = memory_message().challenge;
    Ok(c.walker_output(&c.walk_key(&walk.walk_nonce), 0))
}

/// The health request the harnesses' summaries answer: one minute of GPU-fuzz.
pub fn health_request_message() -> wire::HealthRequest {
    wire::HealthRequest {
        id: "fuzz-health".into(),
        gpu_uuid: fuzz_gpu(),
        agent_key: identity().public_key(),
        from_ms: 1_000_000,
        to_ms: 1_060_000,
        issued_at_ms: 1_060_000,
    }
}

/// A signed health request body, decoded and window-checked as the agent's `/v1/health` does.
pub fn health_request(body: &[u8]) -> Result<wire::HealthRequest, String> {
    let request: wire::HealthRequest = decode(body, kind::HEALTH_REQUEST)?;
    request.check().map_err(|e| e.to_string())?;
    Ok(request)
}

/// A signed health summary body, decoded and checked against [`health_request_message`] as
/// the validator does before it records it.
pub fn health_summary(body: &[u8]) -> Result<wire::HealthSummary, String> {
    let summary: wire::HealthSummary = decode(body, kind::HEALTH_SUMMARY)?;
    summary
        .check(&health_request_message())
        .map_err(|e| e.to_string())?;
    Ok(summary)
}

/// A signed commitment body, decoded and given to a fresh validator session for the fixture's
/// challenge: sender, order, expiry, GPU, leaf count, root hex, the time check and the draw of
/// the leaves to open. Returns the open request.
pub fn commitment(body: &[u8]) -> Result<OpenRequest, String> {
    let commitment: Commitment = decode(body, kind::COMMITMENT)?;
    let f = fixture();
    f.session()
        .on_commitment(&commitment, &identity().public_key(), f.now_ms(), 0.0)
        .map_err(|e| e.to_string())
}

/// A signed open request body, decoded and answered as the agent's `/v1/open` does: the
/// request checked (at least one leaf, at most `pog_agent::agent::MAX_OPENINGS`, strictly
/// increasing, in range), the leaves opened by the fixture's prover and their paths merged
/// into one multiproof. Returns the openings.
pub fn open_request(body: &[u8]) -> Result<Openings, String> {
    let request: OpenRequest = decode(body, kind::OPEN)?;
    let prover = &fixture().prover;
    request
        .check(prover.leaf_count(), pog_agent::agent::MAX_OPENINGS)
        .map_err(|e| e.to_string())?;
    let opened = prover.open(&request.leaves).map_err(|e| e.to_string())?;
    Openings::compact(request.challenge_id, prover.leaf_count(), &opened).map_err(|e| e.to_string())
}

/// Openings as the agent's `/v1/open` answers them, sealed in a frame by the fixture's agent
/// ([`Openings::seal`]), read back as the validator reads a frame ([`Openings::open`]) and
/// given to a validator session that has taken the honest commitment: both fields' lengths
/// against the leaves asked, the leaf hashes and the multiproof against the root, then the
/// check of every drawn element. `bytes` are the frame's payload after a correct signature:
/// its first 4 bytes (little-endian) say how many of the rest are the leaves (at most all),
/// the rest are the multiproof's hashes. Returns the verdict.
pub fn openings(bytes: &[u8]) -> Result<Outcome, String> {
    let (split, rest) = bytes
        .split_first_chunk::<4>()
        .ok_or("fewer than 4 bytes: no split")?;
    let (leaves, proof) = rest.split_at((u32::from_le_bytes(*split) as usize).min(rest.len()));
    let f = fixture();
    let sealed = Openings {
        challenge_id: f.message.id.clone(),
        leaves: leaves.to_vec(),
        proof: proof.to_vec(),
    }
    .seal(identity())
    .map_err(|e| e.to_string())?;
    let (openings, signer) = Openings::open(&sealed).map_err(|e| e.to_string())?;
    let mut session = f.session();
    session
        .on_commitment(&f.commitment(), &signer, f.now_ms(), 0.0)
        .map_err(|e| format!("the fixture's own commitment: {e}"))?;
    session
        .on_openings(&openings, &signer)
        .map_err(|e| e.to_string())
}

/// Any bytes as an openings frame, read as the validator reads an agent's answer
/// ([`Openings::open`]: the magic, the head's length, the head's signature, the bytes it
/// names and their digest). Returns the openings read.
pub fn openings_frame(bytes: &[u8]) -> Result<Openings, String> {
    Openings::open(bytes)
        .map(|(openings, _)| openings)
        .map_err(|e| e.to_string())
}

/// A small data set in memory, its root audited, and a round of it walked honestly: the
/// state the validator's storage sessions are in when the fuzzed answers arrive.
pub struct StorageFixture {
    /// The data set and its chunks.
    pub set: pog_proof::storage::MemoryDataset,
    /// The data set message the validator sent.
    pub dataset: DatasetMessage,
    /// The round the validator issued.
    pub round: RoundMessage,
    /// Its honest walk.
    pub walk: pog_proof::storage::StorageWalk,
}

/// The shared [`StorageFixture`]: 16 one-chunk items, a round of 32 steps.
pub fn storage_fixture() -> &'static StorageFixture {
    static FIXTURE: OnceLock<StorageFixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let to = pog_proof::challenge::Addressee {
            gpu_uuid: fuzz_gpu(),
            gpu_bus_id: "00000000:00:06.0".into(),
            agent_key: identity().public_key(),
            validator_key: identity().public_key(),
        };
        let shape = pog_proof::storage::StorageShape {
            items: 16,
            chunks_per_item: 1,
            passes: 1,
            double_rounds: 1,
        };
        let dataset = pog_proof::storage::StorageDataset::new([9; 32], to, shape);
        let set = pog_proof::storage::MemoryDataset::build(&dataset);
        let round = RoundMessage {
            id: "fuzz-round".into(),
            round: pog_proof::storage::StorageRound {
                dataset: dataset.clone(),
                root: set.root(),
                nonce: [8; 32],
                steps: 32,
            },
            issued_at_ms: 1_000,
            expires_at_ms: 61_000,
        };
        let walk = round
            .round
            .walk(|i| set.chunk(i).map(<[u8]>::to_vec).ok_or(()))
            .expect("the fixture's chunks are all there");
        StorageFixture {
            set,
            dataset: DatasetMessage {
                id: "fuzz-dataset".into(),
                dataset,
                issued_at_ms: 1_000,
                expires_at_ms: 61_000,
            },
            round,
            walk,
        }
    })
}

/// A signed body to the agent's `/v1/storage/*`, decoded as each endpoint does and checked as
/// it checks before any work: a data set (its shape), an audit (its count), a round (its
/// shape, its first digest derived), an open request (its count, each step's chunk in the
/// fixture's walk). Returns the kinds it decoded and passed as.
pub fn storage_request(body: &[u8]) -> Vec<&'static str> {
    use pog_proof::storage::MAX_SAMPLES;
    let mut passed = Vec::new();
    let count = |n: usize| (1..=MAX_SAMPLES as usize).contains(&n);
    if let Ok(m) = decode::<DatasetMessage>(body, storage_kind::STORAGE_DATASET) {
        if m.dataset.validate().is_ok() {
            passed.push(storage_kind::STORAGE_DATASET);
        }
    }
    if let Ok(m) = decode::<AuditMessage>(body, storage_kind::STORAGE_AUDIT) {
        if count(m.chunks.len()) {
            passed.push(storage_kind::STORAGE_AUDIT);
        }
    }
    if let Ok(m) = decode::<RoundMessage>(body, storage_kind::STORAGE_ROUND) {
        if m.round.validate().is_ok() {
            let _ = m.round.start();
            passed.push(storage_kind::STORAGE_ROUND);
        }
    }
    if let Ok(m) = decode::<OpenMessage>(body, storage_kind::STORAGE_OPEN) {
        let f = storage_fixture();
        if count(m.request.steps.len())
            && m.request
                .steps
                .iter()
                .all(|&t| f.round.round.chunk_at(&f.walk, t).is_some())
        {
            passed.push(storage_kind::STORAGE_OPEN);
        }
    }
    passed
}

/// A signed body answering the validator's storage sessions, decoded as each answer is and
/// given to a fresh session of the fixture in the state it arrives in: a build in progress,
/// a root, an audit's openings (after the honest root), a walk, a round's openings (after the
/// honest walk). Returns what each session said.
pub fn storage_answer(body: &[u8]) -> Vec<String> {
    use pog_proof::storage::session::{DatasetSession, RoundSession};
    let f = storage_fixture();
    let signer = identity().public_key();
    let dataset = || DatasetSession::new(&f.dataset, signer.clone(), SECRET, 8);
    let round = || RoundSession::new(&f.round, signer.clone(), 100.0, SECRET, (8, 1));
    let mut said = Vec::new();
    if let Ok(m) = decode::<BuildingMessage>(body, storage_kind::STORAGE_BUILDING) {
        said.push(format!("{:?}", dataset().on_building(&m, &signer, 2_000)));
    }
    if let Ok(m) = decode::<BuiltMessage>(body, storage_kind::STORAGE_BUILT) {
        said.push(format!("{:?}", dataset().on_built(&m, &signer, 2_000)));
    }
    if let Ok(m) = decode::<AuditOpeningsMessage>(body, storage_kind::STORAGE_AUDIT_OPENINGS) {
        let mut session = dataset();
        let honest = BuiltMessage {
            dataset_id: f.dataset.id.clone(),
            root: f.set.root(),
        };
        if session.on_built(&honest, &signer, 2_000).is_ok() {
            said.push(format!("{:?}", session.on_audit_openings(&m, &signer)));
        }
    }
    if let Ok(m) = decode::<StorageWalkMessage>(body, storage_kind::STORAGE_WALK) {
        said.push(format!("{:?}", round().on_walk(&m, &signer, 1_050, 0.0)));
    }
    if let Ok(m) = decode::<OpeningsMessage>(body, storage_kind::STORAGE_OPENINGS) {
        let mut session = round();
        let honest = StorageWalkMessage {
            round_id: f.round.id.clone(),
            walk: f.walk.clone(),
        };
        if let Ok(Ok(_)) = session.on_walk(&honest, &signer, 1_050, 0.0) {
            said.push(format!("{:?}", session.on_openings(&m, &signer)));
        }
    }
    said
}

/// `body` sealed as a `kind` message and decoded again: the wire path with the signature
/// check passed.
fn decode<T: DeserializeOwned>(body: &[u8], kind: &str) -> Result<T, String> {
    pog_signed::decode(&seal(kind, body), kind)
        .map(|(message, _)| message)
        .map_err(|e| e.to_string())
}

/// The ledger harnesses' keys: the log (validator) and one witness.
fn ledger_keys() -> &'static (pog_ledger::note::NoteSigner, pog_ledger::note::NoteSigner) {
    use pog_ledger::note::{NoteSigner, ALG_COSIGNATURE_V1, ALG_ED25519};
    static KEYS: OnceLock<(NoteSigner, NoteSigner)> = OnceLock::new();
    KEYS.get_or_init(|| {
        (
            NoteSigner::new("fuzz.pog.test/log", ALG_ED25519, [0x5e; 32]).expect("valid name"),
            NoteSigner::new("fuzz.pog.test/w", ALG_COSIGNATURE_V1, [0x5f; 32]).expect("valid name"),
        )
    })
}

/// Valid ledger inputs to mutate: a proof bundle of three records (JSON) and its cosigned
/// checkpoint note, built in memory with the harnesses' keys.
pub fn ledger_seeds() -> (Vec<u8>, Vec<u8>) {
    use pog_ledger::bundle::{Bundle, BundleRecord};
    use pog_ledger::checkpoint::Checkpoint;
    use pog_ledger::entry::{Entry, NO_PREVIOUS};

    use pog_signed::RecordKind;
    let (log, witness) = ledger_keys();
    let key = ed25519_dalek::SigningKey::from_bytes(&[0x5e; 32]);
    let mut entries = Vec::new();
    for n in 0..3u64 {
        let body = format!(r#"{{"version":2,"gpu_uuid":"GPU-fuzz","n":{n}}}"#);
        let mut e = Entry::sign(RecordKind::ProofRound, body, &key).expect("valid record");
        e.gpu_seq = n;
        e.prev_index = n.checked_sub(1).unwrap_or(NO_PREVIOUS);
        entries.push(e.encode());
    }
    let tree = pog_merkle::Tree::from_leaf_hashes(
        entries.iter().map(|e| pog_merkle::leaf_hash(e)).collect(),
    );
    let mut checkpoint = Checkpoint {
        origin: log.verifier().name().into(),
        size: tree.size(),
        root: tree.root(),
        extensions: vec![],
    }
    .sign(log);
    checkpoint.add_cosignature(witness, 1_796_000_000);
    let bundle = Bundle {
        gpu_uuid: "GPU-fuzz".into(),
        checkpoint: checkpoint.clone(),
        records: entries
            .into_iter()
            .enumerate()
            .map(|(i, entry)| BundleRecord {
                index: i as u64,
                entry,
                proof: tree.inclusion_proof(i as u64).expect("in range"),
            })
            .collect(),
        consistency: Some((1, tree.consistency_proof(1).expect("in range"))),
        log: None,
        next_after: None,
    };
    (
        bundle.to_json().into_bytes(),
        checkpoint.to_text().into_bytes(),
    )
}

/// Bytes as a ledger proof bundle (what `pog verify` reads): parsed, then verified with the
/// harnesses' log and witness keys, every record parsed and checked. Returns whether it
/// verified without a problem.
pub fn ledger_bundle(bytes: &[u8]) -> Result<bool, String> {
    use pog_ledger::bundle::{verify_bundle, Bundle, WitnessPolicy};
    let (log, witness) = ledger_keys();
    let bundle = Bundle::parse(bytes).map_err(|e| e.to_string())?;
    let policy = WitnessPolicy {
        keys: vec![witness.verifier().clone()],
        quorum: 1,
    };
    let report = verify_bundle(&bundle, log.verifier(), &policy, Some(&bundle.checkpoint));
    Ok(report.ok())
}

/// Bytes as a signed note: parsed as a checkpoint and verified with the log's key and the
/// witness's, as a witness's add-checkpoint request, and as a verifier key. Returns whether
/// the checkpoint verified.
pub fn ledger_note(bytes: &[u8]) -> Result<bool, String> {
    use pog_ledger::checkpoint::SignedCheckpoint;
    use pog_ledger::witness::{AddCheckpoint, Witness};
    let (log, witness) = ledger_keys();
    let _ = pog_ledger::note::Verifier::parse(&String::from_utf8_lossy(bytes));
    if let Ok(request) = AddCheckpoint::parse(bytes) {
        let signer = pog_ledger::note::NoteSigner::new(
            "fuzz.pog.test/w",
            pog_ledger::note::ALG_COSIGNATURE_V1,
            [0x5f; 32],
        )
        .map_err(|e| e.to_string())?;
        let mut w = Witness::new(signer);
        w.follow(log.verifier().clone(), None);
        let _ = w.add_checkpoint(&request, 0);
    }
    let signed = SignedCheckpoint::parse(bytes).map_err(|e| e.to_string())?;
    let _ = signed.cosignatures(std::slice::from_ref(witness.verifier()));
    Ok(signed.verify(log.verifier()).is_ok())
}

/// Valid bodies of the market's signed requests, for the [`market`] harness to mutate: a
/// second order (an ask offering two of the harness key's proven GPUs, above its own resting
/// bid), the cancellation of the resting one, a clearing of its class, a withdrawal from the
/// key's escrow account, a bid carrying its renter's access, and a provider's report that a
/// lease's access was not delivered (of a lease the fresh market does not have).
pub fn market_seeds() -> Vec<Vec<u8>> {
    let me = identity().public_key();
    let now_ms = pog_proof::timing::now_ms();
    [
        serde_json::json!({"validator": me, "order": {"id": "o-2", "owner": me, "side": "ask",
            "class": "H200 SXM", "quantity": 2, "price_micro_usd": 4_000_000,
            "gpus": ["GPU-fuzz-1", "GPU-fuzz-2"]},
            "expires_at_ms": now_ms + 3_600_000}),
        serde_json::json!({"validator": me, "id": "o-1", "sequence": 0}),
        serde_json::json!({"validator": me, "class": "H200 SXM", "mechanism": "mcafee",
            "at_ms": now_ms, "nonce": "fuzz-seed-clear"}),
        serde_json::json!({"validator": me, "amount_micro_usd": 1_000_000, "at_ms": now_ms}),
        serde_json::json!({"validator": me, "order": {"id": "o-3", "owner": me, "side": "bid",
            "class": "H200 SXM", "quantity": 1, "price_micro_usd": 2_000_000,
            "access": {"container": "ghcr.io/fuzz/job:1"}},
            "expires_at_ms": now_ms + 3_600_000}),
        serde_json::json!({"validator": me, "lease_id": "0.0.0", "at_ms": now_ms,
            "reason": "the hook exited 1"}),
    ]
    .iter()
    .map(|v| v.to_string().into_bytes())
    .collect()
}

/// An escrow that signs every voucher (the [`market`] harness's): what is checked is the
/// market's side of a withdrawal.
struct SigningEscrow;

impl pog_validator::settlement::EscrowPayments for SigningEscrow {
    fn sign(
        &self,
        _: &pog_validator::settlement::EscrowTerms,
    ) -> Result<pog_records::EscrowPayment, pog_validator::settlement::EscrowUnavailable> {
        Err(pog_validator::settlement::EscrowUnavailable(
            "the harness settles nothing".into(),
        ))
    }

    fn deliver(
        &self,
        _: &pog_validator::settlement::EscrowTerms,
        _: &pog_records::EscrowPayment,
    ) -> Result<bool, pog_validator::settlement::EscrowUnavailable> {
        Ok(false)
    }

    fn voucher(
        &self,
        renter: &pog_signed::PublicKey,
        amount_micro_usd: u64,
        expires_at_s: u64,
    ) -> Result<pog_validator::settlement::Voucher, pog_validator::settlement::EscrowUnavailable>
    {
        Ok(pog_validator::settlement::Voucher {
            renter: renter.clone(),
            amount_micro_usd,
            nonce: 0,
            expires_at_s,
            chain_id: 1,
            contract: "0x0000000000000000000000000000000000000001".into(),
            signature: "0x00".into(),
        })
    }
}

/// Bytes as the body of each of the market's signed requests (`POST /v1/market/submit`,
/// `cancel`, `clear`, `withdraw`, `undelivered`), sent to a fresh in-memory market of a
/// validator that settles its leases (the
/// harnesses' key, which also owns the orders and holds $100 in the escrow) holding one resting
/// bid `o-1`, whose registry holds the H200s `GPU-fuzz-1` to `GPU-fuzz-3` registered to that key
/// and proven a minute ago, and `GPU-fuzz-4` registered to another key. Returns which requests
/// were accepted, e.g. `"submit cancel - - -"`; refusals are answers, never panics.
pub fn market(body: &[u8]) -> Result<String, String> {
    use pog_market::backing::{LatestProof, Standing};
    use pog_validator::market::{Market, CANCEL_KIND, CLEAR_KIND, SUBMIT_KIND};
    let me = identity().public_key();
    let proven = |agent: pog_signed::PublicKey| Standing {
        agent,
        model: "H200 SXM".into(),
        simulated: false,
        latest_proof: Some(LatestProof {
            record_id: 1,
            accepted: true,
            proves_model: true,
            recorded_at_ms: pog_proof::timing::now_ms().saturating_sub(60_000),
        }),
    };
    let mut registry = std::collections::BTreeMap::new();
    for n in 1..=4 {
        let agent = match n {
            4 => pog_signed::Identity::from_seed([9; 32]).public_key(),
            _ => me.clone(),
        };
        let uuid = pog_signed::GpuUuid::new(format!("GPU-fuzz-{n}")).map_err(|e| e.to_string())?;
        registry.insert(uuid, proven(agent));
    }
    let deposits: std::collections::BTreeMap<pog_signed::PublicKey, u128> =
        [(me.clone(), 100_000_000)].into();
    let market = Market::open(None, &me)
        .map_err(|e| e.to_string())?
        .with_standing(std::sync::Arc::new(registry))
        .with_deposits(std::sync::Arc::new(deposits))
        .with_vouchers(std::sync::Arc::new(SigningEscrow))
        .with_settlements(std::sync::Arc::new(
            pog_validator::settlement::Settlements::open(None, Default::default())
                .map_err(|e| e.to_string())?,
        ));
    let resting = serde_json::json!({"validator": me, "order": {"id": "o-1", "owner": me,
        "side": "bid", "class": "H200 SXM", "quantity": 8, "price_micro_usd": 3_000_000},
        "expires_at_ms": pog_proof::timing::now_ms() + 3_600_000});
    market
        .submit(&seal(SUBMIT_KIND, resting.to_string().as_bytes()))
        .map_err(|e| format!("the resting order was refused: {e}"))?;
    let submit = market.submit(&seal(SUBMIT_KIND, body)).is_ok();
    let cancel = market.cancel(&seal(CANCEL_KIND, body)).is_ok();
    let clear = market.clear(&seal(CLEAR_KIND, body)).is_ok();
    let withdraw = market
        .withdraw(&seal(pog_validator::settlement::WITHDRAW_KIND, body))
        .is_ok();
    let undelivered = market
        .report_undelivered(&seal(pog_validator::settlement::UNDELIVERED_KIND, body))
        .is_ok();
    Ok([
        (submit, "submit"),
        (cancel, "cancel"),
        (clear, "clear"),
        (withdraw, "withdraw"),
        (undelivered, "undelivered"),
    ]
    .map(|(ok, name)| if ok { name } else { "-" })
    .join(" "))
}

/// Valid bodies of an agent's two reports for the [`report`] harness to mutate: an inspection
/// summary and benchmark figures of `GPU-fuzz`, the GPU the harnesses' key registers.
pub fn report_seeds() -> Vec<Vec<u8>> {
    [
        serde_json::json!({"version": 1, "gpu_uuid": "GPU-fuzz", "model": "H200 SXM",
            "bus_id": "0000:00:06.0", "driver_version": "580.95.05", "verdict": "warn",
            "findings": [{"code": "pcie.link", "severity": "warning",
                "message": "the link trained below its maximum"}],
            "provenance": "self_reported", "recorded_at_ms": 1_796_000_000_000u64}),
        serde_json::json!({"version": 1, "gpu_uuid": "GPU-fuzz", "suite": "quick",
            "figures": [{"name": "gemm_bf16_n8192_tflops", "value": 741.25, "unit": "TFLOPS",
                "method": "8192³ BF16 GEMM, median of 10 timed runs"}],
            "provenance": "self_reported", "recorded_at_ms": 1_796_000_000_000u64}),
    ]
    .iter()
    .map(|v| v.to_string().into_bytes())
    .collect()
}

/// Bytes as the body of an agent's report, signed by the harnesses' key as an `inspection`
/// and as a `benchmark` envelope, each taken by a fresh in-memory report desk and record store (no ledger) with
/// `GPU-fuzz` registered to that key, as `POST /v1/reports` takes it: the size, the envelope,
/// the signature, the body parsed with unknown fields refused, its values, the owner, the
/// ledger entry, the content id, the limit, the store; then the same report again, which must
/// be held already. Returns which kinds were recorded, e.g. `"inspection -"`; refusals are
/// answers, never panics.
pub fn report(body: &[u8]) -> Result<String, String> {
    use pog_validator::registry::Registry;
    use pog_validator::reports::DEFAULT_REPORT_KIB_PER_SOURCE_PER_HOUR;
    use pog_validator::reports::{ReportDesk, DEFAULT_REPORT_KIB_PER_GPU_PER_HOUR};
    use pog_validator::store::RecordStore;
    let registry = Registry::open(None).map_err(|e| e.to_string())?;
    let records = RecordStore::new(Identity::from_seed([0x5f; 32]), registry);
    let desk = ReportDesk::new(
        DEFAULT_REPORT_KIB_PER_GPU_PER_HOUR,
        DEFAULT_REPORT_KIB_PER_SOURCE_PER_HOUR,
    );
    let claim = wire::GpuClaim {
        uuid: fuzz_gpu(),
        model: "H200 SXM".into(),
        bus_id: "0000:00:06.0".into(),
        simulated: false,
    };
    records
        .registry()
        .register(
            &identity().public_key(),
            ("https://agent.example", None),
            &[claim],
            0,
            64,
        )
        .map_err(|e| e.to_string())?;
    let mut taken = Vec::new();
    for kind in [
        RecordKind::Inspection.wire_kind(),
        RecordKind::Benchmark.wire_kind(),
    ] {
        let sealed = seal(kind, body);
        let from = std::net::IpAddr::from([203, 0, 113, 9]);
        let recorded = match desk.accept(&records, &sealed, from) {
            Ok(receipt) => {
                let again = desk
                    .accept(&records, &sealed, from)
                    .map_err(|e| format!("a report taken once is refused the second time: {e}"))?;
                if !receipt.recorded || again.recorded || again.id != receipt.id {
                    return Err(format!("a replay was recorded anew: {receipt:?} {again:?}"));
                }
                true
            }
            Err(_) => false,
        };
        taken.push(if recorded { kind } else { "-" });
    }
    Ok(taken.join(" "))
}
