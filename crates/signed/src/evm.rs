//! [`EvmAddress`]: an Ethereum (EVM) account address, the one spelling records carry.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// A 20-byte EVM account address: where a GPU's owner wants its token (`pog agent
/// --token-owner`). Spelled everywhere as `0x` and 40 lowercase hex digits, the form a
/// contract writes with OpenZeppelin's `Strings.toHexString(address)`, so that a record's
/// JSON and the bytes `contracts/GpuScores.sol` rebuilds agree. Any case is read; the EIP-55
/// checksum of a mixed-case address is not checked (a contract holds no checksum either).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EvmAddress(pub [u8; 20]);

/// The text is not `0x` and 40 hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an EVM address (0x and 40 hex digits)")]
pub struct BadEvmAddress(pub String);

impl EvmAddress {
    /// The zero address: "none named" where a record must carry one.
    pub const ZERO: EvmAddress = EvmAddress([0; 20]);

    /// Whether this is the zero address.
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 20]
    }
}

impl FromStr for EvmAddress {
    type Err = BadEvmAddress;
    fn from_str(text: &str) -> Result<EvmAddress, BadEvmAddress> {
        let bad = || BadEvmAddress(text.chars().take(64).collect());
        let digits = text.strip_prefix("0x").ok_or_else(bad)?;
        if digits.len() != 40 {
            return Err(bad());
        }
        let mut bytes = [0u8; 20];
        hex::decode_to_slice(digits, &mut bytes).map_err(|_| bad())?;
        Ok(EvmAddress(bytes))
    }
}

impl fmt::Display for EvmAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{}", hex::encode(self.0))
    }
}

impl Serialize for EvmAddress {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for EvmAddress {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<EvmAddress, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_reads_in_any_case_and_is_written_lowercase() {
        let a: EvmAddress = "0xF39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
            .parse()
            .unwrap();
        assert_eq!(a.to_string(), "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266");
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            "\"0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266\""
        );
        assert_eq!(
            serde_json::from_str::<EvmAddress>("\"0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266\"")
                .unwrap(),
            a
        );
        assert!(!a.is_zero());
        assert!(EvmAddress::ZERO.is_zero());
        assert_eq!(
            EvmAddress::ZERO.to_string(),
            "0x0000000000000000000000000000000000000000"
        );
    }

    #[test]
    fn anything_but_0x_and_40_hex_digits_is_refused() {
        for bad in [
            "",
            "0x",
            "f39fd6e51aad88f6f4ce6ab8827279cfffb92266",
            "0xf39fd6e51aad88f6f4ce6ab8827279cfffb9226",
            "0xf39fd6e51aad88f6f4ce6ab8827279cfffb922666",
            "0xg39fd6e51aad88f6f4ce6ab8827279cfffb92266",
            " 0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266",
        ] {
            assert!(bad.parse::<EvmAddress>().is_err(), "{bad:?} was read");
        }
        assert!(serde_json::from_str::<EvmAddress>("\"0x12\"").is_err());
    }
}
