//! Renters' deposits on chain (issue 25; docs/market.md, "Deposits and settlement"):
//! `contracts/GpuEscrow.sol` holds a stablecoin per renter's pog key, which the validator reads
//! to back bids, and pays a provider only on a settlement the validator's settlement key signed
//! (EIP-712); a renter withdraws with the validator's voucher, or freely once the settlement
//! key has been silent for the contract's `abandonAfter`.
//!
//! - [`deploy_escrow`]: the contract, bound to a stablecoin and a settlement key.
//! - [`Escrow`]: deposits, accounts, settlements, withdrawals and heartbeats.
//! - [`SettlementSigner`]: what the validator signs (settlements, vouchers), offline.

use alloy::primitives::{Address, FixedBytes, U256};
use alloy::providers::DynProvider;
use alloy::signers::SignerSync;
use alloy::sol_types::{Eip712Domain, SolStruct, SolValue};
use pog_signed::PublicKey;
use serde::Serialize;

use crate::contract::IGpuEscrow::{self, IGpuEscrowInstance, Settlement, Withdrawal};
use crate::contract::IStablecoin;
use crate::{
    call_error, deploy_code, mined, provider, AnchorError, Deployed, PublisherKey, RpcUrl, Sent,
};

/// The EIP-712 domain's name and version (the contract's constructor sets the same).
const DOMAIN_NAME: &str = "pog GpuEscrow";
const DOMAIN_VERSION: &str = "1";

/// Deploys `GpuEscrow` from `bytecode`: deposits of the ERC-20 at `token`, settled by
/// `settler`, free to withdraw after `abandon_after_s` seconds of the settler's silence.
pub async fn deploy_escrow(
    rpc: &RpcUrl,
    key: &PublisherKey,
    bytecode: &[u8],
    token: Address,
    settler: Address,
    abandon_after_s: u64,
) -> Result<Deployed, AnchorError> {
    let mut code = bytecode.to_vec();
    code.extend((token, settler, abandon_after_s).abi_encode_params());
    deploy_code("deploying the escrow", rpc, key, code).await
}

/// A renter's pog key as the escrow names its account.
pub fn account_key(renter: &PublicKey) -> FixedBytes<32> {
    FixedBytes(renter.to_bytes())
}

/// A lease as the escrow names it: keccak256 of its id in the validator's market (ids are
/// unique in one validator's book, and one escrow has one settlement key).
pub fn lease_key(lease_id: &str) -> FixedBytes<32> {
    alloy::primitives::keccak256(lease_id.as_bytes())
}

/// The escrow's form of one period of a lease paid: `paid` micro-dollars (the stablecoin's
/// units) of `renter`'s account to `payee` (`0x…`).
pub fn settlement_of(
    lease_id: &str,
    period: u64,
    renter: &PublicKey,
    payee: &str,
    paid: u64,
) -> Result<Settlement, AnchorError> {
    Ok(Settlement {
        lease: lease_key(lease_id),
        period,
        renter: account_key(renter),
        provider: crate::parse_address(payee)?,
        paid: U256::from(paid),
    })
}

/// The escrow's form of a withdrawal voucher: `amount` micro-dollars of `renter`'s account, its
/// `nonce`-th withdrawal, until `expires_at_s` (Unix seconds).
pub fn withdrawal_of(renter: &PublicKey, amount: u64, nonce: u64, expires_at_s: u64) -> Withdrawal {
    Withdrawal {
        renter: account_key(renter),
        amount: U256::from(amount),
        nonce,
        expiresAt: expires_at_s,
    }
}

/// A renter's account in the escrow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EscrowAccount {
    /// The address that opened it (and may withdraw from it); None when it was never opened.
    pub owner: Option<String>,
    /// Its balance in the token's units (micro-dollars for a 6-decimal stablecoin).
    pub balance: u128,
    /// How many vouchers it has used (the next voucher's nonce).
    pub withdrawals: u64,
}

/// The validator's settlement key and the escrow's EIP-712 domain: signs settlements and
/// withdrawal vouchers offline, for anyone to submit.
#[derive(Debug, Clone)]
pub struct SettlementSigner {
    key: PublisherKey,
    domain: Eip712Domain,
}

impl SettlementSigner {
    /// Signs for the escrow at `escrow` on the chain `chain_id`, with `key`.
    pub fn new(key: PublisherKey, chain_id: u64, escrow: Address) -> SettlementSigner {
        let domain = Eip712Domain::new(
            Some(DOMAIN_NAME.into()),
            Some(DOMAIN_VERSION.into()),
            Some(U256::from(chain_id)),
            Some(escrow),
            None,
        );
        SettlementSigner { key, domain }
    }

    /// The key's address (the escrow's `settler`).
    pub fn address(&self) -> Address {
        self.key.address()
    }

    /// The signature (65 bytes) of a settlement.
    pub fn sign_settlement(&self, s: &Settlement) -> Result<Vec<u8>, AnchorError> {
        self.sign(s.eip712_signing_hash(&self.domain))
    }

    /// The signature (65 bytes) of a withdrawal voucher.
    pub fn sign_withdrawal(&self, w: &Withdrawal) -> Result<Vec<u8>, AnchorError> {
        self.sign(w.eip712_signing_hash(&self.domain))
    }

    fn sign(&self, digest: alloy::primitives::B256) -> Result<Vec<u8>, AnchorError> {
        let signature = self
            .key
            .signer
            .sign_hash_sync(&digest)
            .map_err(|e| AnchorError::Signing(e.to_string()))?;
        Ok(signature.as_bytes().to_vec())
    }
}

/// A `GpuEscrow` contract at an address on one chain, read-only or with a key that sends.
#[derive(Debug, Clone)]
pub struct Escrow {
    rpc: RpcUrl,
    address: Address,
    sender: Option<Address>,
    contract: IGpuEscrowInstance<DynProvider>,
    provider: DynProvider,
}

impl Escrow {
    /// The escrow at `address`, to read from and, with `key`, to send to.
    pub fn new(
        rpc: &RpcUrl,
        address: Address,
        key: Option<&PublisherKey>,
    ) -> Result<Escrow, AnchorError> {
        let provider = provider(rpc, key)?;
        Ok(Escrow {
            rpc: rpc.clone(),
            address,
            sender: key.map(PublisherKey::address),
            contract: IGpuEscrow::new(address, provider.clone()),
            provider,
        })
    }

    /// The contract's address.
    pub fn address(&self) -> Address {
        self.address
    }

    /// The contract, for calls this type does not wrap.
    pub fn contract(&self) -> &IGpuEscrowInstance<DynProvider> {
        &self.contract
    }

    /// The chain's id (what a settlement's EIP-712 domain names).
    pub async fn chain_id(&self) -> Result<u64, AnchorError> {
        use alloy::providers::Provider;
        self.provider
            .get_chain_id()
            .await
            .map_err(|e| crate::rpc_error("reading the chain id", &self.rpc, e))
    }

    /// The contract's settlement key.
    pub async fn settler(&self) -> Result<Address, AnchorError> {
        self.contract
            .settler()
            .call()
            .await
            .map_err(|e| self.call_error("reading the settlement key", e))
    }

    /// Whether period `period` of the lease `lease` ([`lease_key`]) was paid.
    pub async fn is_settled(
        &self,
        lease: FixedBytes<32>,
        period: u64,
    ) -> Result<bool, AnchorError> {
        let key = alloy::primitives::keccak256((lease, period).abi_encode());
        self.contract.settled(key).call().await.map_err(|e| {
            self.call_error(
                &format!("reading whether period {period} of lease {lease} was paid"),
                e,
            )
        })
    }

    /// The renter's account (what backs its bids).
    pub async fn account_of(&self, renter: &PublicKey) -> Result<EscrowAccount, AnchorError> {
        let r = self
            .contract
            .accountOf(account_key(renter))
            .call()
            .await
            .map_err(|e| self.call_error(&format!("reading the account of {renter}"), e))?;
        Ok(EscrowAccount {
            owner: (r.owner != Address::ZERO).then(|| r.owner.to_checksum(None)),
            balance: r.balance.saturating_to(),
            withdrawals: r.withdrawals,
        })
    }

    /// Deposits `amount` of the escrow's token into the renter's account: approves the escrow
    /// to take it, then deposits (two transactions, both paid by this key).
    pub async fn deposit(&self, renter: &PublicKey, amount: u128) -> Result<Sent, AnchorError> {
        let what = format!("depositing {amount} for {renter}");
        self.need_key(&what)?;
        let token = self
            .contract
            .token()
            .call()
            .await
            .map_err(|e| self.call_error(&what, e))?;
        let stablecoin = IStablecoin::new(token, self.provider.clone());
        let approve = stablecoin.approve(self.address, U256::from(amount));
        let pending = approve
            .send()
            .await
            .map_err(|e| call_error(&what, &self.rpc, token, e))?;
        mined(&what, &self.rpc, pending).await?;
        let call = self
            .contract
            .deposit(account_key(renter), U256::from(amount));
        call.call().await.map_err(|e| self.call_error(&what, e))?;
        let pending = call.send().await.map_err(|e| self.call_error(&what, e))?;
        mined(&what, &self.rpc, pending).await
    }

    /// Submits a settlement the settlement key signed (any key may pay the gas).
    pub async fn settle(&self, s: &Settlement, signature: &[u8]) -> Result<Sent, AnchorError> {
        let what = format!("settling period {} of lease {}", s.period, s.lease);
        self.need_key(&what)?;
        let call = self.contract.settle(s.clone(), signature.to_vec().into());
        call.call().await.map_err(|e| self.call_error(&what, e))?;
        let pending = call.send().await.map_err(|e| self.call_error(&what, e))?;
        mined(&what, &self.rpc, pending).await
    }

    /// Withdraws with a voucher the settlement key signed (this key must own the account).
    pub async fn withdraw(&self, w: &Withdrawal, signature: &[u8]) -> Result<Sent, AnchorError> {
        let what = format!("withdrawing {} from {}", w.amount, w.renter);
        self.need_key(&what)?;
        let call = self.contract.withdraw(w.clone(), signature.to_vec().into());
        call.call().await.map_err(|e| self.call_error(&what, e))?;
        let pending = call.send().await.map_err(|e| self.call_error(&what, e))?;
        mined(&what, &self.rpc, pending).await
    }

    /// Withdraws the whole account once the settlement key has been silent long enough.
    pub async fn withdraw_abandoned(&self, renter: &PublicKey) -> Result<Sent, AnchorError> {
        let what = format!("withdrawing the account of {renter} (abandoned)");
        self.need_key(&what)?;
        let call = self.contract.withdrawAbandoned(account_key(renter));
        call.call().await.map_err(|e| self.call_error(&what, e))?;
        let pending = call.send().await.map_err(|e| self.call_error(&what, e))?;
        mined(&what, &self.rpc, pending).await
    }

    /// The settlement key says it is alive (this key must be the settler).
    pub async fn heartbeat(&self) -> Result<Sent, AnchorError> {
        let what = "sending the settlement key's heartbeat";
        self.need_key(what)?;
        let call = self.contract.heartbeat();
        call.call().await.map_err(|e| self.call_error(what, e))?;
        let pending = call.send().await.map_err(|e| self.call_error(what, e))?;
        mined(what, &self.rpc, pending).await
    }

    fn need_key(&self, what: &str) -> Result<Address, AnchorError> {
        self.sender.ok_or_else(|| AnchorError::ReadOnly {
            what: what.to_string(),
        })
    }

    fn call_error(&self, what: &str, e: alloy::contract::Error) -> AnchorError {
        call_error(what, &self.rpc, self.address, e)
    }
}
