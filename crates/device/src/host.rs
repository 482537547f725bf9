//! The host around the GPUs: CPU, memory, storage, OS. Read from procfs and sysfs (roots are
//! parameters so the parsers run on fixture trees in tests).

use crate::facts::{CpuInfo, HostInfo, StorageDevice};
use crate::reading::Reading;
use procfs_core::{CpuInfo as ProcCpuInfo, FromRead};
use std::collections::BTreeSet;
use std::path::Path;

/// Block devices that are not storage hardware.
const VIRTUAL_BLOCK_PREFIXES: [&str; 6] = ["loop", "ram", "zram", "dm-", "md", "sr"];

/// Where the host's facts are read from.
pub struct HostRoots<'a> {
    /// procfs (`/proc` on a live host): hostname, kernel release, CPUs, memory.
    pub proc_root: &'a Path,
    /// sysfs (`/sys`): block devices and the CPU's maximum clock.
    pub sysfs_root: &'a Path,
    /// The directory holding `os-release` (`/etc`).
    pub etc_root: &'a Path,
}

/// Reads everything about the host; each part fails on its own.
pub fn read(roots: &HostRoots) -> HostInfo {
    let read_text = |path: &Path| -> Reading<String> {
        std::fs::read_to_string(path)
            .map(|s| s.trim().to_string())
            .map_err(|e| format!("{}: {e}", path.display()))
            .into()
    };
    HostInfo {
        hostname: read_text(&roots.proc_root.join("sys/kernel/hostname")),
        os: read_text(&roots.etc_root.join("os-release")).and_then(|t| {
            os_pretty_name(&t).map_or_else(
                || Reading::unavailable("no NAME in os-release"),
                Reading::Value,
            )
        }),
        kernel: read_text(&roots.proc_root.join("sys/kernel/osrelease")),
        cpu: read_text(&roots.proc_root.join("cpuinfo")).and_then(|text| {
            let max_khz = read_text(
                &roots
                    .sysfs_root
                    .join("devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"),
            );
            parse_cpuinfo(
                &text,
                max_khz.and_then(|k| k.parse::<f64>().map_err(|e| e.to_string()).into()),
            )
        }),
        memory_total_bytes: read_text(&roots.proc_root.join("meminfo")).and_then(|t| {
            mem_total_bytes(&t).map_or_else(
                || Reading::unavailable("no MemTotal line in meminfo"),
                Reading::Value,
            )
        }),
        storage: storage(&roots.sysfs_root.join("block")),
    }
}

/// `MemTotal` from meminfo text, in bytes. (procfs-core's Meminfo insists on a dozen other
/// fields that container sandboxes often omit; only this one is needed.)
pub fn mem_total_bytes(meminfo: &str) -> Option<u64> {
    let rest = meminfo.lines().find_map(|l| l.strip_prefix("MemTotal:"))?;
    let kib: u64 = rest.split_whitespace().next()?.parse().ok()?;
    kib.checked_mul(1024)
}

/// `PRETTY_NAME` (or `NAME`) from os-release text.
pub fn os_pretty_name(text: &str) -> Option<String> {
    let get = |key: &str| {
        text.lines()
            .filter_map(|l| l.split_once('='))
            .find(|(k, _)| k.trim() == key)
            .map(|(_, v)| v.trim().trim_matches('"').to_string())
            .filter(|v| !v.is_empty())
    };
    get("PRETTY_NAME").or_else(|| get("NAME"))
}

/// Summarizes `/proc/cpuinfo`; `max_khz` is cpufreq's maximum for cpu0, if known.
pub fn parse_cpuinfo(text: &str, max_khz: Reading<f64>) -> Reading<CpuInfo> {
    let info = match ProcCpuInfo::from_read(text.as_bytes()) {
        Ok(info) => info,
        Err(e) => return Reading::unavailable(format!("cpuinfo: {e}")),
    };
    let threads = info.num_cores();
    if threads == 0 || info.get_field(0, "processor").is_none() {
        return Reading::unavailable("cpuinfo lists no processor");
    }
    let sockets: BTreeSet<&str> = (0..threads)
        .filter_map(|i| info.get_field(i, "physical id"))
        .collect();
    let cores: BTreeSet<(&str, &str)> = (0..threads)
        .filter_map(|i| {
            Some((
                info.get_field(i, "physical id")?,
                info.get_field(i, "core id")?,
            ))
        })
        .collect();
    let mhz: Vec<f64> = (0..threads)
        .filter_map(|i| info.get_field(i, "cpu MHz")?.trim().parse().ok())
        .collect();
    let flags: Vec<String> = info
        .flags(0)
        .unwrap_or_default()
        .into_iter()
        .map(str::to_string)
        .collect();
    Reading::Value(CpuInfo {
        model: info.model_name(0).unwrap_or("unknown").trim().to_string(),
        vendor: info.vendor_id(0).unwrap_or("unknown").trim().to_string(),
        sockets: sockets.len().max(1) as u32,
        cores: if cores.is_empty() {
            threads as u32
        } else {
            cores.len() as u32
        },
        threads: threads as u32,
        mhz_current: if mhz.is_empty() {
            Reading::unavailable("no \"cpu MHz\" in cpuinfo")
        } else {
            Reading::Value(mhz.iter().sum::<f64>() / mhz.len() as f64)
        },
        mhz_max: max_khz.map(|khz| khz / 1000.0),
        hypervisor: flags.iter().any(|f| f == "hypervisor"),
        flags,
    })
}

/// Block devices under `/sys/block` that are real (or virtual-machine) disks.
fn storage(block_dir: &Path) -> Reading<Vec<StorageDevice>> {
    let entries = match std::fs::read_dir(block_dir) {
        Ok(entries) => entries,
        Err(e) => return Reading::unavailable(format!("{}: {e}", block_dir.display())),
    };
    let mut devices: Vec<StorageDevice> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            if VIRTUAL_BLOCK_PREFIXES.iter().any(|p| name.starts_with(p)) {
                return None;
            }
            let dir = entry.path();
            let attr = |rel: &str| -> Reading<String> {
                std::fs::read_to_string(dir.join(rel))
                    .map(|s| s.trim().to_string())
                    .map_err(|e| format!("{rel}: {e}"))
                    .into()
            };
            Some(StorageDevice {
                model: attr("device/model").and_then(|m| {
                    if m.is_empty() {
                        Reading::unavailable("empty model")
                    } else {
                        Reading::Value(m)
                    }
                }),
                size_bytes: attr("size").and_then(|s| {
                    s.parse::<u64>()
                        .map(|sectors| sectors * 512)
                        .map_err(|e| e.to_string())
                        .into()
                }),
                rotational: attr("queue/rotational").and_then(|r| match r.as_str() {
                    "0" => Reading::Value(false),
                    "1" => Reading::Value(true),
                    other => Reading::unavailable(format!("rotational = {other:?}")),
                }),
                name,
            })
        })
        .collect();
    devices.sort_by(|a, b| a.name.cmp(&b.name));
    Reading::Value(devices)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    const CPUINFO: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n\
physical id\t: 0\ncore id\t\t: 0\ncpu MHz\t\t: 2000.000\nflags\t\t: fpu avx2 avx512f hypervisor\n\n\
processor\t: 1\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n\
physical id\t: 0\ncore id\t\t: 0\ncpu MHz\t\t: 3000.000\nflags\t\t: fpu avx2 avx512f hypervisor\n\n\
processor\t: 2\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n\
physical id\t: 1\ncore id\t\t: 0\ncpu MHz\t\t: 2500.000\nflags\t\t: fpu avx2 avx512f hypervisor\n\n";

    #[test]
    fn cpuinfo_counts_sockets_cores_threads_and_sees_the_hypervisor() {
        let cpu = parse_cpuinfo(CPUINFO, Reading::Value(3_800_000.0))
            .value()
            .cloned()
            .unwrap();
        assert_eq!((cpu.sockets, cpu.cores, cpu.threads), (2, 2, 3));
        assert_eq!(cpu.model, "Intel(R) Xeon(R) Platinum 8480+");
        assert_eq!(cpu.mhz_current, Reading::Value(2500.0));
        assert_eq!(cpu.mhz_max, Reading::Value(3800.0));
        assert!(cpu.hypervisor);
        let bare = CPUINFO.replace(" hypervisor", "");
        assert!(
            !parse_cpuinfo(&bare, Reading::unavailable("vm"))
                .value()
                .unwrap()
                .hypervisor
        );
        assert!(matches!(
            parse_cpuinfo("", Reading::unavailable("x")),
            Reading::Unavailable(_)
        ));
    }

    #[test]
    fn reads_a_fixture_host_tree() {
        let root = tempfile::tempdir().unwrap();
        let p = |rel: &str| root.path().join(rel);
        fs::create_dir_all(p("proc/sys/kernel")).unwrap();
        fs::create_dir_all(p("etc")).unwrap();
        fs::write(p("proc/cpuinfo"), CPUINFO).unwrap();
        fs::write(
            p("proc/meminfo"),
            "MemTotal:       131072000 kB\nMemFree: 1 kB\n",
        )
        .unwrap();
        fs::write(p("proc/sys/kernel/hostname"), "gpu-host-7\n").unwrap();
        fs::write(p("proc/sys/kernel/osrelease"), "6.8.0-49-generic\n").unwrap();
        fs::write(
            p("etc/os-release"),
            "NAME=\"Ubuntu\"\nPRETTY_NAME=\"Ubuntu 24.04.1 LTS\"\n",
        )
        .unwrap();
        for (dev, model, rot) in [
            ("nvme0n1", "SAMSUNG MZQL23T8HCLS", "0"),
            ("sda", "ST16000NM001G", "1"),
            ("loop0", "", "0"),
        ] {
            fs::create_dir_all(p(&format!("sys/block/{dev}/device"))).unwrap();
            fs::create_dir_all(p(&format!("sys/block/{dev}/queue"))).unwrap();
            fs::write(
                p(&format!("sys/block/{dev}/device/model")),
                format!("{model}\n"),
            )
            .unwrap();
            fs::write(p(&format!("sys/block/{dev}/queue/rotational")), rot).unwrap();
            fs::write(p(&format!("sys/block/{dev}/size")), "7501476528\n").unwrap();
        }
        let host = read(&HostRoots {
            proc_root: &p("proc"),
            sysfs_root: &p("sys"),
            etc_root: &p("etc"),
        });
        assert_eq!(host.hostname.value().unwrap(), "gpu-host-7");
        assert_eq!(host.os.value().unwrap(), "Ubuntu 24.04.1 LTS");
        assert_eq!(host.kernel.value().unwrap(), "6.8.0-49-generic");
        assert_eq!(host.memory_total_bytes, Reading::Value(131072000 * 1024));
        let disks = host.storage.value().unwrap();
        assert_eq!(disks.len(), 2, "loop devices are not storage");
        assert_eq!(disks[0].name, "nvme0n1");
        assert_eq!(disks[0].size_bytes, Reading::Value(7501476528 * 512));
        assert_eq!(disks[1].rotational, Reading::Value(true));
        // cpufreq absent, as in most VMs: unavailable, not fatal.
        assert!(matches!(
            host.cpu.value().unwrap().mhz_max,
            Reading::Unavailable(_)
        ));
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_proc_files_never_panic(text in "(?s).{0,400}") {
            let _ = parse_cpuinfo(&text, Reading::unavailable("x"));
            let _ = mem_total_bytes(&text);
            let _ = os_pretty_name(&text);
        }
    }

    #[test]
    fn a_missing_tree_is_unavailable_everywhere() {
        let gone = Path::new("/no/such/root");
        let host = read(&HostRoots {
            proc_root: gone,
            sysfs_root: gone,
            etc_root: gone,
        });
        assert!(matches!(host.cpu, Reading::Unavailable(_)));
        assert!(matches!(host.storage, Reading::Unavailable(_)));
    }
}
