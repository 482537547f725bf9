//! The registry contract on a real local EVM node (anvil from npm, `scripts/evm-tools.sh`):
//! the `sol!` interface against solc's ABI, the contract's rules (registration once, only the
//! publisher anchors, the size only grows, the history kept), anchoring a checkpoint through
//! the client, and clear errors for a wrong address or an unreachable node.

use alloy::json_abi::JsonAbi;
use pog_anchor::contract::ICheckpointRegistry;
use pog_anchor::testing::{abi_signatures, dev_key_file, evm_tools, Anvil};
use pog_anchor::{deploy, read_bytecode, AnchorError, PublisherKey, Refusal, Registry, RpcUrl};
use pog_ledger::checkpoint::Checkpoint;

#[test]
fn the_sol_interface_matches_the_abi_solc_produced() {
    let tools = evm_tools();
    let solc: JsonAbi =
        serde_json::from_str(&std::fs::read_to_string(&tools.abi).unwrap()).unwrap();
    let ours = ICheckpointRegistry::abi::contract();
    let (theirs, mine) = (abi_signatures(&solc), abi_signatures(&ours));
    assert_eq!(
        theirs,
        mine,
        "crates/anchor/src/contract.rs and contracts/CheckpointRegistry.sol disagree:\n only in solc's ABI: {:#?}\n only in sol!: {:#?}",
        theirs.difference(&mine).collect::<Vec<_>>(),
        mine.difference(&theirs).collect::<Vec<_>>()
    );
    // Not vacuous: every function, event and error is there.
    assert_eq!(solc.functions().count(), 13);
    assert_eq!(solc.events().count(), 4);
    assert_eq!(solc.errors().count(), 9);
    assert!(
        solc.constructor.is_none(),
        "the registry takes no constructor arguments"
    );
}

fn checkpoint(origin: &str, size: u64, root: u8) -> Checkpoint {
    Checkpoint {
        origin: origin.into(),
        size,
        root: [root; 32],
        extensions: vec![],
    }
}

fn refusal(e: AnchorError) -> Refusal {
    match e {
        AnchorError::Refused { refusal, .. } => *refusal,
        other => panic!("not a refusal: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_registry_keeps_its_rules_on_a_real_node() {
    let anvil = Anvil::start();
    let dir = tempfile::tempdir().unwrap();
    let rpc = RpcUrl::parse(&anvil.url).unwrap();
    let keys: Vec<PublisherKey> = (0..3)
        .map(|i| PublisherKey::from_file(&dev_key_file(dir.path(), &format!("k{i}"), i)).unwrap())
        .collect();
    let code = read_bytecode(&evm_tools().bin).unwrap();
    let deployed = deploy(&rpc, &keys[0], &code).await.unwrap();
    eprintln!("deployment: {} gas", deployed.sent.gas_used);
    let address = pog_anchor::parse_address(&deployed.address).unwrap();
    let publisher = Registry::publisher(&rpc, address, &keys[0]).unwrap();
    let rival = Registry::publisher(&rpc, address, &keys[1]).unwrap();
    let reader = Registry::reader(&rpc, address).unwrap();
    reader.check_deployed().await.unwrap();
    let origin = "pog.validator/0123456789abcdef";

    // Registration: once, first come; the registrant is the publisher.
    assert_eq!(reader.publisher_of(origin).await.unwrap(), None);
    let e = publisher.anchor(origin, 1, [1; 32]).await.unwrap_err();
    assert_eq!(
        refusal(e),
        Refusal::NotRegistered {
            origin: origin.into()
        }
    );
    let registered = publisher.register(origin).await.unwrap();
    eprintln!("registration: {} gas", registered.gas_used);
    assert!(registered.gas_used < 150_000, "{registered:?}");
    assert_eq!(
        reader.publisher_of(origin).await.unwrap(),
        Some(keys[0].address())
    );
    for r in [&publisher, &rival] {
        let e = r.register(origin).await.unwrap_err();
        assert!(
            matches!(refusal(e), Refusal::AlreadyRegistered { publisher, .. } if publisher == keys[0].address().to_string())
        );
    }

    // Only the publisher anchors.
    let e = rival.anchor(origin, 5, [0xbb; 32]).await.unwrap_err();
    assert!(e.to_string().contains("may anchor it, not"), "{e}");
    assert!(
        matches!(refusal(e), Refusal::NotPublisher { sender, .. } if sender == keys[1].address().to_string())
    );
    let first = publisher.anchor(origin, 5, [0xaa; 32]).await.unwrap();
    eprintln!("first anchor: {} gas, tx {}", first.gas_used, first.tx);
    assert!(first.tx.starts_with("0x") && first.tx.len() == 66);
    assert!(first.gas_used < 120_000, "{first:?}");

    // The size only grows; the same checkpoint again is refused with its own reason.
    let e = publisher.anchor(origin, 5, [0xaa; 32]).await.unwrap_err();
    assert!(matches!(
        refusal(e),
        Refusal::AlreadyAnchored { size: 5, .. }
    ));
    for (size, root) in [(5, 0xcc), (4, 0xaa), (0, 0xaa)] {
        let e = publisher
            .anchor(origin, size, [root; 32])
            .await
            .unwrap_err();
        assert_eq!(
            refusal(e),
            Refusal::SizeNotGrowing {
                origin: origin.into(),
                latest_size: 5,
                size
            }
        );
    }
    let second = publisher.anchor(origin, 9, [0x99; 32]).await.unwrap();
    eprintln!("next anchor: {} gas", second.gas_used);
    let third = publisher.anchor(origin, 1000, [0x10; 32]).await.unwrap();
    assert!(third.gas_used < 120_000);

    // The whole history stays readable, by size.
    assert_eq!(reader.history(origin).await.unwrap().len(), 3);
    assert_eq!(
        reader
            .newest_at_most(origin, 999)
            .await
            .unwrap()
            .map(|a| a.size),
        Some(9)
    );
    assert_eq!(reader.newest_at_most(origin, 4).await.unwrap(), None);
    assert_eq!(
        reader
            .newest_at_most(origin, u64::MAX)
            .await
            .unwrap()
            .map(|a| a.size),
        Some(1000)
    );
    let at5 = reader.anchor_at(origin, 5).await.unwrap().unwrap();
    assert_eq!((at5.size, at5.root), (5, [0xaa; 32]));
    assert!(at5.time > 1_600_000_000, "a block time: {}", at5.time);
    assert_eq!(
        reader.anchor_at(origin, 9).await.unwrap().unwrap().root,
        [0x99; 32]
    );
    for absent in [0, 1, 6, 999, 1001, u64::MAX] {
        assert_eq!(
            reader.anchor_at(origin, absent).await.unwrap(),
            None,
            "{absent}"
        );
    }
    let latest = reader.latest(origin).await.unwrap().unwrap();
    assert_eq!((latest.size, latest.root), (1000, [0x10; 32]));
    assert_eq!(reader.latest("pog.validator/other").await.unwrap(), None);
    assert_eq!(
        reader.anchor_at("pog.validator/other", 5).await.unwrap(),
        None
    );

    // Origins the contract would refuse are refused before anything is sent.
    for bad in [String::new(), "x".repeat(257)] {
        assert!(matches!(
            publisher.register(&bad).await,
            Err(AnchorError::Origin { .. })
        ));
    }
    // A read-only registry cannot send.
    assert!(matches!(
        reader.register("pog.validator/ro").await,
        Err(AnchorError::ReadOnly { .. })
    ));

    // Anchoring a checkpoint: registers a new origin, anchors, is idempotent, and refuses what
    // contradicts the chain.
    let other = "pog.validator/fedcba9876543210";
    let done = rival
        .anchor_checkpoint(&checkpoint(other, 3, 0x33))
        .await
        .unwrap();
    assert!(
        done.registered.is_some() && done.anchored.is_some(),
        "{done:?}"
    );
    let again = rival
        .anchor_checkpoint(&checkpoint(other, 3, 0x33))
        .await
        .unwrap();
    assert!(
        again.registered.is_none() && again.anchored.is_none(),
        "{again:?}"
    );
    let grown = rival
        .anchor_checkpoint(&checkpoint(other, 7, 0x77))
        .await
        .unwrap();
    assert!(grown.registered.is_none() && grown.anchored.is_some());
    let e = rival
        .anchor_checkpoint(&checkpoint(other, 7, 0x78))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, AnchorError::Conflict(c) if c.anchored_size == 7 && c.size == 7)
            && e.to_string().contains("fork"),
        "{e}"
    );
    let e = rival
        .anchor_checkpoint(&checkpoint(other, 6, 0x66))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("larger tree"), "{e}");
    // Someone else's origin: named, with its publisher.
    let e = publisher
        .anchor_checkpoint(&checkpoint(other, 8, 0x88))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, AnchorError::RegisteredToOther { publisher, .. } if *publisher == keys[1].address().to_string()),
        "{e}"
    );
    // An attacker re-anchoring the origin on the registry is refused by the contract, so the
    // anchored root at size 7 is still the publisher's.
    let attacker = Registry::publisher(&rpc, address, &keys[2]).unwrap();
    let e = attacker.anchor(other, 8, [0xee; 32]).await.unwrap_err();
    assert!(matches!(refusal(e), Refusal::NotPublisher { .. }));
    assert_eq!(
        reader.anchor_at(other, 7).await.unwrap().unwrap().root,
        [0x77; 32]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_address_or_an_unreachable_node_is_named() {
    let anvil = Anvil::start();
    let dir = tempfile::tempdir().unwrap();
    let rpc = RpcUrl::parse(&anvil.url).unwrap();
    let key = PublisherKey::from_file(&dev_key_file(dir.path(), "k", 0)).unwrap();
    // An address with no code (the key's own account).
    let nobody = Registry::publisher(&rpc, key.address(), &key).unwrap();
    let e = nobody.check_deployed().await.unwrap_err();
    assert!(matches!(e, AnchorError::NoContract { .. }), "{e}");
    assert!(e.to_string().contains("no contract at"), "{e}");
    let e = nobody.latest("pog.validator/x").await.unwrap_err();
    assert!(matches!(e, AnchorError::NoContract { .. }), "{e}");

    // Bytecode that is no contract: the deployment reverts, and says so.
    let e = deploy(&rpc, &key, &[0xfe]).await.unwrap_err();
    assert!(
        matches!(
            e,
            AnchorError::Reverted { .. } | AnchorError::Refused { .. } | AnchorError::Rpc { .. }
        ),
        "{e}"
    );

    // A node that is not there: an RPC error naming the URL, not a hang or a panic.
    drop(anvil);
    let e = nobody.latest("pog.validator/x").await.unwrap_err();
    assert!(matches!(e, AnchorError::Rpc { .. }), "{e}");
    assert!(e.to_string().contains("127.0.0.1"), "{e}");
}

/// A publisher key that anchors what the log never had (here a size of 999,999 with a random
/// root) would stop the origin for good, sizes having to grow: the origin's owner, a key apart
/// from the publisher's, rotates the publisher and voids the bogus anchor; the real log's
/// anchors go on in a new era, the bogus one stays readable as void, and lookups see only
/// valid anchors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_rotates_a_misbehaving_publisher_and_anchoring_goes_on() {
    let anvil = Anvil::start();
    let dir = tempfile::tempdir().unwrap();
    let rpc = RpcUrl::parse(&anvil.url).unwrap();
    let keys: Vec<PublisherKey> = (0..3)
        .map(|i| PublisherKey::from_file(&dev_key_file(dir.path(), &format!("k{i}"), i)).unwrap())
        .collect();
    let code = read_bytecode(&evm_tools().bin).unwrap();
    let address = deploy(&rpc, &keys[0], &code)
        .await
        .unwrap()
        .address
        .parse()
        .unwrap();
    let (owner, stolen, fresh) = (
        Registry::publisher(&rpc, address, &keys[0]).unwrap(),
        Registry::publisher(&rpc, address, &keys[1]).unwrap(),
        Registry::publisher(&rpc, address, &keys[2]).unwrap(),
    );
    let origin = "pog.validator/rotation";
    // Registered by the owner (owner and first publisher), who hands publishing to a hot key.
    owner.register(origin).await.unwrap();
    assert_eq!(
        owner.owner_of(origin).await.unwrap(),
        Some(keys[0].address())
    );
    owner
        .rotate(origin, keys[1].address(), u64::MAX)
        .await
        .unwrap();
    stolen.anchor(origin, 5, [0x05; 32]).await.unwrap();
    // The hot key misbehaves: a size the log never had. The real log cannot go on.
    stolen.anchor(origin, 999_999, [0xee; 32]).await.unwrap();
    let e = stolen.anchor(origin, 10, [0x10; 32]).await.unwrap_err();
    assert!(matches!(
        refusal(e),
        Refusal::SizeNotGrowing {
            latest_size: 999_999,
            ..
        }
    ));
    // Only the owner rotates; a rotation voiding from 0 or naming no one is refused.
    for by in [&stolen, &fresh] {
        let e = by.rotate(origin, keys[2].address(), 6).await.unwrap_err();
        assert!(
            matches!(refusal(e), Refusal::NotOwner { ref owner, .. } if *owner == keys[0].address().to_string())
        );
    }
    let e = owner
        .rotate(origin, keys[2].address(), 0)
        .await
        .unwrap_err();
    assert!(matches!(refusal(e), Refusal::BadRotation { .. }));
    // The owner rotates to a fresh key, voiding from size 6: the stolen key can do nothing,
    // the fresh one anchors the real log.
    let rotated = owner.rotate(origin, keys[2].address(), 6).await.unwrap();
    eprintln!("rotating the publisher: {} gas", rotated.gas_used);
    let e = stolen
        .anchor(origin, 2_000_000, [0xef; 32])
        .await
        .unwrap_err();
    assert!(matches!(refusal(e), Refusal::NotPublisher { .. }));
    let e = fresh.anchor(origin, 5, [0x05; 32]).await.unwrap_err();
    assert!(
        matches!(refusal(e), Refusal::AlreadyAnchored { size: 5, .. }),
        "the anchors below the void survive"
    );
    let e = fresh.anchor(origin, 4, [0x04; 32]).await.unwrap_err();
    assert!(matches!(
        refusal(e),
        Refusal::SizeNotGrowing { latest_size: 5, .. }
    ));
    let resumed = fresh.anchor(origin, 10, [0x10; 32]).await.unwrap();
    assert!(resumed.gas_used < 140_000, "{resumed:?}");
    // Lookups see valid anchors only; the history keeps the void one.
    assert_eq!(fresh.anchor_at(origin, 999_999).await.unwrap(), None);
    assert_eq!(
        fresh.anchor_at(origin, 5).await.unwrap().map(|a| a.root),
        Some([0x05; 32])
    );
    assert_eq!(
        fresh.latest(origin).await.unwrap().map(|a| a.size),
        Some(10)
    );
    assert_eq!(
        fresh
            .newest_at_most(origin, 1_000_000)
            .await
            .unwrap()
            .map(|a| a.size),
        Some(10)
    );
    let history = fresh.history(origin).await.unwrap();
    let shown: Vec<(u64, u64, bool)> = history
        .iter()
        .map(|(era, a, valid)| (*era, a.size, *valid))
        .collect();
    assert_eq!(
        shown,
        [(1, 5, true), (1, 999_999, false), (2, 10, true)],
        "era 0 (the owner's) holds nothing"
    );
    // A checkpoint of the real log anchors through the usual path, and the owner hands the
    // ownership to a cold key.
    fresh
        .anchor_checkpoint(&checkpoint(origin, 12, 0x12))
        .await
        .unwrap();
    owner
        .transfer_ownership(origin, keys[2].address())
        .await
        .unwrap();
    let e = owner
        .rotate(origin, keys[0].address(), 13)
        .await
        .unwrap_err();
    assert!(matches!(refusal(e), Refusal::NotOwner { .. }));
}
