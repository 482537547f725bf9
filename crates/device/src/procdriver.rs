//! `/proc/driver/nvidia`: the kernel module's version line and its per-GPU information files.

use crate::facts::{ProcDriver, ProcGpu};
use crate::pci::BusId;
use crate::reading::Reading;
use std::path::{Path, PathBuf};

/// A file under `/proc/driver/nvidia` that exists in the listing but could not be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {}: {error}", path.display())]
pub struct UnreadableFile {
    /// The file.
    pub path: PathBuf,
    /// Why it could not be read.
    pub error: std::io::Error,
}

/// Reads `<proc_root>/driver/nvidia/{version,gpus/*/information}`.
pub fn read(proc_root: &Path) -> Reading<ProcDriver> {
    let base = proc_root.join("driver/nvidia");
    let version_text = match std::fs::read_to_string(base.join("version")) {
        Ok(text) => text,
        Err(e) => {
            return Reading::unavailable(format!(
                "{}: {e} (is the nvidia kernel module loaded?)",
                base.join("version").display()
            ))
        }
    };
    let version_line = version_text
        .lines()
        .find(|l| l.starts_with("NVRM"))
        .map(str::trim)
        .map(str::to_string);
    let version = version_line
        .as_deref()
        .and_then(parse_version_line)
        .map_or_else(
            || Reading::unavailable("no NVRM version line"),
            Reading::Value,
        );
    let mut gpus = Vec::new();
    if let Ok(entries) = std::fs::read_dir(base.join("gpus")) {
        for entry in entries.flatten() {
            let Some(bus_id) = entry.file_name().to_str().and_then(BusId::parse) else {
                continue;
            };
            let path = entry.path().join("information");
            let info =
                std::fs::read_to_string(&path).map_err(|error| UnreadableFile { path, error });
            gpus.push(parse_information(bus_id, info));
        }
    }
    gpus.sort_by_key(|g| g.bus_id);
    Reading::Value(ProcDriver {
        version,
        version_line: version_line
            .map_or_else(|| Reading::unavailable("no NVRM line"), Reading::Value),
        gpus,
    })
}

/// The version number in "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Tue …":
/// the first word shaped like `digits.digits[.digits]` after "Module".
pub fn parse_version_line(line: &str) -> Option<String> {
    let after = line.split_once("Module").map_or(line, |(_, rest)| rest);
    after
        .split_whitespace()
        .find(|w| {
            let parts: Vec<_> = w.split('.').collect();
            parts.len() >= 2
                && parts
                    .iter()
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(str::to_string)
}

/// Parses one `information` file ("Model: NVIDIA H200", "GPU UUID: GPU-…", …).
/// A file that could not be read makes every field unavailable with its reason.
pub fn parse_information(bus_id: BusId, text: Result<String, UnreadableFile>) -> ProcGpu {
    let text = match text {
        Ok(t) => t,
        Err(e) => {
            let why = e.to_string();
            return ProcGpu {
                bus_id,
                model: Reading::unavailable(why.as_str()),
                uuid: Reading::unavailable(why.as_str()),
                vbios: Reading::unavailable(why.as_str()),
                bus_type: Reading::unavailable(why.as_str()),
                minor: Reading::unavailable(why.as_str()),
            };
        }
    };
    let field = |key: &str| -> Reading<String> {
        text.lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim() == key)
            .map(|(_, v)| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .map_or_else(
                || Reading::unavailable(format!("no \"{key}\" line")),
                Reading::Value,
            )
    };
    ProcGpu {
        bus_id,
        model: field("Model"),
        uuid: field("GPU UUID"),
        vbios: field("Video BIOS"),
        bus_type: field("Bus Type"),
        minor: field("Device Minor")
            .and_then(|m| m.parse().map_err(|_| format!("bad minor {m:?}")).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "Model: \t\t NVIDIA H200\nIRQ:   \t\t 39\nGPU UUID: \t GPU-f98a5a30-c00c-6706-ca38-52de3bc7bfa1\n\
        Video BIOS: \t 96.00.a5.00.1a\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\n\
        Bus Location: \t 0000:00:06.0\nDevice Minor: \t 0\nGPU Firmware: \t 580.159.04\nGPU Excluded:\t No\n";

    #[test]
    fn reads_version_and_gpus_from_a_proc_tree() {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().join("driver/nvidia");
        std::fs::create_dir_all(base.join("gpus/0000:00:06.0")).unwrap();
        std::fs::write(
            base.join("version"),
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22)  Thu Oct 30 2025\nGCC version:  gcc version 12.3.0\n",
        )
        .unwrap();
        std::fs::write(base.join("gpus/0000:00:06.0/information"), INFO).unwrap();
        let report = read(root.path()).value().cloned().unwrap();
        assert_eq!(report.version.value().unwrap(), "580.159.04");
        assert_eq!(report.gpus.len(), 1);
        let g = &report.gpus[0];
        assert_eq!(g.model.value().unwrap(), "NVIDIA H200");
        assert_eq!(
            g.uuid.value().unwrap(),
            "GPU-f98a5a30-c00c-6706-ca38-52de3bc7bfa1"
        );
        assert_eq!(g.minor, Reading::Value(0));
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_files_never_panic(text in "(?s).{0,300}") {
            let _ = parse_version_line(&text);
            let _ = parse_information(BusId::parse("0000:00:06.0").unwrap(), Ok(text));
        }
    }

    #[test]
    fn absent_module_and_bad_files_are_reasons() {
        let root = tempfile::tempdir().unwrap();
        assert!(
            matches!(read(root.path()), Reading::Unavailable(w) if w.contains("kernel module"))
        );
        let bus = BusId::parse("0000:00:06.0").unwrap();
        let g = parse_information(bus, Ok("garbage\nDevice Minor: x".into()));
        assert!(matches!(g.model, Reading::Unavailable(_)));
        assert!(matches!(g.minor, Reading::Unavailable(_)));
        let unreadable = UnreadableFile {
            path: "/proc/driver/nvidia/gpus/0000:00:06.0/information".into(),
            error: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        };
        let g = parse_information(bus, Err(unreadable));
        assert_eq!(
            g.uuid,
            Reading::unavailable(
                "cannot read /proc/driver/nvidia/gpus/0000:00:06.0/information: permission denied"
            )
        );
        assert_eq!(parse_version_line("NVRM version: nonsense"), None);
        assert_eq!(
            parse_version_line(
                "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19"
            ),
            Some("535.104.05".into())
        );
    }
}
