//! Every tampering case on a real exported bundle is detected, and named: one byte changed in
//! a record, a record dropped, records reordered, a fork, a rollback, a record signed by an
//! unknown key, a checkpoint not signed by the log, a forged cosignature; and a witness
//! refuses to cosign a fork.

use pog_ledger::bundle::{
    check_tail, compare_with_earlier, verify_bundle, verify_bundle_from, Bundle, ChainState,
    Problem, WitnessPolicy,
};
use pog_ledger::checkpoint::SignedCheckpoint;
use pog_ledger::entry::Entry;

use pog_ledger::note::{NoteSigner, Verifier, ALG_COSIGNATURE_V1, ALG_ED25519};
use pog_ledger::store::Ledger;
use pog_ledger::witness::{AddCheckpoint, Refusal, Witness};
use pog_signed::Identity;
use pog_signed::RecordKind;
use serde_json::json;

const ORIGIN: &str = "validator.pog.test/ledger";
const GPU: &str = "GPU-0621aea7-0000-4000-8000-000000000001";
const VALIDATOR_SEED: [u8; 32] = [11; 32];
const AGENT_SEED: [u8; 32] = [22; 32];

struct World {
    _dir: tempfile::TempDir,
    ledger: Ledger,
    log_key: NoteSigner,
    witnesses: Vec<Witness>,
    /// Checkpoint (with cosignatures) at size 8, and the latest.
    early: SignedCheckpoint,
    latest: SignedCheckpoint,
}

fn validator() -> Identity {
    Identity::from_seed(VALIDATOR_SEED)
}

fn agent() -> Identity {
    Identity::from_seed(AGENT_SEED)
}

fn registration(gpu: &str, agent_key: &str, event: &str) -> Entry {
    let body = json!({
        "version": 2, "event": event, "gpu_uuid": gpu, "agent": agent_key,
        "model": "H200 SXM", "bus_id": "0000:00:06.0", "simulated": false,
        "reason": null, "recorded_at_ms": 1_796_000_000_000u64,
    });
    Entry::from_envelope(&validator().seal("registration", &body).unwrap()).unwrap()
}

fn proof_round(gpu: &str, n: u64) -> Entry {
    let body = json!({
        "version": 2, "challenge_id": format!("c{n}"), "gpu_uuid": gpu, "accepted": true,
        "expected_ms": 41.5, "recorded_at_ms": 1_796_000_000_000u64 + n,
    });
    Entry::from_envelope(&validator().seal("record", &body).unwrap()).unwrap()
}

fn health(gpu: &str, who: &Identity, n: u64) -> Entry {
    // The shape of `pog_records::reports::HealthSummary`: the ledger reads no body but
    // its `gpu_uuid`.
    let body = json!({
        "version": 1, "gpu_uuid": gpu, "window_start_ms": n * 60_000,
        "window_end_ms": (n + 1) * 60_000, "samples": 60, "temperature_max_c": 61.0,
        "power_mean_w": 420.5, "utilization_mean_pct": 97.0, "throttle_reasons": [],
        "ecc_uncorrected": 0, "xid_errors": [], "anomalies": [], "provenance": "self_reported",
    });
    Entry::from_envelope(&who.seal("health", &body).unwrap()).unwrap()
}

/// A ledger with two GPUs' interleaved histories, two witnesses that cosigned an early and a
/// late checkpoint.
fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(dir.path()).unwrap();
    let log_key = NoteSigner::new(ORIGIN, ALG_ED25519, VALIDATOR_SEED).unwrap();
    let mut witnesses: Vec<Witness> = (0..2u8)
        .map(|i| {
            let w = NoteSigner::new(
                &format!("witness{i}.pog.test"),
                ALG_COSIGNATURE_V1,
                [40 + i; 32],
            );
            Witness::new(w.unwrap())
        })
        .collect();
    for w in &mut witnesses {
        w.follow(log_key.verifier().clone(), None);
    }
    let agent_hex = agent().public_key();
    let other = "GPU-other";
    ledger
        .append(vec![
            registration(GPU, &agent_hex, "new"),
            registration(other, &agent_hex, "new"),
            proof_round(GPU, 1),
            health(GPU, &agent(), 1),
        ])
        .unwrap();
    ledger
        .append(vec![proof_round(other, 2), proof_round(GPU, 3)])
        .unwrap();
    ledger
        .append(vec![health(GPU, &agent(), 4), proof_round(other, 5)])
        .unwrap();
    let early = cosigned(&ledger, &log_key, &mut witnesses, 0);
    assert_eq!(early.checkpoint.size, 8);
    ledger
        .append(vec![
            proof_round(GPU, 6),
            health(other, &agent(), 7),
            proof_round(GPU, 8),
        ])
        .unwrap();
    ledger.append(vec![health(GPU, &agent(), 9)]).unwrap();
    let latest = cosigned(&ledger, &log_key, &mut witnesses, 8);
    World {
        _dir: dir,
        ledger,
        log_key,
        witnesses,
        early,
        latest,
    }
}

/// Signs a checkpoint of the ledger now and gets every witness's cosignature on it.
fn cosigned(
    ledger: &Ledger,
    log_key: &NoteSigner,
    witnesses: &mut [Witness],
    old: u64,
) -> SignedCheckpoint {
    let mut cp = ledger.log().checkpoint(log_key).unwrap();
    let request = AddCheckpoint {
        old_size: old,
        proof: ledger
            .log()
            .consistency_proof(old, cp.checkpoint.size)
            .unwrap(),
        checkpoint: cp.to_text().into_bytes(),
    };
    for w in witnesses.iter_mut() {
        let line = w.add_checkpoint(&request, 1_796_000_100).unwrap();
        cp.note.push_signature(line);
    }
    cp
}

fn policy(w: &World, quorum: usize) -> WitnessPolicy {
    WitnessPolicy {
        keys: w.witnesses.iter().map(|w| w.verifier().clone()).collect(),
        quorum,
    }
}

/// The bundle as a holder receives it: exported, written as JSON, read back.
fn exported(w: &World, since: Option<u64>) -> Bundle {
    let bundle = Bundle::export(&w.ledger, GPU, &w.latest, since).unwrap();
    Bundle::parse(bundle.to_json().as_bytes()).unwrap()
}

fn check(w: &World, bundle: &Bundle, since: Option<&SignedCheckpoint>) -> Vec<Problem> {
    verify_bundle(bundle, w.log_key.verifier(), &policy(w, 2), since).problems
}

#[test]
fn an_untouched_bundle_verifies() {
    let w = world();
    let bundle = exported(&w, Some(8));
    assert_eq!(bundle.records.len(), 8);
    let report = verify_bundle(
        &bundle,
        w.log_key.verifier(),
        &policy(&w, 2),
        Some(&w.early),
    );
    assert!(report.ok(), "{:?}", report.problems);
    assert_eq!(report.cosigned_by.len(), 2);
    assert_eq!(report.size, 12);
    let signed_by: Vec<&str> = report.records.iter().map(|r| r.signed_by).collect();
    assert_eq!(
        signed_by,
        [
            "validator",
            "validator",
            "agent",
            "validator",
            "agent",
            "validator",
            "validator",
            "agent"
        ]
    );
    // The holder's vkeys, as text, are all it needs.
    let log = Verifier::parse(&w.log_key.verifier().to_vkey()).unwrap();
    assert!(verify_bundle(&bundle, &log, &WitnessPolicy::default(), None).ok());
}

#[test]
fn one_byte_changed_in_a_record() {
    let w = world();
    let clean = exported(&w, None);
    // Every byte of every record, changed one at a time: never accepted.
    for (pos, r) in clean.records.iter().enumerate() {
        for at in 0..r.entry.len() {
            let mut b = clean.clone();
            b.records[pos].entry[at] ^= 0x20;
            let problems = check(&w, &b, None);
            assert!(
                problems.contains(&Problem::NotIncluded {
                    position: pos,
                    index: r.index
                }),
                "record {pos} byte {at}: {problems:?}"
            );
        }
    }
    // A change in the body: named as a modification of that record.
    let mut b = clean.clone();
    let at = b.records[3].entry.len() - 5;
    b.records[3].entry[at] ^= 0x01;
    let problems = check(&w, &b, None);
    assert!(
        matches!(
            problems[..],
            [
                Problem::NotIncluded { position: 3, .. },
                Problem::Modified { position: 3, .. }
            ]
        ),
        "{problems:?}"
    );
    assert!(problems[1].to_string().contains("was modified"));
}

#[test]
fn a_record_dropped() {
    let w = world();
    for drop in [0usize, 3] {
        let mut b = exported(&w, None);
        let gone = b.records.remove(drop);
        let problems = check(&w, &b, None);
        assert!(
            matches!(problems[0], Problem::Dropped { position, expected, missing: 1, .. } if position == drop && expected == drop as u64),
            "dropping {} : {problems:?}",
            gone.index
        );
        // Dropping the registration also leaves the agent's records without a known signer;
        // dropping any other record is that one problem only.
        if drop != 0 {
            assert_eq!(problems.len(), 1, "{problems:?}");
        }
    }
}

#[test]
fn records_reordered() {
    let w = world();
    let mut b = exported(&w, None);
    b.records.swap(2, 3);
    let problems = check(&w, &b, None);
    assert!(
        problems
            .iter()
            .any(|p| matches!(p, Problem::Reordered { position: 3, .. })),
        "{problems:?}"
    );
    // Swapping their indexes too (to look in order) breaks their inclusion proofs.
    let mut b = exported(&w, None);
    let (i2, i3) = (b.records[2].index, b.records[3].index);
    b.records.swap(2, 3);
    b.records[2].index = i2;
    b.records[3].index = i3;
    let problems = check(&w, &b, None);
    assert!(
        problems.contains(&Problem::NotIncluded {
            position: 2,
            index: i2
        }),
        "{problems:?}"
    );
}

#[test]
fn a_fork_is_caught_by_the_holder_and_by_every_witness() {
    let mut w = world();
    // The validator rewrites history: a second ledger with the same first entries but one
    // record changed, signed with the same key, at the same size as the holder's checkpoint.
    let dir = tempfile::tempdir().unwrap();
    let fork = Ledger::open(dir.path()).unwrap();
    let agent_hex = agent().public_key();
    fork.append(vec![
        registration(GPU, &agent_hex, "new"),
        registration("GPU-other", &agent_hex, "new"),
        proof_round(GPU, 1),
        health(GPU, &agent(), 1),
        proof_round("GPU-other", 2),
        proof_round(GPU, 333), // rewritten
        health(GPU, &agent(), 4),
        proof_round("GPU-other", 5),
    ])
    .unwrap();
    let forked_cp = fork.log().checkpoint(&w.log_key).unwrap();
    assert_eq!(forked_cp.checkpoint.size, w.early.checkpoint.size);
    let bundle = Bundle::export(&fork, GPU, &forked_cp, None).unwrap();
    let problems = verify_bundle(
        &bundle,
        w.log_key.verifier(),
        &WitnessPolicy::default(),
        Some(&w.early),
    )
    .problems;
    assert!(
        matches!(problems[..], [Problem::Fork { size: 8, .. }]),
        "{problems:?}"
    );
    assert!(problems[0].to_string().starts_with("fork"));
    // Growing the fork past the holder's size: the consistency proof fails.
    fork.append(vec![proof_round(GPU, 6), proof_round(GPU, 7)])
        .unwrap();
    let grown = fork.log().checkpoint(&w.log_key).unwrap();
    let bundle = Bundle::export(&fork, GPU, &grown, Some(8)).unwrap();
    let problems = verify_bundle(
        &bundle,
        w.log_key.verifier(),
        &WitnessPolicy::default(),
        Some(&w.early),
    )
    .problems;
    assert_eq!(problems, [Problem::Inconsistent { from_size: 8 }]);
    // Without witnesses' cosignatures on the fork, a holder requiring a quorum refuses it.
    let problems = verify_bundle(&bundle, w.log_key.verifier(), &policy(&w, 1), None).problems;
    assert_eq!(problems, [Problem::Quorum { have: 0, need: 1 }]);
    // And the witnesses, who cosigned the real size-12 tree, refuse the fork at size 10
    // (behind what they cosigned) and at size 12 (another root).
    // (A request from the fork's own size: one from 12 is a bad request before anything.)
    let ten = AddCheckpoint {
        old_size: 10,
        proof: vec![],
        checkpoint: grown.to_text().into_bytes(),
    };
    fork.append(vec![proof_round(GPU, 10), proof_round(GPU, 11)])
        .unwrap();
    let twelve = fork.log().checkpoint(&w.log_key).unwrap();
    assert_eq!(twelve.checkpoint.size, 12);
    let twelve = AddCheckpoint {
        old_size: 12,
        proof: vec![],
        checkpoint: twelve.to_text().into_bytes(),
    };
    for witness in &mut w.witnesses {
        assert_eq!(
            witness.add_checkpoint(&ten, 1),
            Err(Refusal::Rollback {
                latest: 12,
                new: 10
            })
        );
        assert_eq!(
            witness.add_checkpoint(&twelve, 1),
            Err(Refusal::Fork { size: 12 })
        );
        assert_eq!(
            witness.latest(ORIGIN).unwrap().root,
            w.latest.checkpoint.root
        );
    }
}

#[test]
fn a_rollback() {
    let w = world();
    // The holder kept the latest checkpoint; the log now serves the older one.
    let old = Bundle::export(&w.ledger, GPU, &w.early, None).unwrap();
    let problems = check(&w, &old, Some(&w.latest));
    assert_eq!(
        problems,
        [Problem::Rollback {
            held_size: 12,
            bundle_size: 8
        }]
    );
    // Without the proof from the holder's size, the bundle is not accepted either.
    let b = exported(&w, None);
    assert_eq!(
        check(&w, &b, Some(&w.early)),
        [Problem::ConsistencyMissing { from_size: 8 }]
    );
}

#[test]
fn a_record_signed_by_an_unknown_key() {
    let w = world();
    // An agent the validator never registered for this GPU slips a health record in.
    let stranger = Identity::from_seed([99; 32]);
    w.ledger.append(vec![health(GPU, &stranger, 50)]).unwrap();
    // A proof round signed by a key other than the validator's.
    let impostor_round = {
        let body = json!({"version": 2, "challenge_id": "x", "gpu_uuid": GPU});
        Entry::from_envelope(&stranger.seal("record", &body).unwrap()).unwrap()
    };
    w.ledger.append(vec![impostor_round]).unwrap();
    let cp = w.ledger.log().checkpoint(&w.log_key).unwrap();
    let b = Bundle::export(&w.ledger, GPU, &cp, None).unwrap();
    let problems = check(&w, &b, None);
    let unknown: Vec<_> = problems
        .iter()
        .filter_map(|p| match p {
            Problem::UnknownSigner {
                position,
                kind,
                signer,
                ..
            } => Some((*position, *kind, signer.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        unknown,
        [
            (8, RecordKind::Health, stranger.public_key()),
            (9, RecordKind::ProofRound, stranger.public_key())
        ]
    );
    // A checkpoint signed by another key than the log's.
    let other = NoteSigner::new(ORIGIN, ALG_ED25519, [77; 32]).unwrap();
    let forged = w.ledger.log().checkpoint(&other).unwrap();
    let b = Bundle::export(&w.ledger, GPU, &forged, None).unwrap();
    let problems =
        verify_bundle(&b, w.log_key.verifier(), &WitnessPolicy::default(), None).problems;
    assert!(
        matches!(&problems[0], Problem::CheckpointSignature { why } if why.contains("not signed by the log key")),
        "{problems:?}"
    );
    // Records of a GPU whose registration was released are no longer the agent's to sign.
    w.ledger
        .append(vec![
            registration(GPU, &agent().public_key(), "released"),
            health(GPU, &agent(), 60),
        ])
        .unwrap();
    let cp = w.ledger.log().checkpoint(&w.log_key).unwrap();
    let b = Bundle::export(&w.ledger, GPU, &cp, None).unwrap();
    let problems = check(&w, &b, None);
    assert!(
        problems.iter().any(|p| matches!(
            p,
            Problem::UnknownSigner {
                position: 11,
                kind: RecordKind::Health,
                ..
            }
        )),
        "{problems:?}"
    );
}

#[test]
fn a_forged_cosignature_and_a_missing_quorum() {
    let w = world();
    let mut b = exported(&w, None);
    let mut text = b.checkpoint.to_text();
    // Flip one character of the last signature line (the second witness's cosignature).
    let at = text.len() - 10;
    let flipped = if &text[at..at + 1] == "A" { "B" } else { "A" };
    text.replace_range(at..at + 1, flipped);
    b.checkpoint = SignedCheckpoint::parse(text.as_bytes()).unwrap();
    let problems = check(&w, &b, None);
    assert_eq!(
        problems,
        [
            Problem::BadCosignature {
                witness: "witness1.pog.test".into()
            },
            Problem::Quorum { have: 1, need: 2 }
        ]
    );
}

#[test]
fn records_of_another_gpu_are_refused() {
    let w = world();
    let mut b = exported(&w, None);
    b.gpu_uuid = "GPU-other".into();
    let problems = check(&w, &b, None);
    assert!(
        problems
            .iter()
            .all(|p| matches!(p, Problem::WrongGpu { .. }))
            && problems.len() == 8,
        "{problems:?}"
    );
}

#[test]
fn the_newest_records_dropped_are_caught_against_an_earlier_bundle() {
    let w = world();
    let earlier = Bundle::export(&w.ledger, GPU, &w.latest, None).unwrap();
    // Later: two more records of the GPU; the exporter leaves out the newest two (a valid
    // chain on its own), and, in another export, changes one that the holder saw before.
    w.ledger
        .append(vec![proof_round(GPU, 20), proof_round(GPU, 21)])
        .unwrap();
    let cp = w.ledger.log().checkpoint(&w.log_key).unwrap();
    let full = Bundle::export(&w.ledger, GPU, &cp, Some(12)).unwrap();
    assert!(compare_with_earlier(&earlier, &full).is_empty());
    let mut cut = full.clone();
    cut.records.truncate(earlier.records.len() - 2);
    let report = verify_bundle(
        &cut,
        w.log_key.verifier(),
        &WitnessPolicy::default(),
        Some(&w.latest),
    );
    assert!(
        report.ok(),
        "the chain alone cannot tell: {:?}",
        report.problems
    );
    let last = &earlier.records[earlier.records.len() - 1];
    assert_eq!(
        compare_with_earlier(&earlier, &cut),
        [
            Problem::MissingSince {
                index: earlier.records[6].index,
                gpu_seq: 6
            },
            Problem::MissingSince {
                index: last.index,
                gpu_seq: 7
            },
        ]
    );
    let mut changed = full.clone();
    changed.records[1].entry[10] ^= 1;
    assert_eq!(
        compare_with_earlier(&earlier, &changed),
        [Problem::ChangedSince {
            index: earlier.records[1].index
        }]
    );
}

#[test]
fn the_newest_records_dropped_are_caught_by_reading_the_logs_tail() {
    let w = world();
    w.ledger
        .append(vec![proof_round(GPU, 20), proof_round("GPU-other", 21)])
        .unwrap();
    w.ledger.append(vec![proof_round(GPU, 22)]).unwrap();
    let cp = w.ledger.log().checkpoint(&w.log_key).unwrap();
    let full = Bundle::export(&w.ledger, GPU, &cp, None).unwrap();
    // The whole history: nothing of the GPU after its last record.
    assert_eq!(check_tail(&full, None, w.ledger.log()).unwrap(), []);
    // The newest two left out: a valid chain, but the log's tail holds them.
    let mut cut = full.clone();
    cut.records.truncate(full.records.len() - 2);
    assert!(verify_bundle(&cut, w.log_key.verifier(), &WitnessPolicy::default(), None).ok());
    let n = full.records.len();
    assert_eq!(
        check_tail(&cut, None, w.ledger.log()).unwrap(),
        [
            Problem::MissingNewest {
                index: full.records[n - 2].index,
                gpu_seq: n as u64 - 2
            },
            Problem::MissingNewest {
                index: full.records[n - 1].index,
                gpu_seq: n as u64 - 1
            },
        ]
    );
    // Tiles of another tree of the same size do not pass for the checkpoint's.
    let dir = tempfile::tempdir().unwrap();
    let other = Ledger::open(dir.path()).unwrap();
    let size = cp.checkpoint.size;
    other
        .append((0..size).map(|n| proof_round("GPU-other", n)).collect())
        .unwrap();
    let differ = check_tail(&cut, None, other.log()).unwrap();
    assert!(
        matches!(differ[..], [Problem::TilesDiffer { .. }]),
        "{differ:?}"
    );
    // A source that cannot serve the tiles is an error, not a verdict.
    let empty = tempfile::tempdir().unwrap();
    let source = pog_ledger::serve::DirSource(empty.path().to_path_buf());
    assert!(check_tail(&cut, None, source).is_err());
}

#[test]
fn a_history_verified_in_pages_and_across_runs_catches_gaps_forks_and_omissions() {
    let w = world();
    let policy = policy(&w, 2);
    // The first run: the early checkpoint's history in pages of two records.
    let mut state: Option<ChainState> = None;
    let mut held: Option<SignedCheckpoint> = None;
    let mut after = None;
    let mut pages = 0;
    loop {
        let since = held.as_ref().map(|h| h.checkpoint.size);
        let page = Bundle::export_page(&w.ledger, GPU, &w.early, since, after, 2).unwrap();
        let report = verify_bundle_from(
            &page,
            w.log_key.verifier(),
            &policy,
            held.as_ref(),
            state.as_ref(),
        );
        assert!(report.ok(), "page {pages}: {:?}", report.problems);
        pages += 1;
        state = Some(report.chain);
        held = Some(page.checkpoint.clone());
        match page.next_after {
            Some(last) => after = Some(last),
            None => break,
        }
    }
    let whole = exported(&w, None);
    let early_records = whole.records.iter().filter(|r| r.index < 8).count();
    assert_eq!(pages, early_records.div_ceil(2));
    let first_run = state.clone().unwrap();
    assert_eq!(
        first_run.last.unwrap().index,
        whole.records[early_records - 1].index
    );
    assert_eq!(
        first_run.agents,
        vec![agent()
            .public_key()
            .parse::<pog_signed::PublicKey>()
            .unwrap()]
    );

    // The next run: only what is new since, against the earlier checkpoint; agent-signed
    // records verify with the agents the first run learned.
    let last = first_run.last.map(|l| l.index);
    let new = Bundle::export_page(&w.ledger, GPU, &w.latest, Some(8), last, 100).unwrap();
    assert_eq!(new.records.len(), whole.records.len() - early_records);
    let report = verify_bundle_from(
        &new,
        w.log_key.verifier(),
        &policy,
        held.as_ref(),
        Some(&first_run),
    );
    assert!(report.ok(), "{:?}", report.problems);
    assert_eq!(
        report.chain.last.unwrap().index,
        whole.records.last().unwrap().index
    );
    // Nothing new is no problem for a continuation, and the tail check starts after what was
    // verified: it finds nothing.
    let nothing = Bundle::export_page(
        &w.ledger,
        GPU,
        &w.latest,
        Some(w.latest.checkpoint.size),
        report.chain.last.map(|l| l.index),
        100,
    )
    .unwrap();
    assert!(nothing.records.is_empty());
    let again = verify_bundle_from(
        &nothing,
        w.log_key.verifier(),
        &policy,
        Some(&w.latest),
        Some(&report.chain),
    );
    assert!(again.ok(), "{:?}", again.problems);
    assert_eq!(
        check_tail(&nothing, report.chain.last, w.ledger.log()).unwrap(),
        []
    );
    // ... but an empty continuation that hides new records is caught by the tail, reading
    // from after the last record verified.
    let hiding = Bundle {
        records: vec![],
        next_after: None,
        ..new.clone()
    };
    let tail = check_tail(&hiding, first_run.last, w.ledger.log()).unwrap();
    assert_eq!(tail.len(), new.records.len(), "{tail:?}");

    // A continuation that skips the GPU's next record: dropped, named.
    let mut gap = new.clone();
    gap.records.remove(0);
    let report = verify_bundle_from(
        &gap,
        w.log_key.verifier(),
        &policy,
        held.as_ref(),
        Some(&first_run),
    );
    assert!(
        matches!(report.problems[..], [Problem::Dropped { missing: 1, .. }]),
        "{:?}",
        report.problems
    );
    // Records the holder verified already, served again: out of order.
    let replayed = Bundle::export_page(&w.ledger, GPU, &w.latest, Some(8), None, 100).unwrap();
    let report = verify_bundle_from(
        &replayed,
        w.log_key.verifier(),
        &policy,
        held.as_ref(),
        Some(&first_run),
    );
    assert!(
        report
            .problems
            .iter()
            .any(|p| matches!(p, Problem::Reordered { .. })),
        "{:?}",
        report.problems
    );
    // A later run against a checkpoint smaller than the one kept: rolled back.
    let report = verify_bundle_from(
        &nothing,
        w.log_key.verifier(),
        &policy,
        Some(&w.latest),
        Some(&first_run),
    );
    assert!(report.ok());
    let behind = Bundle::export_page(&w.ledger, GPU, &w.early, None, last, 100).unwrap();
    let report = verify_bundle_from(
        &behind,
        w.log_key.verifier(),
        &policy,
        Some(&w.latest),
        Some(&first_run),
    );
    assert!(
        report
            .problems
            .iter()
            .any(|p| matches!(p, Problem::Rollback { .. })),
        "{:?}",
        report.problems
    );
    // A fresh verification (no state) of an empty bundle still fails.
    let report = verify_bundle_from(&nothing, w.log_key.verifier(), &policy, None, None);
    assert!(report.problems.contains(&Problem::NoRecords));
}
