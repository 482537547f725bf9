//! Runs every harness over a few thousand inputs mutated deterministically from valid messages:
//! none may panic, and the valid messages themselves must get through (so the harnesses do reach
//! the body parsers and the session behind them).

use pog_fuzzing::{fixture, seal};
use pog_proof::wire::{kind, GpuClaim, OpenRequest, Openings, Register};
use serde_json::Value;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Mutated inputs per harness.
const ITERATIONS: usize = 3000;

/// SplitMix64: a small deterministic generator, so every run tries the same inputs.
struct Rng(u64);

impl Rng {
    /// The next 64 random bits.
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// JSON text that has no `serde_json::Value` (numbers out of every range, nesting past the
/// parser's limit) or that is the wrong type or size for any field.
fn hostile_token(rng: &mut Rng) -> String {
    const TOKENS: &[&str] = &[
        "18446744073709551616",
        "-1",
        "-9223372036854775809",
        "1e999",
        "-1e999",
        "1.5",
        "-0",
        "4294967296",
        "340282366920938463463374607431768211456",
        "0.0000000000000000000000000000001e-400",
        "null",
        "true",
        "\"\"",
        "\"\\ud800\"",
        "\"\\u0000\"",
        "{}",
        "[]",
        "{\"x\":1}",
    ];
    match rng.below(5) {
        0 => {
            let depth = [10, 127, 129, 2000][rng.below(4)];
            format!("{}{}", "[".repeat(depth), "]".repeat(depth))
        }
        1 => format!("\"{}\"", "a".repeat(1 + rng.below(4096))),
        2 => format!("[{}]", vec!["0"; 1 + rng.below(256)].join(",")),
        _ => TOKENS[rng.below(TOKENS.len())].to_string(),
    }
}

/// A random node of `v`, the root included.
fn pick<'a>(v: &'a mut Value, rng: &mut Rng) -> &'a mut Value {
    let children = match &*v {
        Value::Array(a) => a.len(),
        Value::Object(o) => o.len(),
        _ => 0,
    };
    if children == 0 || rng.below(3) == 0 {
        return v;
    }
    let i = rng.below(children);
    match v {
        Value::Array(a) => pick(&mut a[i], rng),
        Value::Object(o) => pick(o.values_mut().nth(i).expect("index in range"), rng),
        scalar => scalar,
    }
}

/// `v` changed but keeping its type, so that it still parses and reaches the checks behind
/// the parser: another number, an edited string, an element dropped or repeated.
fn tweak(v: &mut Value, rng: &mut Rng) {
    match v {
        Value::Number(_) => {
            *v = match rng.below(3) {
                0 => rng.below(64).into(),
                1 => rng.next().into(),
                _ => (rng.next() as f64 / 7.0).into(),
            }
        }
        Value::String(s) => match rng.below(3) {
            0 => s.truncate(
                s.char_indices()
                    .nth(rng.below(s.len() + 1))
                    .map_or(0, |c| c.0),
            ),
            1 => s.push_str(&s.clone()),
            _ => *s = format!("{:x}", rng.next()).repeat(rng.below(8)),
        },
        Value::Array(a) if !a.is_empty() => {
            let i = rng.below(a.len());
            if rng.below(2) == 0 {
                a.remove(i);
            } else {
                a.push(a[i].clone());
            }
        }
        Value::Bool(b) => *b = !*b,
        _ => {}
    }
}

/// `seed` with one to three mutations: a node replaced by a hostile token or tweaked, a field
/// dropped or added, or bytes flipped, cut, inserted or repeated.
fn mutate(seed: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut bytes = seed.to_vec();
    for _ in 0..1 + rng.below(3) {
        let structural = serde_json::from_slice::<Value>(&bytes).ok();
        match (rng.below(9), structural) {
            (0..=1, Some(mut v)) => {
                // Values can't hold every token: put a marker in, then swap the text in.
                *pick(&mut v, rng) = Value::String("@@hostile@@".into());
                let text = serde_json::to_string(&v).expect("a Value encodes");
                bytes = text
                    .replacen("\"@@hostile@@\"", &hostile_token(rng), 1)
                    .into_bytes();
            }
            (2..=3, Some(mut v)) => {
                tweak(pick(&mut v, rng), rng);
                bytes = serde_json::to_vec(&v).expect("a Value encodes");
            }
            (4, Some(mut v)) => {
                if let Value::Object(o) = pick(&mut v, rng) {
                    if o.is_empty() || rng.below(2) == 0 {
                        o.insert("unknown".into(), Value::Null);
                    } else {
                        let key = o.keys().nth(rng.below(o.len())).expect("in range").clone();
                        o.remove(&key);
                    }
                }
                bytes = serde_json::to_vec(&v).expect("a Value encodes");
            }
            (5, _) if !bytes.is_empty() => {
                let at = rng.below(bytes.len());
                bytes[at] ^= 1 << rng.below(8);
            }
            (6, _) => bytes.truncate(rng.below(bytes.len() + 1)),
            (7, _) => {
                let at = rng.below(bytes.len() + 1);
                bytes.insert(at, rng.next() as u8);
            }
            _ if !bytes.is_empty() => {
                let from = rng.below(bytes.len());
                let to = from + rng.below(bytes.len() - from) + 1;
                let chunk = bytes[from..to].to_vec();
                let at = rng.below(bytes.len() + 1);
                bytes.splice(at..at, chunk);
            }
            _ => bytes.push(b'{'),
        }
    }
    bytes
}

/// Runs `harness` over `ITERATIONS` mutations of `seeds`, failing with the input if it panics.
fn fuzz<R>(name: &str, seeds: &[Vec<u8>], harness: impl Fn(&[u8]) -> R) {
    let mut rng = Rng(name
        .bytes()
        .fold(0, |h: u64, b| h.wrapping_mul(31) ^ u64::from(b)));
    for i in 0..ITERATIONS {
        let input = mutate(&seeds[i % seeds.len()], &mut rng);
        if catch_unwind(AssertUnwindSafe(|| harness(&input))).is_err() {
            let shown: String = String::from_utf8_lossy(&input).chars().take(2000).collect();
            panic!("{name} panicked on input {i}: {shown}");
        }
    }
}

/// `value` as JSON.
fn json<T: serde::Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("encodes")
}

/// Valid registrations.
fn register_seeds() -> Vec<Vec<u8>> {
    let gpu = |i: u32| GpuClaim {
        uuid: format!("GPU-{i}").parse().unwrap(),
        model: "H200 SXM".into(),
        bus_id: format!("00000000:00:0{i}.0"),
        simulated: i == 2,
    };
    vec![
        json(&Register {
            endpoint: "http://10.0.0.1:7000".into(),
            gpus: vec![gpu(1), gpu(2)],
            host: Some(pog_proof::wire::HostClaim {
                storage: None,
                cores: 16,
                token_owner: Some(pog_signed::EvmAddress([7; 20])),
                ram: Some(64 << 30),
            }),
        }),
        json(&Register {
            endpoint: "https://agent.example".into(),
            gpus: vec![],
            host: None,
        }),
    ]
}

/// The honest open request for the fixture's commitment, as the validator's session draws it.
fn open_request() -> OpenRequest {
    pog_fuzzing::commitment(&json(&fixture().commitment())).expect("the honest commitment")
}

/// The honest openings for that request.
fn honest_openings() -> Openings {
    let request = open_request();
    pog_fuzzing::open_request(&json(&request)).expect("the honest request is opened")
}

#[test]
fn register_never_panics() {
    let seeds = register_seeds();
    for seed in &seeds {
        pog_fuzzing::register(seed).expect("a valid registration decodes");
    }
    fuzz("register", &seeds, pog_fuzzing::register);
}

#[test]
fn challenge_never_panics() {
    let seeds = vec![json(&fixture().message)];
    pog_fuzzing::challenge(&seeds[0]).expect("a valid challenge decodes");
    fuzz("challenge", &seeds, pog_fuzzing::challenge);
}

#[test]
fn commitment_never_panics() {
    let seeds = vec![json(&fixture().commitment())];
    let request = pog_fuzzing::commitment(&seeds[0]).expect("the honest commitment is taken");
    assert!(!request.leaves.is_empty());
    fuzz("commitment", &seeds, pog_fuzzing::commitment);
}

#[test]
fn open_request_never_panics() {
    let seeds = vec![json(&open_request())];
    let opened = pog_fuzzing::open_request(&seeds[0]).expect("the request is opened");
    assert_eq!(opened.challenge_id, open_request().challenge_id);
    // Unsorted, duplicated, empty or out-of-range requests are refused, not opened.
    let mut request = open_request();
    let refused = |request: &OpenRequest| pog_fuzzing::open_request(&json(request)).unwrap_err();
    request.leaves.reverse();
    assert!(refused(&request).contains("strictly increasing"));
    request.leaves = vec![1, 1];
    assert!(refused(&request).contains("strictly increasing"));
    request.leaves = vec![];
    assert!(refused(&request).contains("no leaves"));
    request.leaves = vec![1 << 40];
    assert!(refused(&request).contains("out of range"));
    fuzz("open_request", &seeds, pog_fuzzing::open_request);
}

/// The payload `pog_fuzzing::openings` takes: the leaves' length, the leaves, the hashes.
fn payload(o: &Openings) -> Vec<u8> {
    let mut bytes = (o.leaves.len() as u32).to_le_bytes().to_vec();
    bytes.extend_from_slice(&o.leaves);
    bytes.extend_from_slice(&o.proof);
    bytes
}

#[test]
fn openings_never_panic() {
    let honest = honest_openings();
    let outcome = pog_fuzzing::openings(&payload(&honest)).expect("the honest openings are taken");
    assert!(outcome.accepted && outcome.checked > 0, "{outcome:?}");
    // Seeds a hash short, a leaf's bytes short, with the fields swapped, and with a proof of
    // zeros: each a typed error or a rejection, and each a start for the mutations.
    let short_proof = Openings {
        proof: honest.proof[..honest.proof.len() - 32].into(),
        ..honest.clone()
    };
    let short_leaves = Openings {
        leaves: honest.leaves[..honest.leaves.len() - 64].into(),
        ..honest.clone()
    };
    let swapped = Openings {
        leaves: honest.proof.clone(),
        proof: honest.leaves.clone(),
        ..honest.clone()
    };
    let zeros = Openings {
        proof: vec![0; honest.proof.len()],
        ..honest.clone()
    };
    for (bad, expected) in [
        (&short_proof, "fewer than"),
        (&short_leaves, "fewer than"),
        (&swapped, "the leaves have"),
    ] {
        let err = pog_fuzzing::openings(&payload(bad)).unwrap_err();
        assert!(err.contains(expected), "{err}");
    }
    let outcome = pog_fuzzing::openings(&payload(&zeros)).expect("the right lengths");
    assert!(!outcome.accepted, "{outcome:?}");
    let seeds: Vec<Vec<u8>> = [&honest, &short_proof, &short_leaves, &swapped, &zeros]
        .into_iter()
        .map(payload)
        .collect();
    fuzz("openings", &seeds, pog_fuzzing::openings);
}

#[test]
fn openings_frames_never_panic() {
    let honest = honest_openings();
    let frame = honest
        .seal(&pog_signed::Identity::from_seed([0x5e; 32]))
        .unwrap();
    assert_eq!(pog_fuzzing::openings_frame(&frame), Ok(honest.clone()));
    let mut changed = frame.clone();
    *changed.last_mut().unwrap() ^= 1;
    assert!(pog_fuzzing::openings_frame(&changed)
        .unwrap_err()
        .contains("not those signed"));
    assert!(pog_fuzzing::openings_frame(&json(&"{}"))
        .unwrap_err()
        .contains("not an openings frame"));
    fuzz(
        "openings_frame",
        &[frame, changed],
        pog_fuzzing::openings_frame,
    );
}

#[test]
fn memory_messages_never_panic() {
    let message = pog_fuzzing::memory_message();
    let seeds = vec![json(&message)];
    pog_fuzzing::memory_challenge(&seeds[0]).expect("a valid memory challenge decodes");
    fuzz("memory_challenge", &seeds, pog_fuzzing::memory_challenge);
    let ready = json(&pog_proof::wire::MemoryReady {
        challenge_id: message.id.clone(),
        gpu_uuid: "GPU-fuzz".parse().unwrap(),
        build_ms: 12.5,
    });
    pog_fuzzing::memory_ready(&ready).expect("a valid ready decodes");
    fuzz("memory_ready", &[ready], pog_fuzzing::memory_ready);
    let walk = json(&pog_proof::wire::WalkMessage {
        challenge_id: message.id,
        walk_nonce: [7; 32],
        issued_at_ms: 1,
        expires_at_ms: 2,
    });
    pog_fuzzing::memory_walk(&walk).expect("a valid walk decodes");
    fuzz("memory_walk", &[walk], pog_fuzzing::memory_walk);
}

#[test]
fn ram_challenges_never_panic_and_one_beyond_the_claim_is_refused() {
    let message = pog_fuzzing::memory_message();
    let seeds = vec![json(&message)];
    pog_fuzzing::ram_challenge(&seeds[0]).expect("a RAM challenge within the claim decodes");
    let mut beyond = message.clone();
    beyond.challenge.items = 1 << 20;
    beyond.challenge.item_rounds = pog_proof::ram::ITEM_ROUNDS;
    let err = pog_fuzzing::ram_challenge(&json(&beyond)).unwrap_err();
    assert!(err.contains("items"), "{err}");
    fuzz("ram_challenge", &seeds, pog_fuzzing::ram_challenge);
}

#[test]
fn storage_messages_never_panic() {
    use pog_proof::storage::session::*;
    let f = pog_fuzzing::storage_fixture();
    let open = OpenMessage {
        round_id: f.round.id.clone(),
        request: pog_proof::storage::StorageOpenRequest {
            steps: vec![0, 5, 31],
        },
    };
    let audit = AuditMessage {
        dataset_id: f.dataset.id.clone(),
        chunks: vec![0, 3, 15],
    };
    let requests = vec![json(&f.dataset), json(&audit), json(&f.round), json(&open)];
    for (seed, kind) in requests.iter().zip([
        kind::STORAGE_DATASET,
        kind::STORAGE_AUDIT,
        kind::STORAGE_ROUND,
        kind::STORAGE_OPEN,
    ]) {
        assert!(
            pog_fuzzing::storage_request(seed).contains(&kind),
            "a valid {kind} passes"
        );
    }
    fuzz("storage_request", &requests, pog_fuzzing::storage_request);
    let openings = f
        .set
        .open_steps(&f.round.round, &f.walk, &open.request)
        .unwrap();
    let answers = vec![
        json(&BuildingMessage {
            dataset_id: f.dataset.id.clone(),
            running_ms: 5,
            instead: None,
        }),
        json(&BuiltMessage {
            dataset_id: f.dataset.id.clone(),
            root: f.set.root(),
        }),
        json(&AuditOpeningsMessage {
            dataset_id: f.dataset.id.clone(),
            chunks: (0..8).map(|i| f.set.open(i).unwrap()).collect(),
        }),
        json(&WalkMessage {
            round_id: f.round.id.clone(),
            walk: f.walk.clone(),
        }),
        json(&OpeningsMessage {
            round_id: f.round.id.clone(),
            openings,
        }),
    ];
    for seed in &answers {
        assert!(!pog_fuzzing::storage_answer(seed).is_empty());
    }
    fuzz("storage_answer", &answers, pog_fuzzing::storage_answer);
}

#[test]
fn health_messages_never_panic() {
    let request = pog_fuzzing::health_request_message();
    let seeds = vec![json(&request)];
    pog_fuzzing::health_request(&seeds[0]).expect("a valid health request decodes");
    fuzz("health_request", &seeds, pog_fuzzing::health_request);
    let signal = |min: f64, mean: f64, max: f64| pog_proof::wire::SignalSummary {
        min,
        mean,
        max,
        n: 60,
    };
    let summary = pog_proof::wire::HealthSummary {
        request_id: request.id.clone(),
        gpu_uuid: request.gpu_uuid.clone(),
        from_ms: request.from_ms,
        to_ms: request.to_ms,
        simulated: false,
        samples: 60,
        signals: [
            ("temp_gpu".to_string(), signal(31.0, 48.5, 69.0)),
            ("power_w".to_string(), signal(90.5, 410.25, 699.9)),
        ]
        .into(),
        alerts: vec![pog_proof::wire::HealthAlert {
            t_ms: 1_030_000,
            kind: "xid".into(),
            severity: "critical".into(),
        }],
        alerts_total: 1,
        xids: vec![79],
        xid_total: 1,
    };
    let seeds = vec![json(&summary)];
    pog_fuzzing::health_summary(&seeds[0]).expect("a valid health summary is taken");
    fuzz("health_summary", &seeds, pog_fuzzing::health_summary);
}

#[test]
fn envelope_never_panics() {
    let f = fixture();
    let seeds = vec![
        seal(kind::REGISTER, &register_seeds()[0]),
        seal(kind::CHALLENGE, &json(&f.message)),
        seal(kind::COMMITMENT, &json(&f.commitment())),
        seal(kind::OPEN, &json(&open_request())),
        seal(
            kind::OPENINGS,
            &json(&pog_proof::wire::OpeningsDigest {
                challenge_id: "c".into(),
                leaf_bytes: 128,
                proof_bytes: 64,
                blake3: hex::encode([0; 32]),
            }),
        ),
    ];
    for (seed, expected) in seeds.iter().zip([
        kind::REGISTER,
        kind::CHALLENGE,
        kind::COMMITMENT,
        kind::OPEN,
        kind::OPENINGS,
    ]) {
        assert_eq!(pog_fuzzing::envelope(seed), Some(expected));
    }
    fuzz("envelope", &seeds, pog_fuzzing::envelope);
}

#[test]
fn ledger_bundles_and_notes() {
    let (bundle, note) = pog_fuzzing::ledger_seeds();
    assert_eq!(pog_fuzzing::ledger_bundle(&bundle), Ok(true));
    assert_eq!(pog_fuzzing::ledger_note(&note), Ok(true));
    let mut request = b"old 0\n\n".to_vec();
    request.extend_from_slice(&note);
    fuzz(
        "ledger_bundle",
        std::slice::from_ref(&bundle),
        pog_fuzzing::ledger_bundle,
    );
    fuzz("ledger_note", &[note, request], pog_fuzzing::ledger_note);
}

#[test]
fn market_requests() {
    let seeds = pog_fuzzing::market_seeds();
    let expected = [
        "submit - - - -",
        "- cancel - - -",
        "- - clear - -",
        "- - - withdraw -",
        "submit - - - -",
        "- - - - -",
    ];
    for (seed, expected) in seeds.iter().zip(expected) {
        assert_eq!(pog_fuzzing::market(seed).as_deref(), Ok(expected));
    }
    // The seed ask offering a GPU another key holds, more hours than its GPUs have, no GPU, a
    // GPU twice, or at the resting bid's price (the key's own): refused.
    let ask = String::from_utf8(seeds[0].clone()).unwrap();
    for (from, to) in [
        ("GPU-fuzz-2", "GPU-fuzz-4"),
        ("\"quantity\":2", "\"quantity\":3"),
        ("\"GPU-fuzz-1\",\"GPU-fuzz-2\"", ""),
        ("GPU-fuzz-2", "GPU-fuzz-1"),
        ("4000000", "3000000"),
    ] {
        let changed = ask.replace(from, to);
        assert_ne!(changed, ask, "{from}");
        assert_eq!(
            pog_fuzzing::market(changed.as_bytes()).as_deref(),
            Ok("- - - - -"),
            "{to}"
        );
    }
    // The withdrawal for more than the deposit leaves beyond the resting bid ($76), or for
    // another validator; the bid's access smuggling a line into a key, or an image that reads
    // as an option: refused.
    let withdrawal = String::from_utf8(seeds[3].clone()).unwrap();
    let bid = String::from_utf8(seeds[4].clone()).unwrap();
    let me: serde_json::Value = serde_json::from_str(&withdrawal).unwrap();
    let me = me["validator"].as_str().unwrap().to_string();
    for changed in [
        withdrawal.replace("1000000", "76000001"),
        withdrawal.replace(&me, &"ab".repeat(32)),
        bid.replace(
            "{\"container\":\"ghcr.io/fuzz/job:1\"}",
            "{\"ssh\":\"ssh-ed25519 AAAA\\nssh-rsa AAAA\"}",
        ),
        bid.replace("ghcr.io/fuzz/job:1", "--privileged"),
    ] {
        assert_eq!(
            pog_fuzzing::market(changed.as_bytes()).as_deref(),
            Ok("- - - - -"),
            "{changed}"
        );
    }
    fuzz("market", &seeds, pog_fuzzing::market);
}

#[test]
fn agent_reports() {
    let seeds = pog_fuzzing::report_seeds();
    let expected = ["inspection -", "- benchmark"];
    for (seed, expected) in seeds.iter().zip(expected) {
        assert_eq!(pog_fuzzing::report(seed).as_deref(), Ok(expected));
    }
    fuzz("report", &seeds, pog_fuzzing::report);
}
