//! The health sampler (issue 13): every field `pog monitor` watches, read through NVML for one
//! GPU into `pog-monitor`'s [`Sample`], and XID errors through an NVML event set as they happen.
//!
//! A field the GPU does not support is reported once (`take_unsupported`) and never read
//! again; any other failure leaves the field unread for that sample and counts as an error. The
//! judging is `pog-monitor`'s: nothing here decides what is healthy.

use crate::nvlink::{LinkReader, LinkReading, NvmlLinks};
use crate::nvml::NvmlInitError;
use crate::reading::Reading;
use nvml_wrapper::bitmasks::event::EventTypes;
use nvml_wrapper::enum_wrappers::device::{
    Clock, EccCounter, MemoryError, PcieUtilCounter, RetirementCause, TemperatureSensor,
    TemperatureThreshold,
};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::enums::event::XidError;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::event::EventSet;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::{Device, Nvml};
use pog_monitor::prometheus::{GpuIdentity, SamplerHealth};
use pog_monitor::{Limits, NvLinks, Sample, Signal};
use std::collections::BTreeSet;

/// `NVML_FI_DEV_MEMORY_TEMP` in `nvml.h`: the HBM temperature, read as a field value.
const NVML_FI_DEV_MEMORY_TEMP: u32 = 82;

/// One thing the sampler reads (one NVML call, or one family of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Field {
    /// GPU temperature.
    TempGpu,
    /// Memory temperature (field value 82).
    TempMem,
    /// Power draw.
    Power,
    /// Total energy.
    Energy,
    /// GPU and memory utilization.
    Utilization,
    /// Memory used, free, reserved.
    Memory,
    /// SM clock.
    SmClock,
    /// Memory clock.
    MemClock,
    /// Clock-event reasons.
    ClockReasons,
    /// PCIe TX and RX throughput.
    PcieThroughput,
    /// PCIe replay counter.
    PcieReplay,
    /// Volatile ECC counters.
    EccVolatile,
    /// Aggregate ECC counters.
    EccAggregate,
    /// Retired pages.
    RetiredPages,
    /// Remapped rows.
    RemappedRows,
    /// Fan speed.
    Fan,
    /// Processes on the GPU.
    Processes,
    /// XID events (the event set).
    Xid,
    /// NVLink: each link's state and error counters ([`crate::nvlink`]).
    NvLink,
    /// NVLink data throughput, all links.
    NvLinkThroughput,
}

impl Field {
    /// The field's name, as logs and metrics say it.
    pub fn name(self) -> &'static str {
        match self {
            Field::TempGpu => "temp_gpu",
            Field::TempMem => "temp_mem",
            Field::Power => "power_w",
            Field::Energy => "energy_mj",
            Field::Utilization => "utilization",
            Field::Memory => "memory",
            Field::SmClock => "sm_clock",
            Field::MemClock => "mem_clock",
            Field::ClockReasons => "clock_reasons",
            Field::PcieThroughput => "pcie_throughput",
            Field::PcieReplay => "pcie_replay",
            Field::EccVolatile => "ecc_volatile",
            Field::EccAggregate => "ecc_aggregate",
            Field::RetiredPages => "retired_pages",
            Field::RemappedRows => "remapped_rows",
            Field::Fan => "fan",
            Field::Processes => "processes",
            Field::Xid => "xid_events",
            Field::NvLink => "nvlink",
            Field::NvLinkThroughput => "nvlink_throughput",
        }
    }
}

/// A field found unsupported, reported once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    /// The GPU's index.
    pub gpu: u32,
    /// The field.
    pub field: Field,
    /// NVML's words.
    pub reason: String,
}

/// Why a GPU could not be opened for sampling.
#[derive(Debug, thiserror::Error)]
pub enum SamplerError {
    /// NVML is unavailable.
    #[error(transparent)]
    Nvml(#[from] NvmlInitError),
    /// NVML has no GPU at this index.
    #[error("NVML cannot open GPU {index}: {error}")]
    NoGpu {
        /// The index asked for.
        index: u32,
        /// NVML's error.
        error: NvmlError,
    },
}

/// Whether an NVML error means "this GPU never has this field" (as opposed to a failure now).
fn is_unsupported(e: &NvmlError) -> bool {
    matches!(
        e,
        NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_) | NvmlError::InvalidArg
    )
}

/// Failed readings: all counted, each field's logged only when its reason changes.
#[derive(Debug, Default)]
struct FailureLog {
    count: u64,
    last: Option<String>,
    logged: std::collections::BTreeMap<Field, String>,
    new: Vec<String>,
}

impl FailureLog {
    fn record(&mut self, gpu: u32, field: Field, why: String) {
        self.count += 1;
        let line = format!("GPU {gpu}: reading {}: {why}", field.name());
        if self.logged.get(&field) != Some(&why) {
            self.logged.insert(field, why);
            self.new.push(line.clone());
        }
        self.last = Some(line);
    }
}

/// Samples one GPU.
pub struct GpuSampler<'n> {
    nvml: &'n Nvml,
    device: Device<'n>,
    index: u32,
    skip: BTreeSet<Field>,
    new_unsupported: Vec<Unsupported>,
    unsupported_total: u64,
    failures: FailureLog,
    samples: u64,
    events: Option<EventSet<'n>>,
    xid_total: u64,
    last_xid: u32,
    /// CPU microseconds spent reading each field (this thread's user + system time).
    cost_us: std::collections::BTreeMap<Field, f64>,
    /// The slow-changing, costly fields ([`SLOW_FIELDS`]) are read every this many samples.
    slow_every: u64,
    /// The slow fields as last read: a sample between two reads carries them (the latest
    /// reading as of its time), so charts and `/metrics` series do not flicker.
    held: SlowReadings,
    /// The NVLink reading across samples.
    links: LinkReader,
    /// The NVLink links as last read (a slow field, carried between reads as the others).
    held_links: Option<NvLinks>,
}

/// The slow fields' values as last read.
#[derive(Debug, Clone, Copy, Default)]
struct SlowReadings {
    energy_mj: Option<f64>,
    pcie: Option<(f64, f64)>,
    ecc_aggregate: Option<(u64, u64)>,
    retired_pages: Option<u64>,
    remapped_rows: Option<(u64, u64)>,
    processes: Option<u32>,
}

impl SlowReadings {
    /// Keeps what `s` read of the slow fields that were due in it; fills the others from the
    /// last read, marking the signals among them [`Sample::carried`].
    fn hold(&mut self, s: &mut Sample, due: impl Fn(Field) -> bool) {
        fn keep<T: Copy>(due: bool, read: Option<T>, held: &mut Option<T>) -> Option<T> {
            if due {
                *held = read;
            }
            *held
        }
        let fresh = due(Field::Energy);
        s.energy_mj = keep(fresh, s.energy_mj, &mut self.energy_mj);
        if !fresh && s.energy_mj.is_some() {
            s.carried.push(Signal::Energy);
        }
        let pcie = s.pcie_tx_kbs.zip(s.pcie_rx_kbs);
        let fresh = due(Field::PcieThroughput);
        if let Some((tx, rx)) = keep(fresh, pcie, &mut self.pcie) {
            (s.pcie_tx_kbs, s.pcie_rx_kbs) = (Some(tx), Some(rx));
            if !fresh {
                s.carried.extend([Signal::PcieTx, Signal::PcieRx]);
            }
        }
        let ecc = s.ecc_corr_aggregate.zip(s.ecc_uncorr_aggregate);
        if let Some((c, u)) = keep(due(Field::EccAggregate), ecc, &mut self.ecc_aggregate) {
            (s.ecc_corr_aggregate, s.ecc_uncorr_aggregate) = (Some(c), Some(u));
        }
        s.retired_pages = keep(
            due(Field::RetiredPages),
            s.retired_pages,
            &mut self.retired_pages,
        );
        let rows = s.remapped_rows.zip(s.remapped_rows_uncorrectable);
        if let Some((total, uncorrectable)) =
            keep(due(Field::RemappedRows), rows, &mut self.remapped_rows)
        {
            (s.remapped_rows, s.remapped_rows_uncorrectable) = (Some(total), Some(uncorrectable));
        }
        s.processes = keep(due(Field::Processes), s.processes, &mut self.processes);
    }
}

/// The default cadence of the slow fields: every 10th sample (every 10 s at the default 1 s
/// interval; dcgm-exporter collects every 30 s by default). On the H200 the total-energy
/// counter alone costs 3.6-4.3 ms of CPU per read (the driver waits on the GPU's firmware,
/// busy), PCIe throughput 1.7-1.8 ms, every other field together about 1 ms: every field every
/// second measured 0.73 % of a core, over the 0.5 % goal; this cadence 0.24 % (docs/monitor.md,
/// "Cost on the H200").
pub const DEFAULT_SLOW_EVERY: u64 = 10;

/// Fields read only every [`GpuSampler::set_slow_every`] samples (default
/// [`DEFAULT_SLOW_EVERY`]): the total-energy counter and PCIe throughput, the two costly reads
/// (NVML measures PCIe throughput by sampling a counter for 20 ms per direction), and
/// counters that change rarely (aggregate ECC, retired pages, remapped rows, NVLink's state
/// and error counters: five NVML calls a link, 18 links on Hopper) and the process list. The
/// NVLink bandwidth is then the average over the interval between two reads. Between two reads a sample carries the last one (its signals marked
/// [`Sample::carried`]).
pub const SLOW_FIELDS: [Field; 7] = [
    Field::Energy,
    Field::PcieThroughput,
    Field::EccAggregate,
    Field::RetiredPages,
    Field::RemappedRows,
    Field::Processes,
    Field::NvLink,
];

/// This thread's CPU time (user + system), microseconds, to the nanosecond: the kernel adds
/// the running slice when asked (`getrusage(RUSAGE_THREAD)` does not, so a call that does not
/// sleep or meet a tick looked free there, and the next one that did paid for it).
fn thread_cpu_us() -> f64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    now.tv_sec as f64 * 1e6 + now.tv_nsec as f64 / 1e3
}

impl<'n> GpuSampler<'n> {
    /// Opens the GPU at `index` and registers for its XID events (where the platform has event
    /// sets; where not, XIDs are reported unsupported once).
    pub fn open(nvml: &'n Nvml, index: u32) -> Result<GpuSampler<'n>, SamplerError> {
        let device = nvml
            .device_by_index(index)
            .map_err(|error| SamplerError::NoGpu { index, error })?;
        let mut sampler = GpuSampler {
            nvml,
            device,
            index,
            skip: BTreeSet::new(),
            new_unsupported: Vec::new(),
            unsupported_total: 0,
            failures: FailureLog::default(),
            samples: 0,
            events: None,
            xid_total: 0,
            last_xid: 0,
            cost_us: Default::default(),
            slow_every: DEFAULT_SLOW_EVERY,
            held: SlowReadings::default(),
            links: LinkReader::default(),
            held_links: None,
        };
        let events = nvml
            .create_event_set()
            .map_err(|e| e.to_string())
            .and_then(|set| {
                sampler
                    .device
                    .register_events(EventTypes::CRITICAL_XID_ERROR, set)
                    .map_err(|e| e.error.to_string())
            });
        match events {
            Ok(set) => sampler.events = Some(set),
            Err(reason) => sampler.mark_unsupported(Field::Xid, reason),
        }
        Ok(sampler)
    }

    /// Who the GPU is, for the metrics' labels.
    pub fn identity(&self, hostname: &str) -> GpuIdentity {
        GpuIdentity {
            index: self.index,
            uuid: self
                .device
                .uuid()
                .unwrap_or_else(|e| format!("unknown ({e})")),
            model_name: self
                .device
                .name()
                .unwrap_or_else(|e| format!("unknown ({e})")),
            hostname: hostname.to_string(),
            pci_bus_id: self.device.pci_info().ok().map(|p| p.bus_id),
            driver_version: self.nvml.sys_driver_version().ok(),
        }
    }

    /// The GPU's limits as NVML reports them: its slowdown and shutdown temperatures and the
    /// power limit in force, each `None` where NVML cannot read it (the dashboard draws them).
    pub fn limits(&self) -> Limits {
        let temperature = |threshold| {
            self.device
                .temperature_threshold(threshold)
                .ok()
                .map(f64::from)
        };
        Limits {
            slowdown_c: temperature(TemperatureThreshold::Slowdown),
            shutdown_c: temperature(TemperatureThreshold::Shutdown),
            power_limit_w: self
                .device
                .enforced_power_limit()
                .ok()
                .map(|mw| f64::from(mw) / 1000.0),
        }
    }

    fn mark_unsupported(&mut self, field: Field, reason: String) {
        if self.skip.insert(field) {
            self.unsupported_total += 1;
            self.new_unsupported.push(Unsupported {
                gpu: self.index,
                field,
                reason,
            });
        }
    }

    /// Reads the slow fields ([`SLOW_FIELDS`]) only every `n`-th sample (1: every sample);
    /// the others carry their last reading.
    pub fn set_slow_every(&mut self, n: u64) {
        self.slow_every = n.max(1);
    }

    /// CPU microseconds each field has cost so far, most expensive first.
    pub fn field_costs(&self) -> Vec<(Field, f64)> {
        let mut costs: Vec<_> = self.cost_us.iter().map(|(f, c)| (*f, *c)).collect();
        costs.sort_by(|a, b| b.1.total_cmp(&a.1));
        costs
    }

    /// Whether `field` is read in this sample: known supported, and for a slow field, its turn.
    fn due(&self, field: Field) -> bool {
        !self.skip.contains(&field)
            && (!SLOW_FIELDS.contains(&field) || (self.samples - 1).is_multiple_of(self.slow_every))
    }

    /// Reads one field unless it is known unsupported or not due, counting its CPU time.
    fn get<T>(
        &mut self,
        field: Field,
        read: impl FnOnce(&Device<'n>) -> Result<T, NvmlError>,
    ) -> Option<T> {
        if !self.due(field) {
            return None;
        }
        let started = thread_cpu_us();
        let result = read(&self.device);
        *self.cost_us.entry(field).or_default() += thread_cpu_us() - started;
        match result {
            Ok(v) => Some(v),
            Err(e) if is_unsupported(&e) => {
                self.mark_unsupported(field, format!("NVML: {e}"));
                None
            }
            Err(e) => {
                self.failed(field, format!("NVML: {e}"));
                None
            }
        }
    }

    /// Reads every supported field now; `t` is the sample's time in seconds.
    pub fn sample(&mut self, t: f64) -> Sample {
        self.samples += 1;
        let mut s = Sample::at(t);
        s.temp_gpu_c = self
            .get(Field::TempGpu, |d| d.temperature(TemperatureSensor::Gpu))
            .map(f64::from);
        s.temp_mem_c = self.get(Field::TempMem, memory_temperature);
        s.power_w = self
            .get(Field::Power, |d| d.power_usage())
            .map(|mw| f64::from(mw) / 1000.0);
        s.energy_mj = self
            .get(Field::Energy, |d| d.total_energy_consumption())
            .map(|mj| mj as f64);
        if let Some(u) = self.get(Field::Utilization, |d| d.utilization_rates()) {
            s.util_gpu_pct = Some(f64::from(u.gpu));
            s.util_mem_pct = Some(f64::from(u.memory));
        }
        if let Some(m) = self.get(Field::Memory, |d| d.memory_info()) {
            const MIB: f64 = 1024.0 * 1024.0;
            s.mem_used_mib = Some(m.used as f64 / MIB);
            s.mem_free_mib = Some(m.free as f64 / MIB);
            s.mem_reserved_mib = Some(m.reserved as f64 / MIB);
        }
        s.sm_clock_mhz = self
            .get(Field::SmClock, |d| d.clock_info(Clock::SM))
            .map(f64::from);
        s.mem_clock_mhz = self
            .get(Field::MemClock, |d| d.clock_info(Clock::Memory))
            .map(f64::from);
        s.clock_reasons = self
            .get(Field::ClockReasons, |d| d.current_throttle_reasons())
            .map(|r| r.bits());
        if let Some((tx, rx)) = self.get(Field::PcieThroughput, |d| {
            Ok((
                d.pcie_throughput(PcieUtilCounter::Send)?,
                d.pcie_throughput(PcieUtilCounter::Receive)?,
            ))
        }) {
            s.pcie_tx_kbs = Some(f64::from(tx));
            s.pcie_rx_kbs = Some(f64::from(rx));
        }
        s.pcie_replay = self
            .get(Field::PcieReplay, |d| d.pcie_replay_counter())
            .map(u64::from);
        if let Some((c, u)) = self.get(Field::EccVolatile, |d| {
            Ok((
                d.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile)?,
                d.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile)?,
            ))
        }) {
            s.ecc_corr = Some(c);
            s.ecc_uncorr = Some(u);
        }
        if let Some((c, u)) = self.get(Field::EccAggregate, |d| {
            Ok((
                d.total_ecc_errors(MemoryError::Corrected, EccCounter::Aggregate)?,
                d.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Aggregate)?,
            ))
        }) {
            s.ecc_corr_aggregate = Some(c);
            s.ecc_uncorr_aggregate = Some(u);
        }
        s.retired_pages = self.get(Field::RetiredPages, |d| {
            let single = d.retired_pages(RetirementCause::MultipleSingleBitEccErrors)?;
            let double = d.retired_pages(RetirementCause::DoubleBitEccError)?;
            Ok((single.len() + double.len()) as u64)
        });
        if self.due(Field::RemappedRows) {
            let started = thread_cpu_us();
            let rows = crate::nvml::remapped_rows(self.nvml, &self.device);
            *self.cost_us.entry(Field::RemappedRows).or_default() += thread_cpu_us() - started;
            match rows {
                Reading::Value(rows) => {
                    s.remapped_rows = Some(rows.correctable + rows.uncorrectable);
                    s.remapped_rows_uncorrectable = Some(rows.uncorrectable);
                }
                Reading::Unavailable(why)
                    if why.contains("not supported") || why.contains("not in this driver") =>
                {
                    self.mark_unsupported(Field::RemappedRows, why)
                }
                Reading::Unavailable(why) => self.failed(Field::RemappedRows, why),
            }
        }
        s.fan_pct = self
            .get(Field::Fan, |d| match d.num_fans()? {
                0 => Err(NvmlError::NotSupported),
                _ => d.fan_speed(0),
            })
            .map(f64::from);
        s.processes = self.get(Field::Processes, |d| {
            Ok(d.running_compute_processes_count()? + d.running_graphics_processes_count()?)
        });
        if self.due(Field::NvLink) {
            let started = thread_cpu_us();
            let port = NvmlLinks {
                nvml: self.nvml,
                device: &self.device,
            };
            let reading = self.links.read(&port, t);
            *self.cost_us.entry(Field::NvLink).or_default() += thread_cpu_us() - started;
            self.held_links = self.take_links(reading);
        }
        s.nvlink = self.held_links.clone();
        s.xid = self.drain_xids();
        let mut held = self.held;
        // A field found unsupported holds nothing from before.
        held.hold(&mut s, |field| {
            self.due(field) || self.skip.contains(&field)
        });
        self.held = held;
        s
    }

    /// The links of an NVLink reading, its news reported: no NVLink (once, then not asked
    /// again), no throughput counters (once), this reading's failures (one line, logged when
    /// it changes).
    fn take_links(&mut self, reading: LinkReading) -> Option<NvLinks> {
        if let Some(why) = reading.absent {
            self.mark_unsupported(Field::NvLink, why);
        }
        if let Some(why) = reading.no_throughput {
            self.mark_unsupported(Field::NvLinkThroughput, why);
        }
        if let Some(why) = reading.failure {
            self.failed(Field::NvLink, why);
        }
        reading.links
    }

    /// The XIDs that arrived since the last call, without waiting.
    fn drain_xids(&mut self) -> Vec<u32> {
        let mut codes = Vec::new();
        let mut failure = None;
        let Some(set) = &self.events else {
            return codes;
        };
        loop {
            match set.wait(0) {
                Ok(event) => {
                    if let Some(XidError::Value(code)) = event.event_data {
                        codes.push(u32::try_from(code).unwrap_or(u32::MAX));
                    }
                }
                Err(NvmlError::Timeout) => break,
                Err(e) => {
                    failure = Some(format!("NVML: {e}"));
                    break;
                }
            }
        }
        if let Some(why) = failure {
            self.failed(Field::Xid, why);
        }
        self.xid_total += codes.len() as u64;
        if let Some(last) = codes.last() {
            self.last_xid = *last;
        }
        codes
    }

    fn failed(&mut self, field: Field, why: String) {
        self.failures.record(self.index, field, why);
    }

    /// Failures to log since the last call: each field's first, and each change of reason
    /// (a GPU that fell off the bus is logged once, not every second).
    pub fn take_errors(&mut self) -> Vec<String> {
        std::mem::take(&mut self.failures.new)
    }

    /// Fields found unsupported since the last call (each reported once in the sampler's life).
    pub fn take_unsupported(&mut self) -> Vec<Unsupported> {
        std::mem::take(&mut self.new_unsupported)
    }

    /// The last reading that failed (not for lack of support), if any.
    pub fn last_error(&self) -> Option<&str> {
        self.failures.last.as_deref()
    }

    /// XIDs seen since the sampler opened, and the last code (0: none).
    pub fn xids(&self) -> (u64, u32) {
        (self.xid_total, self.last_xid)
    }

    /// The sampler's own health, for `/metrics`.
    pub fn health(&self) -> SamplerHealth {
        SamplerHealth {
            samples: self.samples,
            fields_unsupported: self.unsupported_total,
            errors: self.failures.count,
        }
    }
}

/// The HBM temperature, from NVML's field values.
fn memory_temperature(d: &Device<'_>) -> Result<f64, NvmlError> {
    let values = d.field_values_for(&[FieldId(NVML_FI_DEV_MEMORY_TEMP)])?;
    let sample = values.into_iter().next().ok_or(NvmlError::NotSupported)??;
    match sample.value? {
        SampleValue::F64(v) => Ok(v),
        SampleValue::U32(v) => Ok(f64::from(v)),
        SampleValue::U64(v) => Ok(v as f64),
        SampleValue::I64(v) => Ok(v as f64),
    }
}

/// The GPUs of this host that a monitor watches, as a [`pog_monitor::Source`]: one
/// [`GpuSampler`] each, and the hostname for the metrics' labels.
pub struct NvmlSource<'n> {
    samplers: Vec<GpuSampler<'n>>,
    hostname: String,
}

impl<'n> NvmlSource<'n> {
    /// Opens the GPUs at NVML `indices`, their slow fields read every `slow_every` samples.
    pub fn open(
        nvml: &'n Nvml,
        indices: &[u32],
        slow_every: u64,
    ) -> Result<NvmlSource<'n>, SamplerError> {
        let samplers = indices
            .iter()
            .map(|&i| {
                let mut sampler = GpuSampler::open(nvml, i)?;
                sampler.set_slow_every(slow_every);
                Ok(sampler)
            })
            .collect::<Result<Vec<_>, SamplerError>>()?;
        Ok(NvmlSource {
            samplers,
            hostname: hostname(),
        })
    }
}

impl pog_monitor::Source for NvmlSource<'_> {
    fn identities(&self) -> Vec<GpuIdentity> {
        self.samplers
            .iter()
            .map(|s| s.identity(&self.hostname))
            .collect()
    }
    fn sample(&mut self, i: usize, t: f64) -> Option<Sample> {
        Some(self.samplers.get_mut(i)?.sample(t))
    }
    fn take_notices(&mut self) -> Vec<String> {
        let mut notices = Vec::new();
        for sampler in &mut self.samplers {
            notices.extend(sampler.take_unsupported().into_iter().map(|u| {
                format!(
                    "GPU {}: {} not supported ({}); not read again",
                    u.gpu,
                    u.field.name(),
                    u.reason
                )
            }));
            notices.extend(sampler.take_errors());
        }
        notices
    }
    fn xids(&self, i: usize) -> (u64, u32) {
        self.samplers.get(i).map_or((0, 0), GpuSampler::xids)
    }
    fn health(&self) -> SamplerHealth {
        self.samplers
            .iter()
            .map(GpuSampler::health)
            .fold(SamplerHealth::default(), |a, b| SamplerHealth {
                samples: a.samples + b.samples,
                fields_unsupported: a.fields_unsupported + b.fields_unsupported,
                errors: a.errors + b.errors,
            })
    }
    fn limits(&self, i: usize) -> Limits {
        self.samplers
            .get(i)
            .map(GpuSampler::limits)
            .unwrap_or_default()
    }
}

/// The host's name, for the `Hostname` label.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_fields_carry_their_last_reading_until_read_again() {
        let mut held = SlowReadings::default();
        let mut first = Sample::at(0.0);
        (first.pcie_tx_kbs, first.pcie_rx_kbs) = (Some(10.0), Some(20.0));
        first.processes = Some(2);
        first.energy_mj = Some(5000.0);
        held.hold(&mut first, |_| true);
        assert!(first.carried.is_empty());
        // Not due: the last reading; the fast fields are untouched.
        let mut between = Sample::at(1.0);
        between.temp_gpu_c = Some(40.0);
        held.hold(&mut between, |_| false);
        assert_eq!(
            (between.pcie_tx_kbs, between.pcie_rx_kbs, between.processes),
            (Some(10.0), Some(20.0), Some(2))
        );
        assert_eq!(between.energy_mj, Some(5000.0));
        assert_eq!(
            between.carried,
            [Signal::Energy, Signal::PcieTx, Signal::PcieRx]
        );
        assert_eq!(between.read_now(Signal::Energy), None);
        assert_eq!(between.temp_gpu_c, Some(40.0));
        assert_eq!(between.retired_pages, None);
        // Due and read again: the new value; due and failed: nothing is carried.
        let mut again = Sample::at(2.0);
        again.processes = Some(3);
        held.hold(&mut again, |f| {
            f == Field::Processes || f == Field::PcieThroughput
        });
        assert_eq!(again.processes, Some(3));
        assert_eq!(again.pcie_tx_kbs, None);
        assert_eq!(again.carried, [Signal::Energy]);
        let mut later = Sample::at(3.0);
        held.hold(&mut later, |_| false);
        assert_eq!((later.processes, later.pcie_tx_kbs), (Some(3), None));
    }

    #[test]
    fn a_repeating_failure_is_counted_every_time_and_logged_once() {
        let mut log = FailureLog::default();
        for _ in 0..5 {
            log.record(1, Field::Power, "NVML: GPU is lost".into());
        }
        log.record(1, Field::TempGpu, "NVML: GPU is lost".into());
        log.record(1, Field::Power, "NVML: timeout".into());
        assert_eq!(log.count, 7);
        assert_eq!(
            log.new,
            vec![
                "GPU 1: reading power_w: NVML: GPU is lost",
                "GPU 1: reading temp_gpu: NVML: GPU is lost",
                "GPU 1: reading power_w: NVML: timeout",
            ]
        );
        assert_eq!(
            log.last.as_deref(),
            Some("GPU 1: reading power_w: NVML: timeout")
        );
    }

    #[test]
    fn a_failing_nvlink_link_is_logged_once_while_it_keeps_failing() {
        let mut port = crate::nvlink::tests::SimLinks::of("H200 SXM", 1000);
        port.fail_counter(7);
        let mut reader = LinkReader::default();
        let mut log = FailureLog::default();
        for t in 0..60 {
            let reading = reader.read(&port, f64::from(t));
            assert_eq!(reading.links.unwrap().links.len(), 18);
            log.record(0, Field::NvLink, reading.failure.unwrap());
        }
        assert_eq!(log.count, 60);
        assert_eq!(log.new.len(), 1, "{:?}", log.new);
        assert!(log.new[0].starts_with("GPU 0: reading nvlink: link 7 crc_data: NVML: "));
    }

    #[test]
    fn unsupported_is_told_apart_from_failure() {
        assert!(is_unsupported(&NvmlError::NotSupported));
        assert!(!is_unsupported(&NvmlError::GpuLost));
        assert!(!is_unsupported(&NvmlError::Timeout));
        assert_eq!(Field::TempMem.name(), "temp_mem");
    }

    /// On a GPU host: `cargo test -p pog-device --lib monitor -- --ignored --nocapture`.
    /// Prints the NVLink links as last read (state, bandwidth, error totals) too.
    /// Samples GPU 0 for 20 s at 1 s with every field, checks the core fields were read,
    /// prints what was unsupported, the CPU time per sample and per field, and writes the
    /// trace to `$POG_MONITOR_TRACE` (default `/tmp/pog-monitor-trace.csv`); then the CPU
    /// time per sample at the default cadence, and of single NVML calls alone (where the
    /// cost is: docs/monitor.md, "Cost on the H200").
    #[test]
    #[ignore = "needs an NVIDIA GPU"]
    fn samples_a_real_gpu() {
        let nvml = crate::nvml::init().expect("NVML");
        let mut sampler = GpuSampler::open(&nvml, 0).expect("GPU 0");
        sampler.set_slow_every(1);
        let identity = sampler.identity(&hostname());
        println!("{identity:?}");
        let path = std::env::var("POG_MONITOR_TRACE")
            .unwrap_or_else(|_| "/tmp/pog-monitor-trace.csv".into());
        let file = std::fs::File::create(&path).expect("trace file");
        let mut writer =
            pog_monitor::TraceWriter::new(file, pog_monitor::trace::Columns::Extended).unwrap();
        let cpu = thread_cpu_us;
        let started = std::time::Instant::now();
        let mut cpu_us = 0.0;
        let mut links = None;
        let n = 20;
        for _ in 0..n {
            let before = cpu();
            let sample = sampler.sample(started.elapsed().as_secs_f64());
            cpu_us += cpu() - before;
            for u in sampler.take_unsupported() {
                println!(
                    "unsupported: GPU {} {}: {}",
                    u.gpu,
                    u.field.name(),
                    u.reason
                );
            }
            assert!(
                sample.temp_gpu_c.is_some() && sample.power_w.is_some(),
                "{sample:?}"
            );
            assert!(sample.sm_clock_mhz.is_some() && sample.mem_used_mib.is_some());
            writer.write(&sample).unwrap();
            links = sample.nvlink.clone().or(links);
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
        writer.finish().unwrap();
        match &links {
            Some(l) => println!(
                "NVLink: {} of {} links up, bandwidth {:?} MB/s, CRC flit errors {:?}, replays {:?}",
                l.active(),
                l.links.len(),
                l.bandwidth_mbs,
                l.total(|l| l.crc_flit),
                l.total(|l| l.replay)
            ),
            None => println!("NVLink: none read"),
        }
        let per_sample_ms = cpu_us / n as f64 / 1000.0;
        println!(
            "{n} samples: {per_sample_ms:.3} ms of CPU per sample = {:.3} % of one core at 1 s; health {:?}; last error {:?}; trace {path}",
            per_sample_ms / 10.0,
            sampler.health(),
            sampler.last_error()
        );
        assert_eq!(sampler.health().samples, n as u64);
        for (field, us) in sampler.field_costs() {
            println!(
                "field {}: {:.3} ms of CPU per sample",
                field.name(),
                us / n as f64 / 1000.0
            );
        }
        // The slow fields at the default cadence instead.
        let mut slow = GpuSampler::open(&nvml, 0).expect("GPU 0");
        assert_eq!(slow.slow_every, DEFAULT_SLOW_EVERY);
        let mut slow_us = 0.0;
        for _ in 0..n {
            let before = cpu();
            slow.sample(started.elapsed().as_secs_f64());
            slow_us += cpu() - before;
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        let slow_ms = slow_us / n as f64 / 1000.0;
        println!(
            "slow fields every {DEFAULT_SLOW_EVERY}th sample: {slow_ms:.3} ms of CPU per sample = {:.3} % of one core at 1 s",
            slow_ms / 10.0
        );
        // Single calls, each alone 20 times, CPU and wall time: where the cost is.
        type Probe<'a> = (
            &'a str,
            Box<dyn Fn(&Device<'_>) -> Result<(), NvmlError> + 'a>,
        );
        let field = |id: u32| move |d: &Device<'_>| d.field_values_for(&[FieldId(id)]).map(drop);
        let probes: Vec<Probe> = vec![
            ("power_usage", Box::new(|d| d.power_usage().map(drop))),
            (
                "total_energy_consumption",
                Box::new(|d| d.total_energy_consumption().map(drop)),
            ),
            ("field 83 (energy)", Box::new(field(83))),
            ("field 186 (power instant)", Box::new(field(186))),
            ("field 82 (memory temp)", Box::new(field(82))),
            ("field 197 (PCIe TX bytes)", Box::new(field(197))),
            (
                "temperature",
                Box::new(|d| d.temperature(TemperatureSensor::Gpu).map(drop)),
            ),
            (
                "utilization_rates",
                Box::new(|d| d.utilization_rates().map(drop)),
            ),
            (
                "current_throttle_reasons",
                Box::new(|d| d.current_throttle_reasons().map(drop)),
            ),
            (
                "pcie_replay_counter",
                Box::new(|d| d.pcie_replay_counter().map(drop)),
            ),
            (
                "ecc volatile corrected",
                Box::new(|d| {
                    d.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile)
                        .map(drop)
                }),
            ),
            ("memory_info", Box::new(|d| d.memory_info().map(drop))),
            (
                "clock_info SM",
                Box::new(|d| d.clock_info(Clock::SM).map(drop)),
            ),
        ];
        for (name, probe) in &probes {
            let (mut cpu_total, wall) = (0.0, std::time::Instant::now());
            let mut result = Ok(());
            for _ in 0..n {
                let before = cpu();
                result = probe(&slow.device);
                cpu_total += cpu() - before;
            }
            println!(
                "probe {name}: {:.3} ms CPU, {:.3} ms wall per call ({result:?})",
                cpu_total / n as f64 / 1000.0,
                wall.elapsed().as_secs_f64() * 1000.0 / n as f64
            );
        }
    }
}
