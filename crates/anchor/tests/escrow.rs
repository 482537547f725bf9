//! Renters' deposits on a real local EVM node (anvil from npm): the `sol!` interface against
//! solc's ABI; deposits into a pog key's account (a test stablecoin of 6 decimals); settlements
//! the validator's settlement key signed paid to the provider, once; withdrawals only with its
//! voucher, by the account's owner, once, before the voucher expires; everything withdrawable
//! once the settlement key has been silent for the contract's `abandonAfter`; each refusal
//! named; and the EIP-712 digests the Rust signer computes equal to the contract's.

use alloy::json_abi::JsonAbi;
use alloy::primitives::{Address, U256};
use alloy::providers::{Provider, ProviderBuilder};
use alloy::sol_types::{Eip712Domain, SolStruct};
use pog_anchor::contract::{IGpuEscrow, IStablecoin};
use pog_anchor::escrow::{
    account_key, deploy_escrow, lease_key, settlement_of, Escrow, SettlementSigner,
};
use pog_anchor::testing::{abi_signatures, dev_keys, evm_tools, Anvil};
use pog_anchor::{deploy, read_bytecode, AnchorError, Refusal, RpcUrl};
use pog_signed::Identity;

/// How long the settlement key may be silent before owners withdraw freely, in the tests.
const ABANDON_AFTER_S: u64 = 3600;

fn refusal(e: AnchorError) -> String {
    match e {
        AnchorError::Refused { refusal, .. } => match *refusal {
            Refusal::Escrow { error } => error,
            other => panic!("not an escrow refusal: {other:?}"),
        },
        other => panic!("not a refusal: {other}"),
    }
}

#[test]
fn the_sol_interface_matches_the_abi_solc_produced() {
    let solc: JsonAbi =
        serde_json::from_str(&std::fs::read_to_string(evm_tools().abi_of("GpuEscrow")).unwrap())
            .unwrap();
    let (theirs, mine) = (
        abi_signatures(&solc),
        abi_signatures(&IGpuEscrow::abi::contract()),
    );
    assert_eq!(
        theirs,
        mine,
        "crates/anchor/src/contract.rs and contracts/GpuEscrow.sol disagree:\n only in solc's ABI: {:#?}\n only in sol!: {:#?}",
        theirs.difference(&mine).collect::<Vec<_>>(),
        mine.difference(&theirs).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deposits_leave_only_on_the_settlement_keys_word_or_when_it_is_gone() {
    let anvil = Anvil::start();
    let dir = tempfile::tempdir().unwrap();
    let rpc = RpcUrl::parse(&anvil.url).unwrap();
    let keys = dev_keys(dir.path(), 3);
    let (validator, renter_wallet, provider_wallet) = (&keys[0], &keys[1], &keys[2]);
    let tools = evm_tools();
    // The test stablecoin (deployed like any contract, without constructor arguments).
    let usd: Address = deploy(
        &rpc,
        validator,
        &read_bytecode(&tools.bin_of("TestUsd")).unwrap(),
    )
    .await
    .unwrap()
    .address
    .parse()
    .unwrap();
    let deployed = deploy_escrow(
        &rpc,
        validator,
        &read_bytecode(&tools.bin_of("GpuEscrow")).unwrap(),
        usd,
        validator.address(),
        ABANDON_AFTER_S,
    )
    .await
    .unwrap();
    eprintln!("deploying the escrow: {} gas", deployed.sent.gas_used);
    let address: Address = deployed.address.parse().unwrap();
    let chain = ProviderBuilder::new().connect_http(anvil.url.parse().unwrap());
    let chain_id = chain.get_chain_id().await.unwrap();
    let signer = SettlementSigner::new(validator.clone(), chain_id, address);
    let as_renter = Escrow::new(&rpc, address, Some(renter_wallet)).unwrap();
    let as_provider = Escrow::new(&rpc, address, Some(provider_wallet)).unwrap();
    let as_validator = Escrow::new(&rpc, address, Some(validator)).unwrap();
    let stablecoin = IStablecoin::new(usd, chain.clone());
    let balance_of = |who: Address| {
        let stablecoin = stablecoin.clone();
        async move {
            stablecoin
                .balanceOf(who)
                .call()
                .await
                .unwrap()
                .saturating_to::<u128>()
        }
    };

    // The renter's wallet holds $10 of the test dollar and deposits $5 for its pog key.
    let renter = Identity::from_seed([0x52; 32]).public_key();
    pog_anchor::testing::mint_test_usd(&anvil.url, usd, 1, renter_wallet.address(), 10_000_000)
        .await;
    let deposited = as_renter.deposit(&renter, 5_000_000).await.unwrap();
    eprintln!("a deposit: {} gas", deposited.gas_used);
    let account = as_renter.account_of(&renter).await.unwrap();
    assert_eq!(account.balance, 5_000_000);
    assert_eq!(
        account.owner.as_deref(),
        Some(renter_wallet.address().to_checksum(None).as_str())
    );
    assert_eq!(balance_of(renter_wallet.address()).await, 5_000_000);

    // A settlement of one lease period: $1.20 to the provider, as the validator's settler
    // makes it from the lease's id.
    assert_eq!(as_renter.chain_id().await.unwrap(), chain_id);
    assert_eq!(as_renter.settler().await.unwrap(), validator.address());
    let lease = lease_key("7.0.1");
    let settlement = settlement_of(
        "7.0.1",
        0,
        &renter,
        &provider_wallet.address().to_checksum(None),
        1_200_000,
    )
    .unwrap();
    assert_eq!(
        settlement,
        IGpuEscrow::Settlement {
            lease: alloy::primitives::keccak256(b"7.0.1"),
            period: 0,
            renter: account_key(&renter),
            provider: provider_wallet.address(),
            paid: U256::from(1_200_000u64),
        }
    );
    assert!(settlement_of("7.0.1", 0, &renter, "0xnot-an-address", 1).is_err());
    assert!(!as_renter.is_settled(lease, 0).await.unwrap());
    // The Rust signer's digest is the contract's.
    let domain = Eip712Domain::new(
        Some("pog GpuEscrow".into()),
        Some("1".into()),
        Some(U256::from(chain_id)),
        Some(address),
        None,
    );
    assert_eq!(
        as_renter
            .contract()
            .settlementDigest(settlement.clone())
            .call()
            .await
            .unwrap(),
        settlement.eip712_signing_hash(&domain)
    );
    let signature = signer.sign_settlement(&settlement).unwrap();
    // Signed by anyone else: refused.
    let forged = SettlementSigner::new(renter_wallet.clone(), chain_id, address)
        .sign_settlement(&settlement)
        .unwrap();
    let e = as_provider.settle(&settlement, &forged).await.unwrap_err();
    assert!(refusal(e).starts_with("BadSignature"));
    // The fields changed after signing: another signer is recovered, refused.
    let mut raised = settlement.clone();
    raised.paid = U256::from(4_000_000u64);
    let e = as_provider.settle(&raised, &signature).await.unwrap_err();
    assert!(refusal(e).starts_with("BadSignature"));
    let paid = as_provider.settle(&settlement, &signature).await.unwrap();
    eprintln!("a settlement: {} gas", paid.gas_used);
    assert_eq!(balance_of(provider_wallet.address()).await, 1_200_000);
    // The settler reads that it was paid (whoever submitted it), and only that period.
    assert!(as_renter.is_settled(lease, 0).await.unwrap());
    assert!(!as_renter.is_settled(lease, 1).await.unwrap());
    assert!(!as_renter.is_settled(lease_key("7.0.2"), 0).await.unwrap());
    assert_eq!(
        as_renter.account_of(&renter).await.unwrap().balance,
        3_800_000
    );
    // Once only.
    let e = as_provider
        .settle(&settlement, &signature)
        .await
        .unwrap_err();
    assert!(refusal(e).starts_with("AlreadySettled"));
    // More than the account holds: refused, nothing paid.
    let too_much = IGpuEscrow::Settlement {
        period: 1,
        paid: U256::from(3_800_001u64),
        ..settlement.clone()
    };
    let e = as_provider
        .settle(&too_much, &signer.sign_settlement(&too_much).unwrap())
        .await
        .unwrap_err();
    assert!(refusal(e).starts_with("InsufficientBalance"));

    // A withdrawal voucher: the owner takes $1, once; not someone else; not when expired.
    let now = chain
        .get_block_by_number(alloy::eips::BlockNumberOrTag::Latest)
        .await
        .unwrap()
        .unwrap()
        .header
        .timestamp;
    let voucher = IGpuEscrow::Withdrawal {
        renter: account_key(&renter),
        amount: U256::from(1_000_000u64),
        nonce: 0,
        expiresAt: now + 600,
    };
    let voucher_signature = signer.sign_withdrawal(&voucher).unwrap();
    let e = as_provider
        .withdraw(&voucher, &voucher_signature)
        .await
        .unwrap_err();
    assert!(refusal(e).starts_with("NotAccountOwner"));
    as_renter
        .withdraw(&voucher, &voucher_signature)
        .await
        .unwrap();
    assert_eq!(balance_of(renter_wallet.address()).await, 6_000_000);
    let e = as_renter
        .withdraw(&voucher, &voucher_signature)
        .await
        .unwrap_err();
    assert!(refusal(e).starts_with("WrongNonce"));
    let expired = IGpuEscrow::Withdrawal {
        nonce: 1,
        expiresAt: now - 1,
        ..voucher.clone()
    };
    let e = as_renter
        .withdraw(&expired, &signer.sign_withdrawal(&expired).unwrap())
        .await
        .unwrap_err();
    assert!(refusal(e).starts_with("Expired"));

    // The settlement key is alive: no withdrawal without a voucher; only it sends heartbeats.
    let e = as_renter.withdraw_abandoned(&renter).await.unwrap_err();
    assert!(refusal(e).starts_with("NotAbandoned"));
    let e = as_renter.heartbeat().await.unwrap_err();
    assert!(refusal(e).starts_with("NotSettler"));
    as_validator.heartbeat().await.unwrap();
    // Then it falls silent past abandonAfter: the owner takes everything, no one else can.
    let _: serde_json::Value = chain
        .raw_request("evm_increaseTime".into(), (ABANDON_AFTER_S + 1,))
        .await
        .unwrap();
    let _: serde_json::Value = chain.raw_request("evm_mine".into(), ()).await.unwrap();
    let e = as_provider.withdraw_abandoned(&renter).await.unwrap_err();
    assert!(refusal(e).starts_with("NotAccountOwner"));
    as_renter.withdraw_abandoned(&renter).await.unwrap();
    assert_eq!(balance_of(renter_wallet.address()).await, 8_800_000);
    assert_eq!(as_renter.account_of(&renter).await.unwrap().balance, 0);
    let e = as_renter.withdraw_abandoned(&renter).await.unwrap_err();
    assert!(refusal(e).starts_with("ZeroAmount"));
}
