//! The validator's ledger over loopback: every record it signs (registration, proof round,
//! memory round) is in the log, in the order stored, before it is in the registry; the log is
//! served as tlog-tiles under `/ledger/`; checkpoints are signed when the log grew and
//! cosigned by witnesses; a ledger that cannot append refuses the record.

mod common;

use common::VALIDATOR_SEED;
use common::{claim, listen, policy, Harness};
use pog_ledger::bundle::{verify_bundle, Bundle, WitnessPolicy};
use pog_ledger::checkpoint::SignedCheckpoint;
use pog_ledger::entry::Entry;
use pog_records::MemoryPolicy;
use pog_records::{Gemm, Memory};

use pog_ledger::note::{NoteSigner, Verifier, ALG_COSIGNATURE_V1};
use pog_ledger::store::Ledger;
use pog_ledger::tiles::{tiles_of, TileError, TileId, TileSource, TiledTree};
use pog_ledger::witness::Witness;
use pog_net::serve::Limits;
use pog_signed::{Identity, RecordKind};
use pog_validator::ledger::{ValidatorLedger, WitnessAnswer, WitnessBudget, WitnessTarget};
use pog_validator::validator::{Validator, ValidatorError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

const GPU: &str = "GPU-ledger-0";

/// The registry's stored envelopes of `uuid`, oldest first.
fn stored(v: &Validator, uuid: &str) -> Vec<pog_signed::Envelope> {
    v.registry()
        .records(uuid, 0, 1000)
        .unwrap()
        .into_iter()
        .map(|(_, json)| serde_json::from_str(&json).unwrap())
        .collect()
}

/// Tiles fetched over HTTP beforehand (the test is async, `TileSource` is not).
struct Fetched(HashMap<String, Vec<u8>>);

impl TileSource for Fetched {
    fn read_tile(&mut self, id: &TileId) -> Result<Vec<u8>, TileError> {
        self.0.get(&id.path()).cloned().ok_or(TileError::Source {
            path: id.path(),
            why: "not fetched".into(),
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_signed_record_is_logged_served_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new().with_ledger(dir.path()).serve().await;
    let (v, url) = (h.v.clone(), h.url.clone());
    let status = h.agent(7, vec![claim(GPU)]).await.status();
    assert_eq!(status, 200);
    let mut policy = policy();
    policy.memory = MemoryPolicy::test_shape(5_000.0);
    for _ in 0..3 {
        assert!(v.challenge::<Gemm>(GPU, &policy).await.unwrap().accepted);
        assert!(v.challenge::<Memory>(GPU, &policy).await.unwrap().accepted);
    }
    let ledger = v.records().ledger().unwrap().clone();

    // The log holds exactly the stored records, byte for byte, in the order stored.
    let envelopes = stored(&v, GPU);
    assert_eq!(
        envelopes.len(),
        7,
        "registration + 3 proof + 3 memory rounds"
    );
    let logged = ledger.ledger().gpu_entries(GPU).unwrap();
    assert_eq!(logged.len(), envelopes.len());
    for (k, ((index, entry), envelope)) in logged.iter().zip(&envelopes).enumerate() {
        assert_eq!(*index, k as u64);
        assert_eq!(entry.gpu_seq, k as u64);
        let expected = Entry::from_envelope(envelope).unwrap();
        assert_eq!(
            (&entry.body, entry.signature),
            (&expected.body, expected.signature)
        );
    }
    let kinds: Vec<RecordKind> = logged.iter().map(|(_, e)| e.kind).collect();
    assert_eq!(kinds[0], RecordKind::Registration);
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == RecordKind::ProofRound)
            .count(),
        3
    );
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == RecordKind::MemoryRound)
            .count(),
        3
    );

    // No checkpoint yet: 404; one is signed when the log grew, not again when it did not.
    let client = reqwest::Client::new();
    let get = |path: String| {
        let client = client.clone();
        let url = url.clone();
        async move {
            client
                .get(format!("{url}/ledger/{path}"))
                .send()
                .await
                .unwrap()
        }
    };
    assert_eq!(get("checkpoint".into()).await.status(), 404);
    let tick = ledger.tick(&client, &[]).await.unwrap();
    assert_eq!((tick.signed, tick.published.is_none()), (Some(7), true));
    assert_eq!(ledger.tick(&client, &[]).await.unwrap().signed, None);

    let r = get("checkpoint".into()).await;
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["cache-control"], "no-cache, max-age=2");
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let log_key = Verifier::parse(&ledger.vkey()).unwrap();
    let checkpoint = SignedCheckpoint::parse_verified(&r.bytes().await.unwrap(), &log_key).unwrap();
    assert_eq!(checkpoint.checkpoint.size, 7);
    assert_eq!(
        checkpoint.checkpoint.origin,
        format!("pog.validator/{}", &v.public_key()[..16])
    );

    // Every tile of the tree over HTTP, immutable; the root and entries computed from them.
    let mut fetched = HashMap::new();
    for id in tiles_of(7) {
        let r = get(id.path()).await;
        assert_eq!(r.status(), 200, "{}", id.path());
        assert_eq!(
            r.headers()["cache-control"],
            "public, max-age=31536000, immutable"
        );
        fetched.insert(id.path(), r.bytes().await.unwrap().to_vec());
    }
    let mut tiled = TiledTree::new(Fetched(fetched), 7);
    assert_eq!(tiled.root().unwrap(), checkpoint.checkpoint.root);
    for (index, entry) in &logged {
        assert_eq!(tiled.entry(*index).unwrap(), entry.encode());
    }
    assert_eq!(
        get("tile/0/001".into()).await.status(),
        404,
        "not in the tree"
    );
    assert_eq!(
        get("tile/0/0.p/7".into()).await.status(),
        404,
        "not the spelling"
    );

    // The GPU's bundle verifies with the log key alone.
    let bundle = Bundle::export(ledger.ledger(), GPU, &checkpoint, None).unwrap();
    let report = verify_bundle(&bundle, &log_key, &WitnessPolicy::default(), None);
    assert!(report.ok(), "{:?}", report.problems);
    assert_eq!(report.records.len(), 7);

    // ... and a holder fetches it alone, page by page, from `GET /v1/bundles/{uuid}`.
    let page = |query: String| {
        let client = client.clone();
        let url = url.clone();
        async move {
            client
                .get(format!("{url}/v1/bundles/{query}"))
                .send()
                .await
                .unwrap()
        }
    };
    let (mut after, mut chain, mut held, mut fetched) = (None::<u64>, None, None, 0);
    loop {
        let query = match after {
            Some(a) => format!("{GPU}?limit=3&after={a}&since=7"),
            None => format!("{GPU}?limit=3"),
        };
        let r = page(query).await;
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["content-type"], "application/json");
        let bundle = Bundle::parse(&r.bytes().await.unwrap()).unwrap();
        assert!(bundle.records.len() <= 3);
        let report = pog_ledger::bundle::verify_bundle_from(
            &bundle,
            &log_key,
            &WitnessPolicy::default(),
            held.as_ref(),
            chain.as_ref(),
        );
        assert!(report.ok(), "{:?}", report.problems);
        fetched += bundle.records.len();
        chain = Some(report.chain);
        held = Some(bundle.checkpoint.clone());
        match bundle.next_after {
            Some(a) => after = Some(a),
            None => break,
        }
    }
    assert_eq!(fetched, 7);
    // A GPU the log never saw: a page without records; bad requests: 400.
    let r = page("GPU-never-seen".into()).await;
    assert_eq!(r.status(), 200);
    assert!(Bundle::parse(&r.bytes().await.unwrap())
        .unwrap()
        .records
        .is_empty());
    for bad in [
        format!("{GPU}?since=8"),
        format!("{GPU}?limit=0"),
        format!("{GPU}?limit=1001"),
        format!("{GPU}?after=x"),
        format!("{GPU}?color=blue"),
        "bad%20uuid".to_string(),
    ] {
        assert_eq!(page(bad.clone()).await.status(), 400, "{bad}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bundle_pages_past_the_concurrency_bound_are_refused_with_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = ValidatorLedger::open(dir.path(), &Identity::from_seed(VALIDATOR_SEED), None)
        .unwrap()
        .with_bundle_pages(0);
    let h = Harness::new()
        .with_ledger_of(std::sync::Arc::new(ledger))
        .serve()
        .await;
    let r = reqwest::get(format!("{}/v1/bundles/{GPU}", h.url))
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "1");
}

/// A witness on loopback (pog-ledger's witness logic behind tlog-witness's endpoint).
/// A witness at `url` whose key is `key` (a hostile or absent one: any cosignature key).
fn target(url: &str, key: &Verifier) -> WitnessTarget {
    WitnessTarget {
        url: url.to_string(),
        key: key.clone(),
    }
}

/// A cosignature key no witness here signs with.
fn stranger(seed: u8) -> Verifier {
    NoteSigner::new(&format!("pog.test/s{seed}"), ALG_COSIGNATURE_V1, [seed; 32])
        .unwrap()
        .verifier()
        .clone()
}

/// A witness following `log`: its URL prefix, its key, and the count of requests it got.
async fn start_witness(
    seed: u8,
    log: &Verifier,
) -> (String, Verifier, Arc<std::sync::atomic::AtomicUsize>) {
    let signer =
        NoteSigner::new(&format!("pog.test/w{seed}"), ALG_COSIGNATURE_V1, [seed; 32]).unwrap();
    let vkey = signer.verifier().clone();
    let mut witness = Witness::new(signer);
    witness.follow(log.clone(), None);
    let witness = Arc::new(Mutex::new(witness));
    let requests = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = requests.clone();
    let router = axum::Router::new().route(
        "/add-checkpoint",
        axum::routing::post(move |body: axum::body::Bytes| {
            let witness = witness.clone();
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            async move {
                let r = pog_ledger::serve::witness_add_checkpoint(
                    &mut witness.lock().unwrap(),
                    &body,
                    1_700_000_000,
                );
                (
                    axum::http::StatusCode::from_u16(r.status).unwrap(),
                    [(axum::http::header::CONTENT_TYPE, r.content_type)],
                    r.body,
                )
            }
        }),
    );
    let (listener, url) = listen().await;
    tokio::spawn(pog_net::http::serve(
        listener,
        router,
        Limits::small_requests(),
    ));
    (url, vkey, requests)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_are_cosigned_and_a_missed_witness_is_asked_again() {
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new().with_ledger(dir.path()).serve().await;
    let (v, url) = (h.v.clone(), h.url.clone());
    let ledger = v.records().ledger().unwrap().clone();
    let log_key = Verifier::parse(&ledger.vkey()).unwrap();
    let (w1, k1, asked1) = start_witness(21, &log_key).await;
    let (w2, k2, _) = start_witness(22, &log_key).await;
    // A third URL where nothing listens yet.
    let (late_listener, late_url) = listen().await;
    drop(late_listener);
    let status = h.agent(8, vec![claim(GPU)]).await.status();
    assert_eq!(status, 200);
    let client = pog_validator::ledger::witness_client().unwrap();
    let witnesses = vec![
        target(&w1, &k1),
        target(&w2, &k2),
        target(&late_url, &stranger(23)),
    ];

    let tick = ledger.tick(&client, &witnesses).await.unwrap();
    assert_eq!(tick.signed, Some(1));
    let published = tick.published.unwrap();
    let cosigned: Vec<bool> = published.witnesses.iter().map(|w| w.cosigned).collect();
    assert_eq!(cosigned, [true, true, false]);
    assert_eq!(
        published.witnesses[2].status, 0,
        "{:?}",
        published.witnesses[2]
    );

    // The log did not grow, but a witness was missed: published again (the one down is
    // backing off, not asked).
    let again = ledger.tick(&client, &witnesses).await.unwrap();
    assert_eq!(again.signed, None);
    let answers: Vec<WitnessAnswer> = again.published.unwrap().witnesses;
    assert!(answers[0].cosigned && answers[1].cosigned && !answers[2].cosigned);

    // Growth: a round's record, a new checkpoint cosigned by both, each witness's line once.
    v.challenge::<Gemm>(GPU, &policy()).await.unwrap();
    let tick = ledger.tick(&client, &witnesses[..2]).await.unwrap();
    assert_eq!(tick.signed, Some(2));
    assert!(tick.published.as_ref().unwrap().all_cosigned());
    let text = reqwest::get(format!("{url}/ledger/checkpoint"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for k in [&k1, &k2] {
        assert_eq!(
            text.matches(&format!("\u{2014} {} ", k.name())).count(),
            1,
            "{text}"
        );
    }
    let checkpoint = SignedCheckpoint::parse_verified(text.as_bytes(), &log_key).unwrap();
    let bundle = Bundle::export(ledger.ledger(), GPU, &checkpoint, None).unwrap();
    let policy = WitnessPolicy {
        keys: vec![k1, k2],
        quorum: 2,
    };
    let report = verify_bundle(&bundle, &log_key, &policy, None);
    assert!(report.ok(), "{:?}", report.problems);
    // Each publication cost a witness one request: it starts from the size the witness said
    // it holds (from 0 each time, every later one would be two: a 409, then the retry).
    assert_eq!(asked1.load(std::sync::atomic::Ordering::Relaxed), 3);
    // Nothing new and nobody missed: no publication.
    let idle = ledger.tick(&client, &witnesses[..2]).await.unwrap();
    assert!(idle.signed.is_none() && idle.published.is_none());
}

#[tokio::test]
async fn a_ledger_that_cannot_append_refuses_the_record() {
    let dir = tempfile::tempdir().unwrap();
    drop(Ledger::open(dir.path()).unwrap());
    // Opened for reading only: every append fails (as after a failed fsync).
    let identity = Identity::from_seed(VALIDATOR_SEED);
    let signer = pog_validator::ledger::log_signer(&identity, None).unwrap();
    let ledger = ValidatorLedger::new(Ledger::open_reader(dir.path()).unwrap(), signer);
    let h = Harness::new()
        .with_ledger_of(Arc::new(ledger))
        .serve()
        .await;
    let v = h.v.clone();
    let status = h.agent(9, vec![claim(GPU)]).await.status();
    assert_eq!(status, 500, "the registration record could not be logged");
    match v.challenge::<Gemm>(GPU, &policy()).await {
        Err(ValidatorError::Ledger(e)) => assert!(e.to_string().contains("read"), "{e}"),
        other => panic!("expected the ledger's refusal, got {other:?}"),
    }
    assert!(
        stored(&v, GPU).is_empty(),
        "nothing stored that the log lacks"
    );
    assert_eq!(v.records().ledger().unwrap().ledger().log().size(), 0);
}

#[tokio::test]
async fn a_validator_without_a_ledger_serves_none() {
    let h = Harness::new().serve().await;
    for path in ["checkpoint", "tile/0/000.p/1"] {
        let r = reqwest::get(format!("{}/ledger/{path}", h.url))
            .await
            .unwrap();
        assert_eq!(r.status(), 404, "{path}");
    }
}

#[tokio::test]
async fn uuids_the_ledger_cannot_name_are_refused_at_registration() {
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new().with_ledger(dir.path()).serve().await;
    let (v, url) = (h.v.clone(), h.url.clone());
    // No `GpuClaim` can hold such a UUID: the registration is written by hand, signed as an
    // agent would sign it.
    for bad in ["GPU with spaces", "", &"x".repeat(129)] {
        let body = serde_json::json!({
            "endpoint": "http://127.0.0.1:9",
            "gpus": [{"uuid": bad, "model": "H200 SXM", "bus_id": "0000:00:06.0", "simulated": false}],
        });
        let envelope = Identity::from_seed([10; 32]).seal_body("register", body.to_string());
        let answer = reqwest::Client::new()
            .post(format!("{url}/v1/register"))
            .json(&envelope)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status().as_u16(), 400, "{bad:?}");
        let why = answer.text().await.unwrap();
        assert!(why.contains("printable ASCII"), "{why}");
        assert!(v.registry().gpu(bad).unwrap().is_none());
    }
}

/// A witness that answers 200 and then streams its body without end, `chunk` bytes every
/// 10 ms; its URL.
async fn endless_witness(chunk: usize) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (listener, url) = listen().await;
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = [0u8; 4096];
                let _ = stream.read(&mut head).await;
                let start = "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n";
                if stream.write_all(start.as_bytes()).await.is_err() {
                    return;
                }
                let mut piece = format!("{chunk:x}\r\n").into_bytes();
                piece.extend(std::iter::repeat_n(b'a', chunk));
                piece.extend_from_slice(b"\r\n");
                while stream.write_all(&piece).await.is_ok() {
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            });
        }
    });
    url
}

/// A "witness" that answers every checkpoint with `body` (HTTP 200).
async fn fixed_witness(body: String) -> String {
    let router = axum::Router::new().route(
        "/add-checkpoint",
        axum::routing::post(move || {
            let body = body.clone();
            async move { body }
        }),
    );
    let (listener, url) = listen().await;
    tokio::spawn(pog_net::http::serve(
        listener,
        router,
        Limits::small_requests(),
    ));
    url
}

/// A witness cosigning with two keys (c2sp.org/tlog-witness lets one answer with a line per
/// key): its URL and its second key.
async fn two_key_witness(log: &Verifier) -> (String, Verifier) {
    let signer = |seed: u8| {
        NoteSigner::new(&format!("pog.test/k{seed}"), ALG_COSIGNATURE_V1, [seed; 32]).unwrap()
    };
    let second = signer(52).verifier().clone();
    let witnesses: Vec<Witness> = [51, 52]
        .map(|seed| {
            let mut w = Witness::new(signer(seed));
            w.follow(log.clone(), None);
            w
        })
        .into();
    let witnesses = Arc::new(Mutex::new(witnesses));
    let router = axum::Router::new().route(
        "/add-checkpoint",
        axum::routing::post(move |body: axum::body::Bytes| {
            let witnesses = witnesses.clone();
            async move {
                let mut lines = Vec::new();
                for w in witnesses.lock().unwrap().iter_mut() {
                    let r = pog_ledger::serve::witness_add_checkpoint(w, &body, 1_700_000_000);
                    if r.status != 200 {
                        return (
                            axum::http::StatusCode::from_u16(r.status).unwrap(),
                            [(axum::http::header::CONTENT_TYPE, r.content_type)],
                            r.body,
                        );
                    }
                    lines.extend(r.body);
                }
                (
                    axum::http::StatusCode::OK,
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "text/plain; charset=utf-8",
                    )],
                    lines,
                )
            }
        }),
    );
    let (listener, url) = listen().await;
    tokio::spawn(pog_net::http::serve(
        listener,
        router,
        Limits::small_requests(),
    ));
    (url, second)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_witness_answering_garbage_or_in_others_names_costs_only_its_own_cosignature() {
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new().with_ledger(dir.path()).serve().await;
    let (v, url) = (h.v.clone(), h.url.clone());
    let ledger = v.records().ledger().unwrap().clone();
    let log_key = Verifier::parse(&ledger.vkey()).unwrap();
    let (honest, honest_key, _) = start_witness(31, &log_key).await;
    let (two_keys, second_key) = two_key_witness(&log_key).await;
    let status = h.agent(8, vec![claim(GPU)]).await.status();
    assert_eq!(status, 200);
    // Garbage; two lines, the second in the log's own name; and a copy of the honest
    // witness's name (a signature line it did not make). Each is configured with a key of
    // its own, and none of their lines verifies under it.
    let log_name = log_key.name().to_string();
    let fake_sig = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    let hostile = [
        fixed_witness("not a signature at all\n".into()).await,
        fixed_witness(format!(
            "\u{2014} pog.test/x {fake_sig}\n\u{2014} {log_name} {fake_sig}\n"
        ))
        .await,
        fixed_witness(format!("\u{2014} {} {fake_sig}\n", honest_key.name())).await,
    ];
    let mut witnesses = vec![target(&honest, &honest_key)];
    witnesses.extend(
        hostile
            .iter()
            .zip(32..)
            .map(|(url, seed)| target(url, &stranger(seed))),
    );
    // A witness signing with two keys answers two lines: the expected key's is taken.
    witnesses.push(target(&two_keys, &second_key));
    let client = pog_validator::ledger::witness_client().unwrap();
    let tick = ledger.tick(&client, &witnesses).await.unwrap();
    let published = tick.published.unwrap();
    let cosigned: Vec<bool> = published.witnesses.iter().map(|w| w.cosigned).collect();
    assert_eq!(
        cosigned,
        [true, false, false, false, true],
        "{:?}",
        published.witnesses
    );
    for answer in &published.witnesses[1..4] {
        assert!(
            answer
                .answer
                .starts_with("no line verifies under the witness's key"),
            "{answer:?}"
        );
    }
    assert!(published.witnesses[4]
        .answer
        .starts_with(&format!("\u{2014} {} ", second_key.name())));
    // The stored checkpoint carries the log's and the honest witness's signatures, and
    // verifies with both keys.
    let text = reqwest::get(format!("{url}/ledger/checkpoint"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let note = pog_ledger::note::Note::parse(text.as_bytes()).unwrap();
    assert_eq!(
        note.verify(&[log_key, honest_key, second_key])
            .unwrap()
            .len(),
        3,
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_witness_streaming_an_endless_answer_is_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::new().with_ledger(dir.path()).serve().await;
    let v = h.v.clone();
    let ledger = v.records().ledger().unwrap().clone();
    let status = h.agent(8, vec![claim(GPU)]).await.status();
    assert_eq!(status, 200);
    let hostile = endless_witness(16 << 10).await;
    let client = pog_validator::ledger::witness_client().unwrap();
    let started = std::time::Instant::now();
    let tick = ledger
        .tick(&client, &[target(&hostile, &stranger(43))])
        .await
        .unwrap();
    // Without a cap, the answer is read until the client's 20 s deadline (and held).
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let answer = &tick.published.unwrap().witnesses[0];
    assert!(!answer.cosigned);
    assert!(answer.answer.contains("exceeds"), "{answer:?}");
}

#[test]
fn a_silent_tile_server_is_given_up_on_at_the_reads_deadline() {
    use pog_ledger::tiles::{TileId, TileSource};
    // A server that takes connections and never answers (each tile would wait its 20 s).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let held = std::thread::spawn(move || {
        let mut open = Vec::new();
        for stream in listener.incoming().take(4) {
            open.push(stream);
        }
        std::thread::sleep(std::time::Duration::from_secs(30));
    });
    let budget = std::time::Duration::from_secs(1);
    let mut tiles =
        pog_validator::ledger::HttpTiles::new(&format!("http://{addr}/ledger/"), budget, false)
            .unwrap();
    let started = std::time::Instant::now();
    let tile = TileId::parse_path("tile/0/000").unwrap();
    let e = tiles.read_tile(&tile).unwrap_err().to_string();
    assert!(e.contains("not all read within 1 s"), "{e}");
    // Once the budget is spent, no tile is asked for any more.
    let e = tiles.read_tile(&tile).unwrap_err().to_string();
    assert!(e.contains("within 1 s"), "{e}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    drop(held);
}

/// A "witness" that accepts connections and never answers; its URL.
async fn silent_witness() -> String {
    let (listener, url) = listen().await;
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_witness_does_not_delay_the_honest_ones_cosignature() {
    let dir = tempfile::tempdir().unwrap();
    let identity = Identity::from_seed(VALIDATOR_SEED);
    let deadline = std::time::Duration::from_secs(4);
    let ledger = ValidatorLedger::open(dir.path(), &identity, None)
        .unwrap()
        .with_witness_deadline(deadline);
    let ledger = Arc::new(ledger);
    let h = Harness::new().with_ledger_of(ledger.clone()).serve().await;
    let url = h.url.clone();
    let log_key = Verifier::parse(&ledger.vkey()).unwrap();
    let (honest, honest_key, _) = start_witness(41, &log_key).await;
    let status = h.agent(8, vec![claim(GPU)]).await.status();
    assert_eq!(status, 200);
    // The silent witness is listed first: asked one after the other, the honest witness would
    // be asked only once the silent one's deadline had passed.
    let witnesses = vec![
        target(&silent_witness().await, &stranger(42)),
        target(&honest, &honest_key),
    ];
    let started = std::time::Instant::now();
    let publishing = tokio::spawn({
        let ledger = ledger.clone();
        async move {
            let client = pog_validator::ledger::witness_client().unwrap();
            ledger.tick(&client, &witnesses).await.unwrap()
        }
    });
    // The checkpoint a reader fetches carries the honest cosignature within moments, while
    // the silent witness is still being waited for.
    let cosigned = loop {
        let text = reqwest::get(format!("{url}/ledger/checkpoint"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        // Before the first checkpoint is signed, there is none to parse.
        let verified = pog_ledger::note::Note::parse(text.as_bytes())
            .ok()
            .and_then(|note| note.verify(&[log_key.clone(), honest_key.clone()]).ok());
        if verified.is_some_and(|v| v.len() == 2) {
            break started.elapsed();
        }
        assert!(
            started.elapsed() < deadline,
            "no honest cosignature served in time"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert!(cosigned < std::time::Duration::from_secs(2), "{cosigned:?}");
    assert!(
        !publishing.is_finished(),
        "the silent witness was not waited for"
    );
    // The publication ends at the silent witness's deadline, with the cosignature that came.
    let published = publishing.await.unwrap().published.unwrap();
    let cosigned: Vec<bool> = published.witnesses.iter().map(|w| w.cosigned).collect();
    assert_eq!(cosigned, [false, true], "{:?}", published.witnesses);
    assert!(published.witnesses[0]
        .answer
        .contains("no answer within 4 s"));
    assert!(started.elapsed() < deadline + std::time::Duration::from_secs(2));
    assert_eq!(
        published
            .checkpoint
            .note
            .verify(&[log_key, honest_key])
            .unwrap()
            .len(),
        2
    );
}

/// With a quorum, a checkpoint is published (stored, served, exported, anchored) only once that
/// many of its witnesses cosigned it, as Sigsum does: one witness short, holders keep seeing the
/// previous checkpoint; the pending one keeps the cosignatures it gathered and is published as
/// soon as the quorum is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_is_published_only_once_its_quorum_cosigned_it() {
    let dir = tempfile::tempdir().unwrap();
    let identity = Identity::from_seed(VALIDATOR_SEED);
    let ledger = ValidatorLedger::open(dir.path(), &identity, None)
        .unwrap()
        .with_quorum(2)
        .with_witness_deadline(std::time::Duration::from_secs(4));
    let ledger = Arc::new(ledger);
    let h = Harness::new().with_ledger_of(ledger.clone()).serve().await;
    let url = h.url.clone();
    let log_key = Verifier::parse(&ledger.vkey()).unwrap();
    let (w1, k1, _) = start_witness(61, &log_key).await;
    let (w2, k2, _) = start_witness(62, &log_key).await;
    let (dead_listener, dead_url) = listen().await;
    drop(dead_listener);
    let status = h.agent(8, vec![claim(GPU)]).await.status();
    assert_eq!(status, 200);
    let served = || async {
        let r = reqwest::get(format!("{url}/ledger/checkpoint"))
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    };
    let client = pog_validator::ledger::witness_client().unwrap();

    // One witness of the two needed answers: signed, cosigned once, not published.
    let short = [target(&w1, &k1), target(&dead_url, &stranger(63))];
    let tick = ledger.tick(&client, &short).await.unwrap();
    assert!(tick.signed.is_some());
    let published = tick.published.unwrap();
    assert!(!published.stored);
    assert_eq!(
        published
            .witnesses
            .iter()
            .map(|w| w.cosigned)
            .collect::<Vec<_>>(),
        [true, false]
    );
    let (status, _) = served().await;
    assert_eq!(status, 404, "no checkpoint is served before its quorum");

    // With both witnesses up, the pending checkpoint (nothing new was logged) is published,
    // carrying both cosignatures.
    let both = [target(&w1, &k1), target(&w2, &k2)];
    let tick = ledger.tick(&client, &both).await.unwrap();
    assert!(
        tick.signed.is_none(),
        "the log did not grow: no new checkpoint"
    );
    assert!(tick.published.unwrap().stored);
    let (status, text) = served().await;
    assert_eq!(status, 200);
    let note = pog_ledger::note::Note::parse(text.as_bytes()).unwrap();
    assert_eq!(note.verify(&[log_key, k1, k2]).unwrap().len(), 3, "{text}");
}

/// A "witness" that answers every request 503 (or 429 with `Retry-After: 1` when `busy`), and
/// the count of requests it got.
async fn failing_witness(busy: bool) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    let requests = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = requests.clone();
    let router = axum::Router::new().route(
        "/add-checkpoint",
        axum::routing::post(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            async move {
                let (status, retry) = if busy {
                    (axum::http::StatusCode::TOO_MANY_REQUESTS, "1")
                } else {
                    (axum::http::StatusCode::SERVICE_UNAVAILABLE, "0")
                };
                (status, [(axum::http::header::RETRY_AFTER, retry)], "busy\n")
            }
        }),
    );
    let (listener, url) = listen().await;
    tokio::spawn(pog_net::http::serve(
        listener,
        router,
        Limits::small_requests(),
    ));
    (url, requests)
}

/// Ticks `ledger` `n` times against `witnesses` (a failing witness makes every tick publish
/// again), returning the last publication's answers.
async fn ticks(
    ledger: &ValidatorLedger,
    witnesses: &[WitnessTarget],
    n: usize,
) -> Vec<WitnessAnswer> {
    let client = pog_validator::ledger::witness_client().unwrap();
    let mut last = Vec::new();
    for _ in 0..n {
        let tick = ledger.tick(&client, witnesses).await.unwrap();
        last = tick.published.unwrap().witnesses;
    }
    last
}

/// A witness that fails (503) is left alone for the back-off after its failure: ticks in a
/// tight loop ask it once, not at every tick (without the back-off: 20 requests). The
/// back-off is a minute here, so that twenty ticks on a loaded machine stay within it (the
/// default 10 s was passed once by CI's load).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_witness_is_backed_off_not_asked_at_every_tick() {
    let dir = tempfile::tempdir().unwrap();
    let identity = Identity::from_seed(VALIDATOR_SEED);
    let ledger = Arc::new(
        ValidatorLedger::open(dir.path(), &identity, None)
            .unwrap()
            .with_witness_budget(WitnessBudget {
                backoff: std::time::Duration::from_secs(60),
                ..WitnessBudget::default()
            }),
    );
    let h = Harness::new().with_ledger_of(ledger.clone()).serve().await;
    assert_eq!(h.agent(8, vec![claim(GPU)]).await.status(), 200);
    let (failing, asked) = failing_witness(false).await;
    let (busy, asked_busy) = failing_witness(true).await;
    let witnesses = [
        target(&failing, &stranger(71)),
        target(&busy, &stranger(72)),
    ];
    let last = ticks(&ledger, &witnesses, 20).await;
    assert_eq!(asked.load(std::sync::atomic::Ordering::Relaxed), 1);
    assert_eq!(asked_busy.load(std::sync::atomic::Ordering::Relaxed), 1);
    for answer in &last {
        assert!(
            !answer.cosigned && answer.answer.contains("backing off"),
            "{answer:?}"
        );
    }
}

/// Past its requests a minute, a witness is not asked until the budget refills, even with no
/// back-off (without the budget: 10 requests).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_witness_is_asked_within_its_requests_a_minute() {
    let dir = tempfile::tempdir().unwrap();
    let identity = Identity::from_seed(VALIDATOR_SEED);
    let ledger = ValidatorLedger::open(dir.path(), &identity, None)
        .unwrap()
        .with_witness_budget(WitnessBudget {
            per_minute: 3,
            backoff: std::time::Duration::ZERO,
            max_backoff: std::time::Duration::ZERO,
        });
    let ledger = Arc::new(ledger);
    let h = Harness::new().with_ledger_of(ledger.clone()).serve().await;
    assert_eq!(h.agent(8, vec![claim(GPU)]).await.status(), 200);
    let (failing, asked) = failing_witness(false).await;
    let last = ticks(&ledger, &[target(&failing, &stranger(73))], 10).await;
    assert_eq!(asked.load(std::sync::atomic::Ordering::Relaxed), 3);
    assert!(
        last[0]
            .answer
            .contains("budget of 3 requests a minute is spent"),
        "{:?}",
        last[0]
    );
}
