//! What pog signs and how: the vocabulary every signed message and record shares.
//!
//! - [`Identity`] and [`PublicKey`]: an Ed25519 key pair, and a public key in its one
//!   canonical spelling (64 lowercase hex digits), so that one key is one identity wherever
//!   it is compared or stored.
//! - [`Envelope`] and [`decode`]: a message signed over its kind and exact JSON text, and the
//!   bounded decoder every network input goes through (size, version, kind, strict signature,
//!   then the body): a malformed, oversized or forged message is an error, never a panic.
//! - [`RecordKind`]: the kinds of signed records, each with its wire name (the kind it is
//!   signed under), its byte in the ledger's framing, and who signs it.
//! - [`GpuUuid`]: the GPU a message or record is about.
//! - [`EvmAddress`]: an EVM account (where a GPU's owner wants its token).
//!
//! The crate is small and knows no protocol: the proof's messages (`pog_proof::wire`), the
//! record bodies (`pog_records`) and the ledger's framing (`pog_ledger`) are built on it.

#![warn(missing_docs)]

mod envelope;
mod evm;
mod gpu;
mod identity;
mod key;
mod kind;
mod text;

pub use envelope::{
    decode, signed_bytes, BadSignature, Envelope, WireError, MAX_MESSAGE_BYTES, WIRE_VERSION,
};
pub use evm::{BadEvmAddress, EvmAddress};
pub use gpu::{BadGpuUuid, GpuUuid};
pub use identity::Identity;
pub use key::{KeyError, PublicKey};
pub use kind::RecordKind;

/// `N` bytes of the operating system's randomness: nonces, spot-check secrets, ids.
///
/// # Panics
/// When the operating system gives no randomness at all (no `getrandom`, no `/dev/urandom`):
/// nothing secure can be made then.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).expect("the operating system's randomness");
    bytes
}
