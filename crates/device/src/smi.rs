//! `nvidia-smi -q -x`: run it (with a time-out) and parse its XML into [`GpuFacts`], so that
//! what nvidia-smi says can be compared field by field with NVML.

use crate::exec;
use crate::facts::{EccMode, GpuFacts, LinkFacts, RemappedRows, RetiredPages, SmiReport};
use crate::pci::{parse_hex, BusId};
use crate::reading::Reading;
use roxmltree::{Document, Node, ParsingOptions};
use std::path::Path;
use std::time::Duration;

/// Runs the given nvidia-smi binary and parses its report.
pub fn query(binary: &Path, timeout: Duration) -> Reading<SmiReport> {
    let xml = match exec::run_with_timeout(binary, &["-q", "-x"], timeout) {
        Ok(xml) => xml,
        Err(why) => return Reading::Unavailable(why.to_string()),
    };
    let resolved = std::fs::canonicalize(binary)
        .map(|p| p.display().to_string())
        .map_err(|e| format!("cannot resolve {}: {e}", binary.display()));
    match parse(&xml, &binary.display().to_string()) {
        Ok(mut report) => {
            report.binary_resolved = resolved.into();
            Reading::Value(report)
        }
        Err(why) => Reading::Unavailable(why.to_string()),
    }
}

/// Why nvidia-smi's report could not be read at all (a single garbled field only makes that
/// field unavailable). Each message names the binary that printed it.
#[derive(Debug, thiserror::Error)]
pub enum SmiError {
    /// The output is not XML.
    #[error("{binary} printed malformed XML: {error}")]
    Malformed {
        /// The binary that printed it.
        binary: String,
        /// Where and why parsing failed.
        error: roxmltree::Error,
    },
    /// The output is XML, but not nvidia-smi's report.
    #[error("{binary} printed XML with root <{root}>, expected <nvidia_smi_log>")]
    WrongRoot {
        /// The binary that printed it.
        binary: String,
        /// The root element's name.
        root: String,
    },
}

/// Parses the XML of `nvidia-smi -q -x`. `binary` is recorded as the report's source.
pub fn parse(xml: &str, binary: &str) -> Result<SmiReport, SmiError> {
    let options = ParsingOptions {
        allow_dtd: true,
        ..ParsingOptions::default()
    };
    let doc = Document::parse_with_options(xml, options).map_err(|error| SmiError::Malformed {
        binary: binary.to_string(),
        error,
    })?;
    let root = doc.root_element();
    if root.tag_name().name() != "nvidia_smi_log" {
        return Err(SmiError::WrongRoot {
            binary: binary.to_string(),
            root: root.tag_name().name().to_string(),
        });
    }
    let gpus = root
        .children()
        .filter(|n| n.has_tag_name("gpu"))
        .enumerate()
        .map(|(i, gpu)| gpu_facts(i as u32, gpu))
        .collect();
    Ok(SmiReport {
        binary: binary.to_string(),
        binary_resolved: Reading::unavailable("not resolved"),
        driver_version: text(root, "driver_version"),
        cuda_version: text(root, "cuda_version"),
        attached_gpus: number(root, "attached_gpus"),
        gpus,
    })
}

fn gpu_facts(index: u32, gpu: Node) -> GpuFacts {
    let pci_id = |path| text(gpu, path).and_then(|s| hex(&s));
    GpuFacts {
        index,
        name: text(gpu, "product_name"),
        uuid: text(gpu, "uuid"),
        serial: text(gpu, "serial"),
        board_part_number: text(gpu, "board_part_number"),
        board_id: text(gpu, "board_id").and_then(|s| hex(&s)),
        vbios_version: text(gpu, "vbios_version"),
        inforom_image: text(gpu, "inforom_version/img_version"),
        inforom_oem: text(gpu, "inforom_version/oem_object"),
        inforom_ecc: text(gpu, "inforom_version/ecc_object"),
        gsp_firmware: text(gpu, "gsp_firmware_version"),
        pci_bus_id: text(gpu, "pci/pci_bus_id").and_then(|s| {
            BusId::parse(&s).map_or_else(
                || Reading::unavailable(format!("bad bus id {s:?}")),
                Reading::Value,
            )
        }),
        pci_device_id: pci_id("pci/pci_device_id").map(|id| (id >> 16) as u16),
        pci_subsystem_id: pci_id("pci/pci_sub_system_id"),
        link: LinkFacts {
            current_gen: number(gpu, "pci/pci_gpu_link_info/pcie_gen/current_link_gen"),
            max_gen: number(gpu, "pci/pci_gpu_link_info/pcie_gen/max_link_gen"),
            current_width: number(gpu, "pci/pci_gpu_link_info/link_widths/current_link_width"),
            max_width: number(gpu, "pci/pci_gpu_link_info/link_widths/max_link_width"),
        },
        architecture: text(gpu, "product_architecture"),
        compute_capability: Reading::unavailable("not in nvidia-smi -q"),
        cuda_cores: Reading::unavailable("not in nvidia-smi -q"),
        memory_total_mib: number(gpu, "fb_memory_usage/total"),
        memory_reserved_mib: number(gpu, "fb_memory_usage/reserved"),
        memory_bus_bits: Reading::unavailable("not in nvidia-smi -q"),
        ecc: enabled(gpu, "ecc_mode/current_ecc").and_then(|current| {
            enabled(gpu, "ecc_mode/pending_ecc").map(|pending| EccMode { current, pending })
        }),
        retired_pages: retired_pages(gpu),
        remapped_rows: remapped_rows(gpu),
        max_sm_clock_mhz: number(gpu, "max_clocks/sm_clock"),
        max_memory_clock_mhz: number(gpu, "max_clocks/mem_clock"),
        power_limit_w: number(gpu, "gpu_power_readings/current_power_limit"),
        max_power_limit_w: number(gpu, "gpu_power_readings/max_power_limit"),
        virtualization_mode: text(gpu, "gpu_virtualization_mode/virtualization_mode"),
        mig_enabled: enabled(gpu, "mig_mode/current_mig"),
        persistence_mode: enabled(gpu, "persistence_mode"),
        nvlinks: Reading::unavailable("not read from nvidia-smi"),
    }
}

fn retired_pages(gpu: Node) -> Reading<RetiredPages> {
    let base = "retired_pages";
    number(
        gpu,
        &format!("{base}/multiple_single_bit_retirement/retired_count"),
    )
    .and_then(|single_bit| {
        number(gpu, &format!("{base}/double_bit_retirement/retired_count")).and_then(|double_bit| {
            yes_no(gpu, &format!("{base}/pending_retirement")).map(|pending| RetiredPages {
                single_bit,
                double_bit,
                pending,
            })
        })
    })
}

fn remapped_rows(gpu: Node) -> Reading<RemappedRows> {
    let base = "remapped_rows";
    number(gpu, &format!("{base}/remapped_row_corr")).and_then(|correctable| {
        number(gpu, &format!("{base}/remapped_row_unc")).and_then(|uncorrectable| {
            yes_no(gpu, &format!("{base}/remapped_row_pending")).and_then(|pending| {
                yes_no(gpu, &format!("{base}/remapped_row_failure")).map(|failure| RemappedRows {
                    correctable,
                    uncorrectable,
                    pending,
                    failure,
                })
            })
        })
    })
}

/// The trimmed text at a `/`-separated path of child elements. "N/A" and absence are reasons.
fn text(node: Node, path: &str) -> Reading<String> {
    let mut current = node;
    for step in path.split('/') {
        match current.children().find(|c| c.has_tag_name(step)) {
            Some(child) => current = child,
            None => return Reading::unavailable(format!("<{path}> not in nvidia-smi output")),
        }
    }
    let value = current.text().unwrap_or("").trim();
    match value {
        "" => Reading::unavailable(format!("<{path}> is empty")),
        "N/A" | "[N/A]" => Reading::unavailable("nvidia-smi: N/A"),
        v if v.starts_with("[")
            || v.starts_with("Unknown Error")
            || v.contains("Not Supported") =>
        {
            Reading::unavailable(format!("nvidia-smi: {v}"))
        }
        v => Reading::Value(v.to_string()),
    }
}

/// A number with an optional unit suffix: "143771 MiB", "16x", "700.00 W".
fn number<T: std::str::FromStr>(node: Node, path: &str) -> Reading<T> {
    text(node, path).and_then(|s| {
        let digits: String = s
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '-')
            .collect();
        digits.parse().map_or_else(
            |_| Reading::unavailable(format!("<{path}> is not a number: {s:?}")),
            Reading::Value,
        )
    })
}

fn hex<T: TryFrom<u32>>(s: &str) -> Reading<T> {
    parse_hex(s).and_then(|v| T::try_from(v).ok()).map_or_else(
        || Reading::unavailable(format!("not a hex number: {s:?}")),
        Reading::Value,
    )
}

fn enabled(node: Node, path: &str) -> Reading<bool> {
    text(node, path).and_then(|s| match s.as_str() {
        "Enabled" => Reading::Value(true),
        "Disabled" => Reading::Value(false),
        other => Reading::unavailable(format!(
            "<{path}> is neither Enabled nor Disabled: {other:?}"
        )),
    })
}

fn yes_no(node: Node, path: &str) -> Reading<bool> {
    text(node, path).and_then(|s| match s.as_str() {
        "Yes" => Reading::Value(true),
        "No" => Reading::Value(false),
        other => Reading::unavailable(format!("<{path}> is neither Yes nor No: {other:?}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const H200_XML: &str = include_str!("../tests/fixtures/nvidia-smi-q.xml");

    #[test]
    fn parses_the_real_h200_capture() {
        let report = parse(H200_XML, "/usr/bin/nvidia-smi").unwrap();
        assert_eq!(report.driver_version.value().unwrap(), "580.159.04");
        assert_eq!(report.cuda_version.value().unwrap(), "13.0");
        assert_eq!(report.attached_gpus, Reading::Value(1));
        assert_eq!(report.gpus.len(), 1);
        let g = &report.gpus[0];
        assert_eq!(g.name.value().unwrap(), "NVIDIA H200");
        assert_eq!(
            g.uuid.value().unwrap(),
            "GPU-f98a5a30-c00c-6706-ca38-52de3bc7bfa1"
        );
        assert_eq!(g.serial.value().unwrap(), "1653724066640");
        assert_eq!(g.board_part_number.value().unwrap(), "692-2G520-0282-000");
        assert_eq!(g.board_id, Reading::Value(6));
        assert_eq!(g.vbios_version.value().unwrap(), "96.00.A5.00.1A");
        assert_eq!(g.inforom_image.value().unwrap(), "G520.0282.02.02");
        assert_eq!(g.gsp_firmware.value().unwrap(), "580.159.04");
        assert_eq!(g.pci_bus_id.value().unwrap().to_string(), "0000:00:06.0");
        assert_eq!(g.pci_device_id, Reading::Value(0x2335));
        assert_eq!(g.pci_subsystem_id, Reading::Value(0x18bf_10de));
        assert_eq!(g.link.max_gen, Reading::Value(5));
        assert_eq!(g.link.current_width, Reading::Value(16));
        assert_eq!(g.architecture.value().unwrap(), "Hopper");
        assert_eq!(g.memory_total_mib, Reading::Value(143771));
        assert_eq!(g.memory_reserved_mib, Reading::Value(616));
        assert_eq!(
            g.ecc,
            Reading::Value(EccMode {
                current: true,
                pending: true
            })
        );
        // The H200 repairs memory by row remapping; page retirement is N/A there.
        assert!(matches!(g.retired_pages, Reading::Unavailable(_)));
        assert_eq!(
            g.remapped_rows,
            Reading::Value(RemappedRows {
                correctable: 2,
                uncorrectable: 0,
                pending: false,
                failure: false
            })
        );
        assert_eq!(g.max_sm_clock_mhz, Reading::Value(1980));
        assert_eq!(g.max_memory_clock_mhz, Reading::Value(3201));
        assert_eq!(g.power_limit_w, Reading::Value(700.0));
        assert_eq!(g.virtualization_mode.value().unwrap(), "Pass-Through");
        assert_eq!(g.mig_enabled, Reading::Value(false));
        assert_eq!(g.persistence_mode, Reading::Value(true));
    }

    #[test]
    fn malformed_xml_is_an_error_not_a_panic() {
        for bad in [
            "",
            "<nvidia_smi_log>",
            "not xml",
            "<other/>",
            &H200_XML[..H200_XML.len() / 2],
        ] {
            assert!(parse(bad, "x").is_err(), "{bad:.40}");
        }
        let err = parse("not xml", "/usr/bin/nvidia-smi").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("/usr/bin/nvidia-smi printed malformed XML: "),
            "{err}"
        );
        let err = parse("<other/>", "x").unwrap_err();
        assert!(
            matches!(&err, SmiError::WrongRoot { root, .. } if root == "other"),
            "{err}"
        );
    }

    proptest::proptest! {
        /// Whatever a (possibly replaced) nvidia-smi prints, the parser answers without panicking.
        #[test]
        fn arbitrary_output_never_panics(text in ".{0,400}") {
            let _ = parse(&text, "x");
            let _ = parse(&format!("<nvidia_smi_log><gpu>{text}</gpu></nvidia_smi_log>"), "x");
        }

        /// Any single field's text can be anything: that field alone becomes unavailable.
        #[test]
        fn any_field_value_is_handled(value in "[ -%(-;=?-~]{0,40}") {
            let xml = H200_XML.replace("<total>143771 MiB</total>", &format!("<total>{value}</total>"));
            let report = parse(&xml, "x").unwrap();
            proptest::prop_assert_eq!(report.gpus[0].name.value().map(String::as_str), Some("NVIDIA H200"));
        }
    }

    #[test]
    fn a_missing_or_garbled_field_costs_only_that_field() {
        let xml = H200_XML
            .replace("<serial>1653724066640</serial>", "")
            .replace("<total>143771 MiB</total>", "<total>lots</total>");
        let g = &parse(&xml, "x").unwrap().gpus[0];
        assert!(
            matches!(&g.serial, Reading::Unavailable(why) if why.contains("not in nvidia-smi"))
        );
        assert!(
            matches!(&g.memory_total_mib, Reading::Unavailable(why) if why.contains("not a number"))
        );
        assert_eq!(g.name.value().unwrap(), "NVIDIA H200");
    }
}
