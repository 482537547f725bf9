//! `/sys/bus/pci/devices`: the kernel's own list of NVIDIA GPUs on the bus. Userspace shims
//! (LD_PRELOAD, a fake nvidia-smi) cannot change it, which makes it the anchor the other
//! sources are checked against.

use crate::facts::PciGpu;
use crate::pci::{parse_hex, BusId, NVIDIA_VENDOR_ID};
use crate::reading::Reading;
use std::path::Path;

/// PCI base class of display controllers (VGA 0x0300xx, 3D 0x0302xx).
const DISPLAY_CLASS: u32 = 0x03;

/// Lists NVIDIA display-class functions under `<sysfs_root>/bus/pci/devices`.
pub fn scan(sysfs_root: &Path) -> Reading<Vec<PciGpu>> {
    let dir = sysfs_root.join("bus/pci/devices");
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) => return Reading::unavailable(format!("cannot list {}: {e}", dir.display())),
    };
    let mut gpus: Vec<PciGpu> = entries
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| read_function(&entry.path()))
        .collect();
    gpus.sort_by_key(|g| g.bus_id);
    Reading::Value(gpus)
}

/// Reads one PCI function; `None` when it is not an NVIDIA display device (or unreadable
/// enough that it cannot be told to be one).
fn read_function(path: &Path) -> Option<PciGpu> {
    let bus_id = BusId::parse(path.file_name()?.to_str()?)?;
    let hex_attr = |name: &str| -> Reading<u32> {
        read_attr(path, name).and_then(|s| {
            parse_hex(&s).map_or_else(
                || Reading::unavailable(format!("{name}: not hex: {s:?}")),
                Reading::Value,
            )
        })
    };
    if hex_attr("vendor").value() != Some(&u32::from(NVIDIA_VENDOR_ID)) {
        return None;
    }
    let class = *hex_attr("class").value()?;
    if class >> 16 != DISPLAY_CLASS {
        return None;
    }
    let device_id = u16::try_from(*hex_attr("device").value()?).ok()?;
    let as_u16 =
        |r: Reading<u32>| r.and_then(|v| u16::try_from(v).map_err(|_| "out of range").into());
    Some(PciGpu {
        bus_id,
        device_id,
        subsystem_vendor: as_u16(hex_attr("subsystem_vendor")),
        subsystem_device: as_u16(hex_attr("subsystem_device")),
        class,
        current_link_speed: read_attr(path, "current_link_speed"),
        current_link_width: read_number(path, "current_link_width"),
        max_link_speed: read_attr(path, "max_link_speed"),
        max_link_width: read_number(path, "max_link_width"),
        driver: std::fs::read_link(path.join("driver"))
            .map_err(|e| format!("no driver bound: {e}"))
            .and_then(|target| {
                target
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .ok_or_else(|| "driver link has no name".to_string())
            })
            .into(),
        numa_node: read_number(path, "numa_node"),
    })
}

fn read_attr(dir: &Path, name: &str) -> Reading<String> {
    match std::fs::read_to_string(dir.join(name)) {
        Ok(s) => Reading::Value(s.trim().to_string()),
        Err(e) => Reading::unavailable(format!("{}: {e}", dir.join(name).display())),
    }
}

fn read_number<T: std::str::FromStr>(dir: &Path, name: &str) -> Reading<T> {
    read_attr(dir, name).and_then(|s| {
        s.parse().map_or_else(
            |_| Reading::unavailable(format!("{name}: not a number: {s:?}")),
            Reading::Value,
        )
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::fs;

    /// Writes a sysfs-like PCI function into `root` (used by other modules' tests too).
    pub(crate) fn write_function(root: &Path, bus_id: &str, attrs: &[(&str, &str)]) {
        let dir = root.join("bus/pci/devices").join(bus_id);
        fs::create_dir_all(&dir).unwrap();
        for (name, value) in attrs {
            fs::write(dir.join(name), format!("{value}\n")).unwrap();
        }
    }

    pub(crate) fn h200_attrs() -> Vec<(&'static str, &'static str)> {
        vec![
            ("vendor", "0x10de"),
            ("device", "0x2335"),
            ("subsystem_vendor", "0x10de"),
            ("subsystem_device", "0x18bf"),
            ("class", "0x030200"),
            ("current_link_speed", "32.0 GT/s PCIe"),
            ("current_link_width", "16"),
            ("max_link_speed", "32.0 GT/s PCIe"),
            ("max_link_width", "16"),
            ("numa_node", "-1"),
        ]
    }

    #[test]
    fn finds_nvidia_display_functions_only() {
        let root = tempfile::tempdir().unwrap();
        write_function(root.path(), "0000:00:06.0", &h200_attrs());
        // An NVIDIA audio function and another vendor's GPU are not GPUs we report.
        write_function(
            root.path(),
            "0000:00:06.1",
            &[
                ("vendor", "0x10de"),
                ("class", "0x040300"),
                ("device", "0x22e8"),
            ],
        );
        write_function(
            root.path(),
            "0000:00:02.0",
            &[
                ("vendor", "0x8086"),
                ("class", "0x030000"),
                ("device", "0x1234"),
            ],
        );
        let gpus = scan(root.path()).value().cloned().unwrap();
        assert_eq!(gpus.len(), 1);
        let g = &gpus[0];
        assert_eq!(g.bus_id.to_string(), "0000:00:06.0");
        assert_eq!(g.device_id, 0x2335);
        assert_eq!(g.subsystem_device, Reading::Value(0x18bf));
        assert_eq!(g.current_link_width, Reading::Value(16));
        assert_eq!(g.numa_node, Reading::Value(-1));
        assert!(matches!(g.driver, Reading::Unavailable(_)));
        assert_eq!(
            g.max_link_speed,
            Reading::Value("32.0 GT/s PCIe".to_string())
        );
    }

    #[test]
    fn unreadable_fields_and_trees_are_reported_not_fatal() {
        let root = tempfile::tempdir().unwrap();
        let mut attrs = h200_attrs();
        attrs.retain(|(k, _)| *k != "max_link_width");
        attrs.push(("current_link_width", "sixteen"));
        write_function(root.path(), "0000:41:00.0", &attrs);
        let gpus = scan(root.path()).value().cloned().unwrap();
        assert!(matches!(&gpus[0].max_link_width, Reading::Unavailable(_)));
        assert!(
            matches!(&gpus[0].current_link_width, Reading::Unavailable(w) if w.contains("not a number"))
        );
        assert!(matches!(
            scan(&root.path().join("missing")),
            Reading::Unavailable(_)
        ));
    }
}
