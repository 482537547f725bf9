//! The GPU a message or record is about.

use serde::{Deserialize, Deserializer, Serialize};

/// A GPU's UUID as NVML reports it (`GPU-6e0a4c6f-…`): 1 to [`GpuUuid::MAX_BYTES`] bytes of
/// printable ASCII. Every record names one, and the ledger frames each entry by it.
///
/// The bounds hold for every value of the type (made by [`GpuUuid::new`] or deserialized), so
/// a UUID accepted anywhere fits the ledger's framing and never turns a stored record into
/// one that cannot be read back.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct GpuUuid(String);

/// Why a GPU UUID was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a GPU UUID is 1 to 128 bytes of printable ASCII, got {0:?}")]
pub struct BadGpuUuid(pub String);

// The error message spells the bound out.
const _: () = assert!(GpuUuid::MAX_BYTES == 128);

impl GpuUuid {
    /// The longest UUID accepted (the ledger frames it behind a one-byte length).
    pub const MAX_BYTES: usize = 128;

    /// The UUID, if it is 1 to [`GpuUuid::MAX_BYTES`] bytes of printable ASCII.
    pub fn new(uuid: impl Into<String>) -> Result<GpuUuid, BadGpuUuid> {
        let uuid = uuid.into();
        if uuid.is_empty()
            || uuid.len() > GpuUuid::MAX_BYTES
            || !uuid.bytes().all(|b| b.is_ascii_graphic())
        {
            // Quote at most the first bytes of a long one: errors are logged and returned.
            let shown = uuid.chars().take(GpuUuid::MAX_BYTES).collect();
            return Err(BadGpuUuid(shown));
        }
        Ok(GpuUuid(uuid))
    }

    /// The UUID as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for GpuUuid {
    type Error = BadGpuUuid;
    fn try_from(uuid: String) -> Result<GpuUuid, BadGpuUuid> {
        GpuUuid::new(uuid)
    }
}

impl TryFrom<&str> for GpuUuid {
    type Error = BadGpuUuid;
    fn try_from(uuid: &str) -> Result<GpuUuid, BadGpuUuid> {
        GpuUuid::new(uuid)
    }
}

impl std::str::FromStr for GpuUuid {
    type Err = BadGpuUuid;
    fn from_str(uuid: &str) -> Result<GpuUuid, BadGpuUuid> {
        GpuUuid::new(uuid)
    }
}

impl<'de> Deserialize<'de> for GpuUuid {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<GpuUuid, D::Error> {
        GpuUuid::new(String::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

crate::text::read_as_text!(GpuUuid);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_short_printable_uuids_are_gpu_uuids() {
        assert_eq!(GpuUuid::new("GPU-1").unwrap(), "GPU-1");
        for bad in ["", "GPU 1", "GPU-\u{e9}", "GPU-\n"] {
            assert!(GpuUuid::new(bad).is_err(), "{bad:?}");
        }
        assert!(GpuUuid::new("x".repeat(GpuUuid::MAX_BYTES)).is_ok());
        let long = GpuUuid::new("x".repeat(10_000)).unwrap_err();
        assert_eq!(
            long.0.len(),
            GpuUuid::MAX_BYTES,
            "a long one is quoted cut short"
        );
        assert!(serde_json::from_str::<GpuUuid>("\"\"").is_err());
        assert_eq!(
            serde_json::from_str::<GpuUuid>("\"GPU-7a75\"").unwrap(),
            GpuUuid::new("GPU-7a75").unwrap()
        );
    }
}
