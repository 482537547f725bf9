//! GPU states and tokens on a real local EVM node (anvil from npm, `scripts/evm-tools.sh`):
//! the `sol!` interfaces against solc's ABIs; the contract's RFC 6962 hashing and inclusion
//! proofs against `pog_merkle`'s, and its rebuilt bodies and entries against the Rust
//! encodings; a real ledger's `gpu-state` records proven from an anchored checkpoint, kept,
//! replaced only by newer ones; each refusal named; tokens minted only to the owner a proven
//! state names, with their metadata; and the gas a state costs.

use alloy::json_abi::JsonAbi;
use alloy::primitives::{Address, FixedBytes, U256};
use pog_anchor::contract::{IGpuScores, IGpuToken};
use pog_anchor::scores::{
    deploy_scores, deploy_token, publish_states, state_to_sol, ProvenEntry, Scores, Tokens,
};
use pog_anchor::testing::{abi_signatures, dev_key_file, evm_tools, Anvil};
use pog_anchor::{deploy, read_bytecode, AnchorError, PublisherKey, Refusal, Registry, RpcUrl};
use pog_ledger::checkpoint::Checkpoint;
use pog_ledger::entry::Entry;
use pog_ledger::store::Ledger;
use pog_records::state::STATE_VERSION;
use pog_records::GpuState;
use pog_signed::{EvmAddress, GpuUuid, Identity, RecordKind};

const ORIGIN: &str = "pog.validator/scores-test";

fn refusal(e: AnchorError) -> Refusal {
    match e {
        AnchorError::Refused { refusal, .. } => *refusal,
        other => panic!("not a refusal: {other}"),
    }
}

fn check_interface(name: &str, ours: JsonAbi) {
    let solc: JsonAbi =
        serde_json::from_str(&std::fs::read_to_string(evm_tools().abi_of(name)).unwrap()).unwrap();
    let (theirs, mine) = (abi_signatures(&solc), abi_signatures(&ours));
    assert_eq!(
        theirs,
        mine,
        "crates/anchor/src/contract.rs and contracts/{name}.sol disagree:\n only in solc's ABI: {:#?}\n only in sol!: {:#?}",
        theirs.difference(&mine).collect::<Vec<_>>(),
        mine.difference(&theirs).collect::<Vec<_>>()
    );
    assert!(solc.functions().count() >= 10, "{name}: too few functions");
}

#[test]
fn the_sol_interfaces_match_the_abis_solc_produced() {
    check_interface("GpuScores", IGpuScores::abi::contract());
    check_interface("GpuToken", IGpuToken::abi::contract());
}

fn owner(n: u8) -> EvmAddress {
    EvmAddress([n; 20])
}

fn state(uuid: &str, score: f64, owner: EvmAddress, at: u64) -> GpuState {
    GpuState {
        version: STATE_VERSION,
        gpu_uuid: GpuUuid::new(uuid).unwrap(),
        model: "H200 SXM".into(),
        proves_model: true,
        proves_memory: true,
        score_ppm: GpuState::score_ppm_of(score),
        price_micro_usd: 4_380_000,
        owner,
        recorded_at_ms: at,
    }
}

/// The validator's entry of `state`, signed with `log`.
fn entry(log: &Identity, state: &GpuState) -> Entry {
    let body = serde_json::to_string(state).unwrap();
    Entry::from_envelope(&log.seal_body(RecordKind::GpuState.wire_kind(), body)).unwrap()
}

/// Another record of the GPU (what the validator logs between its states).
fn other_entry(log: &Identity, uuid: &str, n: u64) -> Entry {
    let body = format!(r#"{{"version":1,"gpu_uuid":"{uuid}","n":{n}}}"#);
    Entry::from_envelope(&log.seal_body(RecordKind::RoundMissed.wire_kind(), body)).unwrap()
}

struct Chain {
    _anvil: Anvil,
    rpc: RpcUrl,
    registry: Registry,
    scores: Scores,
    key: PublisherKey,
    _keys: tempfile::TempDir,
}

async fn chain() -> Chain {
    let anvil = Anvil::start();
    let rpc = RpcUrl::parse(&anvil.url).unwrap();
    let keys = tempfile::tempdir().unwrap();
    let key = PublisherKey::from_file(&dev_key_file(keys.path(), "publisher", 0)).unwrap();
    let tools = evm_tools();
    let registry = deploy(&rpc, &key, &read_bytecode(&tools.bin).unwrap())
        .await
        .unwrap();
    let registry_address = registry.address.parse::<Address>().unwrap();
    let deployed = deploy_scores(
        &rpc,
        &key,
        &read_bytecode(&tools.bin_of("GpuScores")).unwrap(),
        registry_address,
        ORIGIN,
    )
    .await
    .unwrap();
    eprintln!("deploying GpuScores: {} gas", deployed.sent.gas_used);
    let scores = Scores::new(&rpc, deployed.address.parse().unwrap(), Some(&key)).unwrap();
    Chain {
        registry: Registry::publisher(&rpc, registry_address, &key).unwrap(),
        rpc,
        scores,
        key,
        _anvil: anvil,
        _keys: keys,
    }
}

/// Anchors the ledger's current tree; returns its size.
async fn anchor(chain: &Chain, ledger: &Ledger) -> u64 {
    let size = ledger.log().size();
    chain
        .registry
        .anchor_checkpoint(&Checkpoint {
            origin: ORIGIN.into(),
            size,
            root: ledger.log().root_at(size).unwrap(),
            extensions: vec![],
        })
        .await
        .unwrap();
    size
}

#[tokio::test]
async fn the_contracts_hashes_proofs_and_encodings_are_the_rust_ones() {
    let chain = chain().await;
    let c = chain.scores.contract();
    // Leaf hashes of data of every length around the SHA-256 block edges.
    for len in [0usize, 1, 55, 56, 63, 64, 65, 300] {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
        let on_chain = c.leafHash(data.clone().into()).call().await.unwrap();
        assert_eq!(on_chain.0, pog_merkle::leaf_hash(&data), "length {len}");
    }
    // Every leaf of every tree of 1 to 17 leaves: the contract accepts its proof, and judges
    // every perturbation (another index or size, a flipped hash, a proof one hash too long or
    // too short) exactly as pog_merkle does.
    let mut refused = 0;
    for size in 1u64..=17 {
        let leaves: Vec<_> = (0..size)
            .map(|i| pog_merkle::leaf_hash(&i.to_be_bytes()))
            .collect();
        let tree = pog_merkle::Tree::from_leaf_hashes(leaves.clone());
        let root = tree.root();
        for index in 0..size {
            let proof = tree.inclusion_proof(index).unwrap();
            let leaf = leaves[index as usize];
            let mut cases = vec![
                (index, size, proof.clone()),
                ((index + 1) % size, size, proof.clone()),
                (index, size + 1, proof.clone()),
                (size, size, proof.clone()),
                (index, size, [proof.clone(), vec![root]].concat()),
            ];
            if !proof.is_empty() {
                let mut flipped = proof.clone();
                flipped[0][0] ^= 1;
                cases.push((index, size, flipped));
                cases.push((index, size, proof[..proof.len() - 1].to_vec()));
            }
            for (n, (i, s, p)) in cases.into_iter().enumerate() {
                let expected = pog_merkle::verify_inclusion(&leaf, i, s, &p, &root);
                assert!(expected || n != 0, "leaf {index} of {size}: its own proof");
                let on_chain = c
                    .verifyInclusion(
                        FixedBytes(leaf),
                        i,
                        s,
                        p.into_iter().map(FixedBytes).collect(),
                        FixedBytes(root),
                    )
                    .call()
                    .await
                    .unwrap();
                assert_eq!(
                    on_chain, expected,
                    "case {n}: leaf {index} of {size} as leaf {i} of {s}"
                );
                refused += usize::from(!on_chain);
            }
        }
    }
    assert!(refused > 500, "only {refused} perturbed proofs refused");
    // The body and the entry the contract writes are the validator's bytes.
    let log = Identity::from_seed([9; 32]);
    let mut odd = state("GPU-x", 0.0, EvmAddress::ZERO, 0);
    odd.model = String::new();
    odd.proves_model = false;
    odd.proves_memory = false;
    let mut huge = state(
        "GPU-7a75a53d-aaaa-bbbb-cccc-dddddddddddd",
        1e12,
        owner(0xab),
        u64::MAX,
    );
    huge.price_micro_usd = u64::MAX;
    huge.score_ppm = u64::MAX;
    for s in [
        state(
            "GPU-0bb9b03c-1111-2222-3333-444455556666",
            0.987,
            owner(0x11),
            1_764_900_000_123,
        ),
        odd,
        huge,
    ] {
        let body = c.bodyOf(state_to_sol(&s)).call().await.unwrap();
        assert_eq!(
            String::from_utf8(body.to_vec()).unwrap(),
            serde_json::to_string(&s).unwrap()
        );
        let e = entry(&log, &s);
        let mut appended = e.clone();
        (appended.gpu_seq, appended.prev_index) = (7, 3);
        let on_chain = c
            .entryOf(
                state_to_sol(&s),
                7,
                3,
                FixedBytes(e.signer),
                e.signature.to_vec().into(),
            )
            .call()
            .await
            .unwrap();
        assert_eq!(on_chain.to_vec(), appended.encode());
    }
}

#[tokio::test]
async fn states_are_proven_from_the_anchored_log_and_only_newer_ones_replace_them() {
    let chain = chain().await;
    let dir = tempfile::tempdir().unwrap();
    let ledger = std::sync::Arc::new(Ledger::open(dir.path()).unwrap());
    let log = Identity::from_seed([3; 32]);
    let gpus = ["GPU-a", "GPU-b", "GPU-c"];
    for (n, uuid) in gpus.iter().enumerate() {
        ledger
            .append(vec![
                other_entry(&log, uuid, 0),
                entry(
                    &log,
                    &state(uuid, 0.5 + n as f64 / 10.0, owner(n as u8 + 1), 1_000),
                ),
                other_entry(&log, uuid, 1),
            ])
            .unwrap();
    }
    // A GPU with no state: counted, nothing sent for it.
    ledger
        .append(vec![other_entry(&log, "GPU-none", 0)])
        .unwrap();

    // Nothing anchored at this size yet: the contract refuses it, named.
    let size = ledger.log().size();
    let e = publish_states(ledger.clone(), size, &chain.scores, 10)
        .await
        .unwrap_err();
    assert_eq!(
        refusal(e),
        Refusal::NoAnchor {
            origin: ORIGIN.into(),
            size
        }
    );

    let size = anchor(&chain, &ledger).await;
    let first = publish_states(ledger.clone(), size, &chain.scores, 2)
        .await
        .unwrap();
    assert_eq!((first.submitted, first.without_state), (3, 1));
    assert_eq!(first.transactions.len(), 2, "3 states in batches of 2");
    for (n, uuid) in gpus.iter().enumerate() {
        let kept = chain.scores.state_of(uuid).await.unwrap().unwrap();
        assert_eq!(
            kept.state,
            state(uuid, 0.5 + n as f64 / 10.0, owner(n as u8 + 1), 1_000)
        );
        assert_eq!(kept.anchored_size, size);
        assert_eq!(kept.leaf_index, 3 * n as u64 + 1);
    }
    assert_eq!(chain.scores.state_of("GPU-none").await.unwrap(), None);
    // Published again: nothing to send.
    let again = publish_states(ledger.clone(), size, &chain.scores, 2)
        .await
        .unwrap();
    assert_eq!((again.submitted, again.up_to_date), (0, 3));
    assert!(again.transactions.is_empty());

    // A newer state of GPU-b, anchored: it replaces the kept one.
    ledger
        .append(vec![entry(&log, &state("GPU-b", 0.9, owner(2), 2_000))])
        .unwrap();
    let newer_size = anchor(&chain, &ledger).await;
    let second = publish_states(ledger.clone(), newer_size, &chain.scores, 50)
        .await
        .unwrap();
    assert_eq!((second.submitted, second.up_to_date), (1, 2));
    let b = chain.scores.state_of("GPU-b").await.unwrap().unwrap();
    assert_eq!(b.state.score_ppm, 900_000);
    assert_eq!(b.leaf_index, size);

    // The old state of GPU-b, proven in the newer tree: not newer, refused.
    let old_index = 4;
    let old = ProvenEntry::new(
        old_index,
        Entry::parse(&ledger.log().entry(old_index).unwrap()).unwrap(),
        ledger.log().inclusion_proof(old_index, newer_size).unwrap(),
    )
    .unwrap();
    let e = chain
        .scores
        .submit(newer_size, std::slice::from_ref(&old))
        .await
        .unwrap_err();
    assert_eq!(
        refusal(e),
        Refusal::NotNewer {
            gpu_uuid: "GPU-b".into(),
            leaf_index: old_index,
            kept_index: size
        }
    );

    // Forged fields (a higher score, another owner), a wrong index, a proof from another size:
    // the rebuilt entry is not in the log.
    let mut forged = old.clone();
    forged.leaf_index = newer_size; // past every state kept
    let e = chain
        .scores
        .submit(newer_size, &[forged])
        .await
        .unwrap_err();
    assert!(matches!(refusal(e), Refusal::NotInLog { .. }));
    let latest_index = size;
    let latest = ProvenEntry::new(
        latest_index,
        Entry::parse(&ledger.log().entry(latest_index).unwrap()).unwrap(),
        ledger
            .log()
            .inclusion_proof(latest_index, newer_size)
            .unwrap(),
    )
    .unwrap();
    let forgeries: [fn(&mut ProvenEntry); 5] = [
        |p: &mut ProvenEntry| p.state.score_ppm = 2_000_000,
        |p: &mut ProvenEntry| p.state.owner = EvmAddress([0xee; 20]),
        |p: &mut ProvenEntry| p.state.proves_memory = false,
        |p: &mut ProvenEntry| p.entry.gpu_seq += 1,
        |p: &mut ProvenEntry| p.proof[0][0] ^= 1,
    ];
    for forge in forgeries {
        let mut p = latest.clone();
        forge(&mut p);
        let e = chain.scores.submit(newer_size, &[p]).await.unwrap_err();
        assert_eq!(
            refusal(e),
            Refusal::NotInLog {
                gpu_uuid: "GPU-b".into(),
                leaf_index: latest_index,
                size: newer_size
            }
        );
    }
    // An empty batch, a short signature, an empty UUID: named.
    let e = chain.scores.submit(newer_size, &[]).await.unwrap_err();
    assert_eq!(refusal(e), Refusal::EmptyBatch);
    let mut sol = latest.to_sol();
    sol.signature = vec![0u8; 63].into();
    let e = chain
        .scores
        .contract()
        .submit(newer_size, vec![sol])
        .call()
        .await
        .unwrap_err();
    assert_eq!(
        Refusal::decode(&e.as_revert_data().unwrap()),
        Refusal::BadSignature {
            length: "63".into()
        }
    );
    let mut sol = latest.to_sol();
    sol.state.gpuUuid = String::new();
    let e = chain
        .scores
        .contract()
        .entryOf(sol.state, 0, 0, sol.signer, sol.signature)
        .call()
        .await
        .unwrap_err();
    let data = e.as_revert_data().unwrap();
    assert_eq!(
        Refusal::decode(&data),
        Refusal::BadUuid { length: "0".into() }
    );
    // A record that is not a gpu-state cannot be submitted.
    let not_state = ProvenEntry::new(
        0,
        Entry::parse(&ledger.log().entry(0).unwrap()).unwrap(),
        vec![],
    )
    .unwrap_err();
    assert!(
        not_state.to_string().contains("not a gpu-state"),
        "{not_state}"
    );
}

#[tokio::test]
async fn a_token_is_minted_only_to_the_owner_a_proven_state_names() {
    let chain = chain().await;
    let tools = evm_tools();
    let deployed = deploy_token(
        &chain.rpc,
        &chain.key,
        &read_bytecode(&tools.bin_of("GpuToken")).unwrap(),
        chain.scores.address(),
    )
    .await
    .unwrap();
    eprintln!("deploying GpuToken: {} gas", deployed.sent.gas_used);
    let tokens = Tokens::new(
        &chain.rpc,
        deployed.address.parse().unwrap(),
        Some(&chain.key),
    )
    .unwrap();
    assert_eq!(tokens.scores().await.unwrap(), chain.scores.address());

    let dir = tempfile::tempdir().unwrap();
    let ledger = std::sync::Arc::new(Ledger::open(dir.path()).unwrap());
    let log = Identity::from_seed([4; 32]);
    let mut unproven = state("GPU-unproven", 0.0, owner(7), 10);
    unproven.proves_model = false;
    ledger
        .append(vec![
            entry(
                &log,
                &state("GPU-owned", 0.987, owner(0x42), 1_764_900_000_000),
            ),
            entry(&log, &state("GPU-nobody", 0.5, EvmAddress::ZERO, 10)),
            entry(&log, &unproven),
        ])
        .unwrap();
    let size = anchor(&chain, &ledger).await;
    publish_states(ledger.clone(), size, &chain.scores, 10)
        .await
        .unwrap();

    // Anyone mints (here the publisher's account pays); the token goes to the named owner.
    let (sent, id) = tokens.mint("GPU-owned").await.unwrap();
    eprintln!("minting a token: {} gas", sent.gas_used);
    assert_eq!(id, Tokens::token_id_of("GPU-owned"));
    let gpu = tokens.gpu_of(id).await.unwrap();
    assert_eq!(gpu.holder, Address::from([0x42; 20]).to_checksum(None));
    assert_eq!(gpu.chain.state.gpu_uuid.as_str(), "GPU-owned");
    assert_eq!(gpu.chain.state.score_ppm, 987_000);
    assert_eq!(gpu.chain.leaf_index, 0);

    // The metadata: base64 JSON with the model, the score and when it was last proven.
    let uri = tokens.token_uri(id).await.unwrap();
    let b64 = uri
        .strip_prefix("data:application/json;base64,")
        .expect("a data URI");
    let json = decode_base64(b64);
    let meta: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(meta["name"], "pog GPU GPU-owned");
    let traits = meta["attributes"].as_array().unwrap();
    let value = |name: &str| {
        traits
            .iter()
            .find(|t| t["trait_type"] == name)
            .unwrap_or_else(|| panic!("no {name} in {meta}"))["value"]
            .clone()
    };
    assert_eq!(value("model"), "H200 SXM");
    assert_eq!(value("score_ppm"), 987_000);
    assert_eq!(value("last_proven"), 1_764_900_000);

    // Refusals, each named.
    for (uuid, expected) in [
        ("GPU-owned", Refusal::TokenExists),
        (
            "GPU-unknown",
            Refusal::UnknownGpu {
                gpu_uuid: "GPU-unknown".into(),
            },
        ),
        (
            "GPU-nobody",
            Refusal::NoOwnerNamed {
                gpu_uuid: "GPU-nobody".into(),
            },
        ),
        (
            "GPU-unproven",
            Refusal::ModelNotProven {
                gpu_uuid: "GPU-unproven".into(),
            },
        ),
    ] {
        let e = tokens.mint(uuid).await.unwrap_err();
        assert_eq!(refusal(e), expected, "{uuid}");
    }
    let e = tokens.gpu_of(U256::from(12345u64)).await.unwrap_err();
    assert_eq!(
        refusal(e),
        Refusal::NoSuchToken {
            token_id: "12345".into()
        }
    );
}

/// Standard base64 (RFC 4648, with padding), as OpenZeppelin's `Base64.encode` writes it.
fn decode_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a' + 26) as u32,
            b'0'..=b'9' => (c - b'0' + 52) as u32,
            b'+' => 62,
            b'/' => 63,
            other => panic!("not base64: {other}"),
        }
    };
    let mut out = Vec::new();
    for chunk in text.as_bytes().chunks(4) {
        let pad = chunk.iter().filter(|&&c| c == b'=').count();
        let n = chunk
            .iter()
            .map(|&c| if c == b'=' { 0 } else { value(c) })
            .fold(0u32, |acc, v| (acc << 6) | v);
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    out
}

/// The gas of proving states: one to 50 per transaction, in a log of 10,000 entries (proofs
/// of 14 hashes). Printed (`--nocapture`) and bounded; docs/ledger.md records the figures.
#[tokio::test]
async fn the_gas_of_a_state_is_measured() {
    let chain = chain().await;
    let dir = tempfile::tempdir().unwrap();
    let ledger = std::sync::Arc::new(Ledger::open(dir.path()).unwrap());
    let log = Identity::from_seed([5; 32]);
    let uuids: Vec<String> = (0..61)
        .map(|i| format!("GPU-{i:08x}-0000-0000-0000-000000000000"))
        .collect();
    // Filler first, so that proofs have a fleet-sized depth.
    let filler: Vec<Entry> = (0..10_000 - uuids.len() as u64)
        .map(|n| other_entry(&log, "GPU-filler", n))
        .collect();
    for chunk in filler.chunks(1000) {
        ledger.append(chunk.to_vec()).unwrap();
    }
    ledger
        .append(
            uuids
                .iter()
                .map(|u| entry(&log, &state(u, 0.987, owner(0x42), 1_764_900_000_000)))
                .collect(),
        )
        .unwrap();
    let size = anchor(&chain, &ledger).await;
    assert_eq!(size, 10_000);
    let proven: Vec<ProvenEntry> = (size - uuids.len() as u64..size)
        .map(|i| {
            ProvenEntry::new(
                i,
                Entry::parse(&ledger.log().entry(i).unwrap()).unwrap(),
                ledger.log().inclusion_proof(i, size).unwrap(),
            )
            .unwrap()
        })
        .collect();
    let one = chain.scores.submit(size, &proven[..1]).await.unwrap();
    let ten = chain.scores.submit(size, &proven[1..11]).await.unwrap();
    let fifty = chain.scores.submit(size, &proven[11..61]).await.unwrap();
    let per_state = (fifty.gas_used - ten.gas_used) as f64 / 40.0;
    eprintln!(
        "gas, first states of new GPUs, proofs of 14 hashes: 1 state {}, 10 states {}, 50 states {} ({per_state:.0} a state beyond the transaction)",
        one.gas_used, ten.gas_used, fifty.gas_used
    );
    // Updating the same GPUs (storage already written): the steady state of an hourly update.
    ledger
        .append(
            uuids
                .iter()
                .map(|u| entry(&log, &state(u, 0.991, owner(0x42), 1_764_903_600_000)))
                .collect(),
        )
        .unwrap();
    let size2 = anchor(&chain, &ledger).await;
    let updates: Vec<ProvenEntry> = (size2 - uuids.len() as u64..size2)
        .map(|i| {
            ProvenEntry::new(
                i,
                Entry::parse(&ledger.log().entry(i).unwrap()).unwrap(),
                ledger.log().inclusion_proof(i, size2).unwrap(),
            )
            .unwrap()
        })
        .collect();
    let update_one = chain.scores.submit(size2, &updates[..1]).await.unwrap();
    let update_fifty = chain.scores.submit(size2, &updates[11..61]).await.unwrap();
    let per_update = (update_fifty.gas_used - update_one.gas_used) as f64 / 49.0;
    eprintln!(
        "gas, updates of kept GPUs: 1 state {}, 50 states {} ({per_update:.0} a state); 10,000 GPUs an hour: {:.0} M gas an hour",
        update_one.gas_used,
        update_fifty.gas_used,
        per_update * 10_000.0 / 1e6
    );
    assert!(per_state < 150_000.0, "{per_state}");
    assert!(per_update < 90_000.0, "{per_update}");
}
