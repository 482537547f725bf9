//! The facts pog works with, and the seams it reads them through.
//!
//! This crate holds no hardware code. It defines what each source reports ([`facts`]), the
//! [`Reading`] convention for a figure that may be missing, what a benchmark asks a GPU to do
//! and what comes back ([`compute`], [`telemetry`], [`hostbench`]), and the [`Platform`] trait
//! that puts every source behind one seam. `pog-device` implements it for real hardware and
//! `pog-sim` for the simulated test double; `pog-inspect` and `pog-bench` depend only on this
//! crate, so their logic is tested without a GPU library in sight.

#![warn(missing_docs)]

pub mod compute;
pub mod facts;
pub mod hostbench;
pub mod pci;
mod platform;
pub mod reading;
pub mod telemetry;

pub use compute::*;
pub use facts::*;
pub use pci::BusId;
pub use platform::{collect, Platform};
pub use reading::Reading;

/// Serde for a `u64` that is an identifier rather than a quantity (a seed): a `0x…` hex
/// string, as every binary value in pog's JSON is, and exact where JSON numbers are not
/// (JavaScript loses integers above 2^53).
pub mod hex_u64 {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `value` as a `0x` string of 16 hex digits.
    pub fn serialize<S: Serializer>(value: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{value:#018x}"))
    }

    /// Reads a hex string, with or without the `0x` prefix.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let text = String::deserialize(d)?;
        let digits = text.strip_prefix("0x").unwrap_or(&text);
        u64::from_str_radix(digits, 16).map_err(serde::de::Error::custom)
    }
}
