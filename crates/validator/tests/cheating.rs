//! Every challenge leaves one bounded record, and every failure counts: a cheater answering
//! wrong values in most rounds, run by the validator's own schedule over loopback with its
//! ledger and pricing, is on record for each wrong answer, and its score says so.

mod common;

use common::*;
use pog_agent::misbehaviour::Cheat;
use pog_records::Policy;
use pog_signed::{Envelope, RecordKind};
use pog_validator::pricing::ScoreView;
use pog_validator::validator::Validator;
use std::time::Duration;

/// The validator's proof records of `uuid`, oldest first: (row, JSON body).
fn proof_records(v: &Validator, uuid: &str) -> Vec<(i64, serde_json::Value)> {
    let mut rows = v.registry().latest_records(uuid, 1000).unwrap();
    rows.sort_by_key(|(id, _)| *id);
    rows.into_iter()
        .filter_map(|(id, json)| {
            let envelope: Envelope = serde_json::from_str(&json).unwrap();
            (envelope.kind == RecordKind::ProofRound.wire_kind())
                .then(|| (id, serde_json::from_str(&envelope.body).unwrap()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cheater_wrong_in_four_rounds_of_five_is_on_record_for_each_and_scored_for_it() {
    let dir = tempfile::tempdir().unwrap();
    // Its registry and market in `dir`, its ledger, and the pricing running on after the
    // schedule stops, to take in the last rounds.
    let h = Harness::new()
        .stored_in(dir.path())
        .with_ledger(&dir.path().join("ledger"))
        .with_pricing()
        .serve()
        .await;
    let (v, url) = (&h.v, &h.url);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    // Every wrong answer fails all 1,024 spot checks: listed whole, its record would be
    // ~124 KB, past the ledger's 64 KiB entry limit, and the round would leave no record.
    let status = h
        .agent(51, vec![claim("GPU-cheat")])
        .cheating(Cheat::HonestEvery(5))
        .await
        .status();
    assert_eq!(status, 200);
    let policy = Policy {
        samples: 1024,
        ..policy()
    };
    let schedule = tokio::spawn(pog_validator::schedule::run(
        pog_validator::schedule::Rounds::new(
            v.clone(),
            pog_validator::schedule::Schedule::every(Duration::from_millis(150), policy),
            stopped,
        ),
    ));
    for _ in 0..800 {
        if proof_records(v, "GPU-cheat").len() >= 25 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let _ = stop.send(true);
    schedule.await.unwrap();
    let records = proof_records(v, "GPU-cheat");
    assert!(records.len() >= 25, "only {} proof records", records.len());
    // One record per challenge: the cheater answered its 1st to 4th wrong, its 5th right, ….
    for (i, (_, r)) in records.iter().enumerate() {
        let honest_turn = (i + 1) % 5 == 0;
        assert_eq!(r["accepted"], honest_turn, "record {i}: {r}");
        let outcome = &r["outcome"];
        if honest_turn {
            assert_eq!(outcome["rejected_total"], 0, "record {i}");
        } else {
            // Counted whole, listed in part, the rest digested. (Junk can hit a right value
            // now and then: nearly every check fails.)
            let wrong = outcome["rejected_total"].as_u64().unwrap();
            assert!((1000..=1024).contains(&wrong), "record {i}: {wrong} wrong");
            assert_eq!(
                outcome["rejected"].as_array().unwrap().len(),
                pog_proof::session::REJECTIONS_LISTED
            );
            assert_eq!(outcome["rejected_digest"].as_str().unwrap().len(), 64);
        }
    }
    // Every record is in the log beside the registration, none refused for its size.
    let logged = v
        .records()
        .ledger()
        .unwrap()
        .ledger()
        .gpu_entries("GPU-cheat")
        .unwrap();
    assert!(
        logged.len() > records.len(),
        "{} entries logged",
        logged.len()
    );
    // Of its last 20 rounds, 4 proven and 16 answered wrongly.
    // Once the pricing has taken in the last round, the score reads what it did.
    let last = records.last().unwrap().0;
    let mut view: Option<ScoreView> = None;
    for _ in 0..400 {
        let read: ScoreView = reqwest::get(format!("{url}/v1/scores/GPU-cheat"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let done = read.assessment.latest_record == Some(last);
        view = Some(read);
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let view = view.unwrap();
    let a = &view.assessment;
    assert_eq!(
        a.latest_record,
        Some(last),
        "the pricing never took in the last round"
    );
    assert_eq!((a.proofs_passed, a.proofs_total), (4, 20), "{a:?}");
    let uptime = a.uptime.as_ref().unwrap();
    assert_eq!((uptime.proven, uptime.failed, uptime.rounds), (4, 16, 20));
    assert_eq!(uptime.fraction, 0.2);
    assert_eq!(a.detail.reliability.factor, 0.0);
    let note = a
        .reasons
        .iter()
        .find(|r| r.starts_with("reliability"))
        .expect("a reliability reason");
    assert!(
        note.contains("proofs: 4 of 20 passed") && note.contains("16 answered wrongly"),
        "{note}"
    );
}
