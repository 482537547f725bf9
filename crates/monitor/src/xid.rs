//! What an XID code means and how bad it is, after NVIDIA's XID catalog ("XID Errors",
//! NVIDIA GPU deployment documentation): codes caused by the application are informational,
//! codes that point at memory, the bus, NVLink or the GPU's own processor are critical.

use crate::alert::Severity;

/// The severity and a short description of an XID code.
pub fn describe(code: u32) -> (Severity, &'static str) {
    use Severity::*;
    match code {
        13 => (Warning, "graphics engine exception (often the application)"),
        31 => (Warning, "GPU memory page fault (often the application)"),
        32 => (Warning, "invalid or corrupted push buffer stream"),
        43 => (Info, "GPU stopped processing (a user application fault)"),
        45 => (Info, "preemptive cleanup after an earlier error"),
        48 => (Critical, "double-bit ECC error"),
        61 | 62 => (Critical, "internal micro-controller error"),
        63 => (Warning, "ECC page retirement or row remapping recorded"),
        64 => (Critical, "ECC page retirement or row remapping failed"),
        68 => (Critical, "video processor exception"),
        74 => (Critical, "NVLink error"),
        79 => (Critical, "GPU has fallen off the bus"),
        92 => (Critical, "high single-bit ECC error rate"),
        94 => (Critical, "contained ECC error"),
        95 => (Critical, "uncontained ECC error"),
        119 | 120 => (Critical, "GSP (GPU system processor) timeout or error"),
        140 => (Critical, "unrecovered ECC error"),
        _ => (Warning, "XID error (see NVIDIA's XID catalog)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hardware_codes_are_critical_and_application_codes_are_not() {
        assert_eq!(describe(79).0, Severity::Critical);
        assert_eq!(describe(48).0, Severity::Critical);
        assert_eq!(describe(95).0, Severity::Critical);
        assert_eq!(describe(43).0, Severity::Info);
        assert_eq!(describe(13).0, Severity::Warning);
        assert_eq!(describe(999).0, Severity::Warning);
    }
}
