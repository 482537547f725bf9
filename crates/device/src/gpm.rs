//! Profiling metrics for the health sampler without DCGM: NVML's GPU performance monitoring
//! (GPM, Hopper and newer) computes SM, tensor-pipe, DRAM and FP64/FP32/FP16 activity and PCIe
//! and NVLink traffic between two samples of the GPU's counters; they are read into
//! `pog-monitor`'s [`Profiling`] and exported under dcgm-exporter's `DCGM_FI_PROF_*` names.
//!
//! [`GpmReader`] holds the logic and talks to a GPU through [`GpmPort`]: NVML on a GPU host
//! ([`NvmlGpm`]), a double in tests. A GPU without GPM (older than Hopper, or a driver without
//! it) is found so once (the sampler reports it in one line and never asks again); a reading
//! that fails (another client holding the GPU's GPM, say) leaves the metrics out of the sample
//! while the other fields keep coming, in one line logged once while it does not change; a
//! metric the GPU does not report is left out alone.

use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::gpm::{gpm_metrics_get, GpmSample};
use nvml_wrapper::{Device, Nvml};
use pog_monitor::Profiling;

/// Where one metric's value goes in [`Profiling`].
type Slot = fn(&mut Profiling) -> &mut Option<f64>;

/// The metrics asked, each with where its value goes and the factor to DCGM's unit (NVML gives
/// activities in percent and traffic in MiB/s; DCGM ratios and bytes per second).
const METRICS: [(GpmMetricId, Slot, f64); 12] = [
    (GpmMetricId::GraphicsUtil, |p| &mut p.gr_engine_active, 0.01),
    (GpmMetricId::SmUtil, |p| &mut p.sm_active, 0.01),
    (GpmMetricId::SmOccupancy, |p| &mut p.sm_occupancy, 0.01),
    (GpmMetricId::AnyTensorUtil, |p| &mut p.tensor_active, 0.01),
    (GpmMetricId::DramBwUtil, |p| &mut p.dram_active, 0.01),
    (GpmMetricId::Fp64Util, |p| &mut p.fp64_active, 0.01),
    (GpmMetricId::Fp32Util, |p| &mut p.fp32_active, 0.01),
    (GpmMetricId::Fp16Util, |p| &mut p.fp16_active, 0.01),
    (GpmMetricId::PcieTxPerSec, |p| &mut p.pcie_tx_bytes_s, MIB),
    (GpmMetricId::PcieRxPerSec, |p| &mut p.pcie_rx_bytes_s, MIB),
    (
        GpmMetricId::NvlinkTotalTxPerSec,
        |p| &mut p.nvlink_tx_bytes_s,
        MIB,
    ),
    (
        GpmMetricId::NvlinkTotalRxPerSec,
        |p| &mut p.nvlink_rx_bytes_s,
        MIB,
    ),
];

/// Bytes in a MiB.
const MIB: f64 = 1_048_576.0;

/// The metric ids asked, in [`METRICS`] order.
pub fn metric_ids() -> Vec<GpmMetricId> {
    METRICS.iter().map(|&(id, _, _)| id).collect()
}

/// The metrics of one interval, in [`metric_ids`] order, each its value in NVML's unit or why
/// it failed.
pub type MetricValues = Vec<Result<f64, NvmlError>>;

/// What reading GPM asks of a GPU.
pub trait GpmPort {
    /// One sample of the GPU's counters.
    type Snapshot;
    /// Whether the GPU supports GPM.
    fn supported(&self) -> Result<bool, NvmlError>;
    /// A sample of the counters now.
    fn snapshot(&self) -> Result<Self::Snapshot, NvmlError>;
    /// The [`metric_ids`] between two samples, each in NVML's unit, or why it failed.
    fn metrics(
        &self,
        before: &Self::Snapshot,
        after: &Self::Snapshot,
    ) -> Result<MetricValues, NvmlError>;
}

/// Whether an NVML error means "this GPU never has it" rather than a failure now.
fn never(e: &NvmlError) -> bool {
    matches!(
        e,
        NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_) | NvmlError::FunctionNotFound
    )
}

/// What one reading found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpmReading {
    /// The metrics since the previous reading (none at the first, or when it failed).
    pub profiling: Option<Profiling>,
    /// Why the GPU has no GPM, the first time it is found so (then never asked again).
    pub absent: Option<String>,
    /// This reading's failures in one line; `None` when there were none.
    pub failure: Option<String>,
}

/// Where the GPM reading of one GPU stands across samples.
enum State<S> {
    /// Support not known yet.
    Unknown,
    /// No GPM on this GPU: never asked again.
    Absent,
    /// Supported: the previous sample, if one was taken.
    Ready(Option<S>),
}

/// The GPM reading of one GPU, across samples: the previous sample of its counters, which the
/// next reading's metrics are computed from.
pub struct GpmReader<S> {
    state: State<S>,
}

impl<S> Default for GpmReader<S> {
    fn default() -> GpmReader<S> {
        GpmReader {
            state: State::Unknown,
        }
    }
}

impl<S> GpmReader<S> {
    /// Samples the GPU behind `port`, and the metrics since the previous reading.
    pub fn read(&mut self, port: &impl GpmPort<Snapshot = S>) -> GpmReading {
        let mut reading = GpmReading::default();
        if let State::Unknown = self.state {
            match port.supported() {
                Ok(true) => self.state = State::Ready(None),
                Ok(false) => {
                    self.state = State::Absent;
                    reading.absent =
                        Some("GPM is not supported on this GPU (Hopper or newer)".into());
                }
                Err(e) if never(&e) => {
                    self.state = State::Absent;
                    reading.absent = Some(format!("no GPM: NVML: {e}"));
                }
                Err(e) => reading.failure = Some(format!("asking for GPM support: NVML: {e}")),
            }
        }
        let State::Ready(previous) = &mut self.state else {
            return reading;
        };
        let now = match port.snapshot() {
            Ok(now) => now,
            Err(e) => {
                // The next reading starts afresh: its metrics need two samples again.
                *previous = None;
                reading.failure = Some(format!("sampling GPM: NVML: {e}"));
                return reading;
            }
        };
        if let Some(before) = previous.as_ref() {
            match port.metrics(before, &now) {
                Ok(values) => {
                    let mut profiling = Profiling::default();
                    let mut failures = Vec::new();
                    for ((id, slot, unit), value) in METRICS.iter().zip(values) {
                        match value {
                            Ok(v) if v.is_finite() => *slot(&mut profiling) = Some(v * unit),
                            Ok(_) => failures.push(format!("{id:?}: not a number")),
                            Err(e) if never(&e) => {}
                            Err(e) => failures.push(format!("{id:?}: NVML: {e}")),
                        }
                    }
                    if !failures.is_empty() {
                        reading.failure = Some(format!("GPM metrics: {}", failures.join("; ")));
                    }
                    reading.profiling = Some(profiling);
                }
                Err(e) => reading.failure = Some(format!("GPM metrics: NVML: {e}")),
            }
        }
        *previous = Some(now);
        reading
    }
}

/// A GPU's GPM through NVML.
pub struct NvmlGpm<'a, 'n> {
    /// The NVML the device belongs to.
    pub nvml: &'n Nvml,
    /// The GPU.
    pub device: &'a Device<'n>,
}

impl<'n> GpmPort for NvmlGpm<'_, 'n> {
    type Snapshot = GpmSample<'n>;

    fn supported(&self) -> Result<bool, NvmlError> {
        self.device.gpm_support()
    }

    fn snapshot(&self) -> Result<GpmSample<'n>, NvmlError> {
        self.device.gpm_sample()
    }

    fn metrics(
        &self,
        before: &GpmSample<'n>,
        after: &GpmSample<'n>,
    ) -> Result<MetricValues, NvmlError> {
        Ok(gpm_metrics_get(self.nvml, before, after, &metric_ids())?
            .into_iter()
            .map(|r| r.map(|m| m.value))
            .collect())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};

    /// A GPU's GPM as a test wants it: its support, then each snapshot's and each metrics
    /// call's answer, in turn.
    pub(crate) struct FakeGpm {
        pub supported: Result<bool, NvmlError>,
        pub snapshots: RefCell<Vec<Result<u32, NvmlError>>>,
        pub metrics: RefCell<Vec<Result<MetricValues, NvmlError>>>,
        pub asked_support: Cell<u32>,
    }

    impl FakeGpm {
        pub(crate) fn new(supported: Result<bool, NvmlError>) -> FakeGpm {
            FakeGpm {
                supported,
                snapshots: RefCell::new(Vec::new()),
                metrics: RefCell::new(Vec::new()),
                asked_support: Cell::new(0),
            }
        }
    }

    impl GpmPort for FakeGpm {
        type Snapshot = u32;
        fn supported(&self) -> Result<bool, NvmlError> {
            self.asked_support.set(self.asked_support.get() + 1);
            match &self.supported {
                Ok(b) => Ok(*b),
                Err(NvmlError::NotSupported) => Err(NvmlError::NotSupported),
                Err(_) => Err(NvmlError::Unknown),
            }
        }
        fn snapshot(&self) -> Result<u32, NvmlError> {
            self.snapshots.borrow_mut().remove(0)
        }
        fn metrics(&self, _: &u32, _: &u32) -> Result<MetricValues, NvmlError> {
            self.metrics.borrow_mut().remove(0)
        }
    }

    /// An H200 at a BF16 GEMM, as NVML reports it (percent, MiB/s).
    fn gemm() -> MetricValues {
        vec![
            Ok(99.0),
            Ok(98.5),
            Ok(12.5),
            Ok(71.0),
            Ok(22.0),
            Ok(0.0),
            Ok(1.5),
            Ok(0.0),
            Ok(3.0),
            Ok(2.0),
            Err(NvmlError::NotSupported),
            Err(NvmlError::NotSupported),
        ]
    }

    #[test]
    fn metrics_come_from_the_second_sample_on_in_dcgms_units() {
        let port = FakeGpm::new(Ok(true));
        port.snapshots.borrow_mut().extend([Ok(1), Ok(2), Ok(3)]);
        port.metrics.borrow_mut().extend([Ok(gemm()), Ok(gemm())]);
        let mut reader = GpmReader::default();
        let first = reader.read(&port);
        assert_eq!(first, GpmReading::default(), "one sample gives no interval");
        let second = reader.read(&port).profiling.expect("metrics");
        assert_eq!(second.gr_engine_active, Some(0.99));
        assert_eq!(second.tensor_active, Some(0.71));
        assert_eq!(second.dram_active, Some(0.22));
        assert_eq!(second.pcie_tx_bytes_s, Some(3.0 * MIB));
        assert_eq!(
            second.nvlink_tx_bytes_s, None,
            "not reported: left out, no failure"
        );
        assert!(reader.read(&port).failure.is_none());
        assert_eq!(port.asked_support.get(), 1, "support is asked once");
    }

    #[test]
    fn a_gpu_without_gpm_says_so_once_and_is_not_asked_again() {
        for supported in [Ok(false), Err(NvmlError::NotSupported)] {
            let port = FakeGpm::new(supported);
            let mut reader = GpmReader::default();
            let first = reader.read(&port);
            assert!(first.absent.is_some() && first.profiling.is_none());
            for _ in 0..3 {
                assert_eq!(reader.read(&port), GpmReading::default());
            }
            assert_eq!(port.asked_support.get(), 1);
        }
    }

    #[test]
    fn a_busy_gpm_is_a_failure_and_the_next_interval_starts_afresh() {
        let port = FakeGpm::new(Ok(true));
        port.snapshots
            .borrow_mut()
            .extend([Ok(1), Err(NvmlError::InUse), Ok(3), Ok(4)]);
        port.metrics
            .borrow_mut()
            .extend([Ok(gemm()), Err(NvmlError::Unknown)]);
        let mut reader = GpmReader::default();
        reader.read(&port);
        let busy = reader.read(&port);
        assert!(
            busy.failure
                .as_deref()
                .unwrap()
                .starts_with("sampling GPM: NVML: "),
            "{busy:?}"
        );
        assert_eq!(reader.read(&port).profiling, None, "two samples again");
        assert!(reader.read(&port).profiling.is_some());
        // A metric that fails for another reason than "not reported" is named; the others come.
        let port = FakeGpm::new(Ok(true));
        port.snapshots.borrow_mut().extend([Ok(1), Ok(2)]);
        let mut odd = gemm();
        odd[1] = Err(NvmlError::Unknown);
        odd[2] = Ok(f64::NAN);
        port.metrics.borrow_mut().push(Ok(odd));
        let mut reader = GpmReader::default();
        reader.read(&port);
        let reading = reader.read(&port);
        let failure = reading.failure.unwrap();
        assert!(failure.contains("SmUtil: NVML") && failure.contains("SmOccupancy: not a number"));
        let p = reading.profiling.unwrap();
        assert_eq!(
            (p.sm_active, p.sm_occupancy, p.gr_engine_active),
            (None, None, Some(0.99))
        );
    }
}
