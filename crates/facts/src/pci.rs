//! PCI identities in one canonical form, so that NVML ("00000000:00:06.0"), sysfs
//! ("0000:00:06.0"), nvidia-smi and CUDA (domain, bus and device numbers) can be joined.

use serde::{Deserialize, Serialize};
use std::fmt;

/// NVIDIA's PCI vendor id.
pub const NVIDIA_VENDOR_ID: u16 = 0x10de;

/// A PCI address `domain:bus:device.function`, printed as `dddd:bb:dd.f` in lower case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct BusId {
    /// PCI domain (segment).
    pub domain: u32,
    /// Bus number.
    pub bus: u8,
    /// Device number, below 32.
    pub device: u8,
    /// Function number, below 8.
    pub function: u8,
}

impl BusId {
    /// Parses any of the spellings the sources use: a domain of 4 or 8 hex digits (or none),
    /// upper or lower case. Returns `None` for anything else.
    pub fn parse(text: &str) -> Option<BusId> {
        let text = text.trim();
        let (rest, function) = text.rsplit_once('.')?;
        let mut parts = rest.rsplitn(3, ':');
        let device = parts.next()?;
        let bus = parts.next()?;
        let domain = parts.next().unwrap_or("0");
        let hex = |s: &str, max_len: usize| {
            (!s.is_empty() && s.len() <= max_len && s.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| u32::from_str_radix(s, 16).ok())
                .flatten()
        };
        let bus_id = BusId {
            domain: hex(domain, 8)?,
            bus: u8::try_from(hex(bus, 2)?).ok()?,
            device: u8::try_from(hex(device, 2)?).ok()?,
            function: u8::try_from(hex(function, 1)?).ok()?,
        };
        (bus_id.device < 32 && bus_id.function < 8).then_some(bus_id)
    }
}

impl fmt::Display for BusId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

impl TryFrom<String> for BusId {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        BusId::parse(&s).ok_or_else(|| format!("not a PCI bus id: {s:?}"))
    }
}

impl From<BusId> for String {
    fn from(b: BusId) -> String {
        b.to_string()
    }
}

/// Parses a hex number with or without `0x` ("0x2335", "2335").
pub fn parse_hex(text: &str) -> Option<u32> {
    let t = text.trim();
    let t = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    u32::from_str_radix(t, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_source_spelling_joins() {
        let nvml = BusId::parse("00000000:00:06.0").unwrap();
        let sysfs = BusId::parse("0000:00:06.0").unwrap();
        let short = BusId::parse("00:06.0").unwrap();
        assert_eq!(nvml, sysfs);
        assert_eq!(nvml, short);
        assert_eq!(nvml.to_string(), "0000:00:06.0");
        assert_eq!(
            BusId::parse("0000:C1:1F.7").unwrap().to_string(),
            "0000:c1:1f.7"
        );
    }

    #[test]
    fn garbage_is_rejected() {
        for bad in [
            "",
            "0000:00:06",
            "zz:00.0",
            "0000:100:00.0",
            "0:0:40.0",
            "0:0:1.8",
            "a:b:c:d.0",
        ] {
            assert_eq!(BusId::parse(bad), None, "{bad}");
        }
        assert_eq!(parse_hex("0x2335"), Some(0x2335));
        assert_eq!(parse_hex("233510DE"), Some(0x2335_10de));
        assert_eq!(parse_hex("N/A"), None);
    }

    proptest! {
        #[test]
        fn display_then_parse_is_identity(domain in 0u32..0x1_0000, bus: u8, device in 0u8..32, function in 0u8..8) {
            let id = BusId { domain, bus, device, function };
            prop_assert_eq!(BusId::parse(&id.to_string()), Some(id));
        }

        #[test]
        fn parse_never_panics(s in ".{0,40}") {
            let _ = BusId::parse(&s);
        }
    }
}
