//! NVLink for the health sampler: each link's state and its four error counters, and the data
//! throughput over all links, read into `pog-monitor`'s [`NvLinks`] (dcgm-exporter's NVLink
//! fields on `/metrics`).
//!
//! [`LinkReader`] holds the logic and talks to a GPU through [`LinkPort`]: NVML on a GPU host
//! ([`NvmlLinks`]), a double built from the simulated host's links in tests. A GPU without
//! NVLink is found so once (the sampler reports it in one line and never asks again); a link
//! whose reading fails leaves that reading out of the sample while the other links and fields
//! keep coming, and the failures of one reading make one line, the same line while nothing
//! changes (logged once, not every sample).

use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::error::{nvml_try, NvmlError};
use nvml_wrapper::struct_wrappers::device::FieldValueSample;
use nvml_wrapper::{Device, Nvml};
use pog_monitor::{NvLinkSample, NvLinks};

/// NVML's links per GPU: Hopper and Blackwell have 18, older parts fewer; NVML answers "not
/// supported" or "invalid argument" past the last.
pub const MAX_LINKS: u32 = 18;

/// One of the error counters NVML keeps for each link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkCounter {
    /// Flow-control (flit) CRC errors.
    CrcFlit,
    /// Data CRC errors.
    CrcData,
    /// Replays.
    Replay,
    /// Recoveries.
    Recovery,
}

impl LinkCounter {
    /// Every counter, in dcgm-exporter's order.
    pub const ALL: [LinkCounter; 4] = [
        LinkCounter::CrcFlit,
        LinkCounter::CrcData,
        LinkCounter::Replay,
        LinkCounter::Recovery,
    ];

    /// The counter's name in log lines.
    pub fn name(self) -> &'static str {
        match self {
            LinkCounter::CrcFlit => "crc_flit",
            LinkCounter::CrcData => "crc_data",
            LinkCounter::Replay => "replay",
            LinkCounter::Recovery => "recovery",
        }
    }

    fn slot(self, link: &mut NvLinkSample) -> &mut Option<u64> {
        match self {
            LinkCounter::CrcFlit => &mut link.crc_flit,
            LinkCounter::CrcData => &mut link.crc_data,
            LinkCounter::Replay => &mut link.replay,
            LinkCounter::Recovery => &mut link.recovery,
        }
    }
}

/// What reading NVLink asks of a GPU.
pub trait LinkPort {
    /// Whether `link` is up. `NotSupported` for link 0 means the GPU has no NVLink;
    /// `NotSupported` or `InvalidArg` for a later link, that the links ended before it.
    fn is_active(&self, link: u32) -> Result<bool, NvmlError>;
    /// One error counter of `link`: its total since the driver loaded.
    fn error_counter(&self, link: u32, counter: LinkCounter) -> Result<u64, NvmlError>;
    /// KiB of data received and transmitted over all links together since the driver loaded.
    fn data_kib(&self) -> Result<(u64, u64), NvmlError>;
}

/// Whether an NVML error means "this GPU never has it" rather than a failure now.
fn never(e: &NvmlError) -> bool {
    matches!(
        e,
        NvmlError::NotSupported | NvmlError::FailedToLoadSymbol(_) | NvmlError::InvalidArg
    )
}

/// What one reading found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkReading {
    /// The links, when the GPU has NVLink and its links could be listed.
    pub links: Option<NvLinks>,
    /// Why the GPU has no NVLink, the first time it is found so (then never asked again).
    pub absent: Option<String>,
    /// Why the throughput counters cannot be read, the first time (then never asked again;
    /// the links' state and errors keep coming).
    pub no_throughput: Option<String>,
    /// This reading's failures in one line, in link order; `None` when there were none.
    pub failure: Option<String>,
}

/// The NVLink reading of one GPU, across samples: its links as first listed and the last
/// throughput counters (for the bandwidth over the interval).
#[derive(Debug, Clone, Default)]
pub struct LinkReader {
    /// The link numbers, once listed; empty when the GPU has no NVLink.
    links: Option<Vec<u32>>,
    /// The throughput counters are not to be asked (unsupported).
    no_throughput: bool,
    /// The last data counters (KiB received plus transmitted) and their time, seconds.
    last_data: Option<(u64, f64)>,
}

impl LinkReader {
    /// Reads every link of the GPU behind `port` at `t` seconds.
    pub fn read(&mut self, port: &impl LinkPort, t: f64) -> LinkReading {
        let mut reading = LinkReading::default();
        let mut failures = Vec::new();
        let numbers = match &self.links {
            // No NVLink: said once, nothing more to read.
            Some(numbers) if numbers.is_empty() => return reading,
            Some(numbers) => numbers.clone(),
            None => match list(port) {
                Ok(numbers) => {
                    self.links = Some(numbers.clone());
                    numbers
                }
                Err(Listing::Absent(why)) => {
                    self.links = Some(Vec::new());
                    reading.absent = Some(format!("no NVLink on this GPU ({why})"));
                    return reading;
                }
                Err(Listing::Failed(why)) => {
                    // Listed again at the next reading.
                    reading.failure = Some(why);
                    return reading;
                }
            },
        };
        let mut links = Vec::with_capacity(numbers.len());
        for link in numbers {
            let mut sample = NvLinkSample {
                link,
                ..NvLinkSample::default()
            };
            match port.is_active(link) {
                Ok(active) => sample.active = Some(active),
                Err(e) => {
                    // Kept, unread: the totals over the links are then left out, not short.
                    failures.push(format!("link {link} state: NVML: {e}"));
                    links.push(sample);
                    continue;
                }
            }
            for counter in LinkCounter::ALL {
                match port.error_counter(link, counter) {
                    Ok(v) => *counter.slot(&mut sample) = Some(v),
                    Err(e) => failures.push(format!("link {link} {}: NVML: {e}", counter.name())),
                }
            }
            links.push(sample);
        }
        let mut bandwidth_mbs = None;
        if !self.no_throughput {
            match port.data_kib() {
                Ok((rx, tx)) => {
                    let now = rx.saturating_add(tx);
                    if let Some((before, then)) = self.last_data {
                        if now >= before && t > then {
                            bandwidth_mbs = Some((now - before) as f64 / (t - then) / 1000.0);
                        }
                    }
                    self.last_data = Some((now, t));
                }
                Err(e) if never(&e) => {
                    self.no_throughput = true;
                    reading.no_throughput = Some(format!("NVML: {e}"));
                }
                Err(e) => failures.push(format!("throughput: NVML: {e}")),
            }
        }
        reading.links = Some(NvLinks {
            links,
            bandwidth_mbs,
        });
        if !failures.is_empty() {
            reading.failure = Some(failures.join("; "));
        }
        reading
    }
}

/// Why a GPU's links were not listed.
enum Listing {
    /// The GPU has no NVLink: NVML's words.
    Absent(String),
    /// NVML failed: to be tried again.
    Failed(String),
}

/// The GPU's link numbers. A link whose state fails for another reason than "not supported"
/// is listed (its reading then fails in the open, link by link); only when no link answered at
/// all is the listing tried again at the next reading.
fn list(port: &impl LinkPort) -> Result<Vec<u32>, Listing> {
    let mut numbers = Vec::new();
    let (mut answered, mut first_failure) = (false, None);
    for link in 0..MAX_LINKS {
        match port.is_active(link) {
            Ok(_) => answered = true,
            Err(e) if never(&e) && link == 0 => return Err(Listing::Absent(format!("NVML: {e}"))),
            Err(e) if never(&e) => break,
            Err(e) => {
                first_failure.get_or_insert(format!("listing the links: link {link}: NVML: {e}"));
            }
        }
        numbers.push(link);
    }
    match first_failure {
        Some(why) if !answered => Err(Listing::Failed(why)),
        _ => Ok(numbers),
    }
}

/// A GPU's links through NVML.
pub struct NvmlLinks<'a, 'n> {
    /// The NVML the device belongs to (its raw field-value call).
    pub nvml: &'n Nvml,
    /// The GPU.
    pub device: &'a Device<'n>,
}

/// NVML's field values for the data received and transmitted over NVLink, in KiB
/// (`NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX` and `_TX` in `nvml.h`).
const NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: u32 = 139;
const NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: u32 = 138;

/// The scope that asks a per-link field value for all links together (as DCGM asks it).
const ALL_LINKS: u32 = u32::MAX;

impl LinkPort for NvmlLinks<'_, '_> {
    fn is_active(&self, link: u32) -> Result<bool, NvmlError> {
        self.device.link_wrapper_for(link).is_active()
    }

    fn error_counter(&self, link: u32, counter: LinkCounter) -> Result<u64, NvmlError> {
        let counter = match counter {
            LinkCounter::CrcFlit => ErrorCounter::DlCrcFlit,
            LinkCounter::CrcData => ErrorCounter::DlCrcData,
            LinkCounter::Replay => ErrorCounter::DlReplay,
            LinkCounter::Recovery => ErrorCounter::DlRecovery,
        };
        self.device.link_wrapper_for(link).error_counter(counter)
    }

    /// nvml-wrapper asks field values of scope 0 (link 0) only: the call is made here with the
    /// all-links scope, as DCGM makes it for `DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL`.
    fn data_kib(&self) -> Result<(u64, u64), NvmlError> {
        use nvml_wrapper_sys::bindings::nvmlFieldValue_t;
        let sym = self
            .nvml
            .lib()
            .nvmlDeviceGetFieldValues
            .as_ref()
            .map_err(|e| NvmlError::FailedToLoadSymbol(e.to_string()))?;
        // SAFETY: nvmlFieldValue_t is plain data (integers and a union of numbers); all zeros
        // is a valid value of it.
        let mut values: [nvmlFieldValue_t; 2] = unsafe { std::mem::zeroed() };
        for (value, field) in values.iter_mut().zip([
            NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX,
            NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
        ]) {
            value.fieldId = field;
            value.scopeId = ALL_LINKS;
        }
        // SAFETY: the handle belongs to `nvml`, which is alive; `values` holds the 2 entries
        // the count says, which NVML fills in place.
        nvml_try(unsafe { sym(self.device.handle(), 2, values.as_mut_ptr()) })?;
        let [rx, tx] = values.map(|v| FieldValueSample::try_from(v).and_then(|s| s.value));
        Ok((kib(rx?)?, kib(tx?)?))
    }
}

/// A counter's field value as a whole number of KiB.
fn kib(value: SampleValue) -> Result<u64, NvmlError> {
    match value {
        SampleValue::U64(v) => Ok(v),
        SampleValue::U32(v) => Ok(u64::from(v)),
        SampleValue::I64(v) => u64::try_from(v).map_err(|_| NvmlError::Unknown),
        SampleValue::F64(v) if v >= 0.0 && v.is_finite() => Ok(v as u64),
        SampleValue::F64(_) => Err(NvmlError::Unknown),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::facts::NvLinkFacts;
    use crate::reading::Reading;
    use crate::Platform;
    use std::cell::Cell;

    /// GPU 0's links of a simulated host as NVML would give them, with a data counter that
    /// grows by `kib_per_read` at each throughput reading, and failures to inject.
    pub(crate) struct SimLinks {
        links: Vec<NvLinkFacts>,
        data_kib: Cell<u64>,
        kib_per_read: u64,
        /// Links whose state cannot be read.
        pub(crate) state_fails: Vec<u32>,
        /// The throughput counters' answer instead of a reading.
        pub(crate) throughput: Option<NvmlError>,
    }

    impl SimLinks {
        /// GPU 0 of the simulated host `profile` (e.g. "H200 SXM; nvlink-errors").
        pub(crate) fn of(profile: &str, kib_per_read: u64) -> SimLinks {
            let platform = pog_sim::SimPlatform::from_profile(profile).unwrap();
            let links = match &platform.nvml().value().unwrap().gpus[0].nvlinks {
                Reading::Value(links) => links.clone(),
                Reading::Unavailable(why) => panic!("{why}"),
            };
            SimLinks {
                links,
                data_kib: Cell::new(0),
                kib_per_read,
                state_fails: Vec::new(),
                throughput: None,
            }
        }

        /// Makes one counter of `link` unreadable (NVML's "Unknown Error").
        pub(crate) fn fail_counter(&mut self, link: usize) {
            self.links[link].crc_data_errors = Reading::unavailable("NVML: Unknown Error");
        }
    }

    impl LinkPort for SimLinks {
        fn is_active(&self, link: u32) -> Result<bool, NvmlError> {
            if self.state_fails.contains(&link) {
                return Err(NvmlError::GpuLost);
            }
            match self.links.get(link as usize) {
                Some(l) => Ok(l.active),
                None if link == 0 => Err(NvmlError::NotSupported),
                None => Err(NvmlError::InvalidArg),
            }
        }

        fn error_counter(&self, link: u32, counter: LinkCounter) -> Result<u64, NvmlError> {
            let l = &self.links[link as usize];
            let reading = match counter {
                LinkCounter::CrcFlit => &l.crc_flit_errors,
                LinkCounter::CrcData => &l.crc_data_errors,
                LinkCounter::Replay => &l.replay_errors,
                LinkCounter::Recovery => &l.recovery_errors,
            };
            reading.value().copied().ok_or(NvmlError::Unknown)
        }

        fn data_kib(&self) -> Result<(u64, u64), NvmlError> {
            if let Some(e) = &self.throughput {
                return Err(match e {
                    NvmlError::NotSupported => NvmlError::NotSupported,
                    _ => NvmlError::Timeout,
                });
            }
            self.data_kib.set(self.data_kib.get() + self.kib_per_read);
            // Received and transmitted alike.
            Ok((self.data_kib.get() / 2, self.data_kib.get() / 2))
        }
    }

    #[test]
    fn an_nvlink_gpu_gives_every_link_its_errors_and_the_bandwidth_from_the_second_reading() {
        // 18 links; the fault: link 0 counts CRC and replay errors, link 1 is down.
        let port = SimLinks::of("H200 SXM; nvlink-errors", 3_000_000);
        let mut reader = LinkReader::default();
        let first = reader.read(&port, 0.0);
        assert_eq!((first.absent, first.failure), (None, None));
        let links = first.links.unwrap();
        assert_eq!(links.links.len(), 18);
        assert_eq!(links.active(), 17);
        assert_eq!(links.links[0].crc_flit, Some(1250));
        assert_eq!(links.links[0].replay, Some(37));
        assert_eq!(links.links[1].active, Some(false));
        assert_eq!(links.total(|l| l.crc_flit), Some(1250));
        assert_eq!(links.bandwidth_mbs, None, "no interval yet");
        // 3,000,000 KiB in 2 s: 1500 MB/s as DCGM reckons it (KiB/s over 1000).
        let second = reader.read(&port, 2.0).links.unwrap();
        assert_eq!(second.bandwidth_mbs, Some(1500.0));
    }

    #[test]
    fn a_gpu_without_nvlink_says_so_once_and_is_not_asked_again() {
        let port = SimLinks::of("H100 PCIe", 1);
        let mut reader = LinkReader::default();
        let first = reader.read(&port, 0.0);
        assert_eq!(first.links, None);
        assert!(
            first
                .absent
                .as_deref()
                .unwrap()
                .starts_with("no NVLink on this GPU"),
            "{first:?}"
        );
        for t in 1..100 {
            assert_eq!(reader.read(&port, f64::from(t)), LinkReading::default());
        }
        assert_eq!(port.data_kib.get(), 0, "nothing more asked of the GPU");
    }

    #[test]
    fn failing_links_leave_the_rest_in_one_unchanging_line() {
        let mut port = SimLinks::of("H100 SXM", 1000);
        port.fail_counter(3);
        port.state_fails = vec![5];
        let mut reader = LinkReader::default();
        let readings: Vec<LinkReading> = (0..5).map(|t| reader.read(&port, f64::from(t))).collect();
        for r in &readings {
            assert_eq!(
                r.failure,
                Some(format!(
                    "link 3 crc_data: NVML: {}; link 5 state: NVML: {}",
                    NvmlError::Unknown,
                    NvmlError::GpuLost
                )),
                "the same line each time: logged once"
            );
            let links = r.links.as_ref().unwrap();
            assert_eq!(links.links.len(), 18, "every link kept");
            assert_eq!(links.links[3].crc_flit, Some(0));
            assert_eq!(links.links[3].crc_data, None);
            assert_eq!(links.links[5].active, None);
            assert_eq!(links.links[6].active, Some(true));
            // Totals only where every link's counter was read: none, link 5 being unread.
            assert_eq!(links.total(|l| l.replay), None);
        }
        assert!(readings[4].links.as_ref().unwrap().bandwidth_mbs.is_some());
        // Throughput counters: a failure now is a failure; unsupported is said once.
        port.state_fails.clear();
        port.throughput = Some(NvmlError::Timeout);
        let r = reader.read(&port, 5.0);
        assert!(r
            .failure
            .unwrap()
            .ends_with(&format!("throughput: NVML: {}", NvmlError::Timeout)));
        assert_eq!(r.links.unwrap().total(|l| l.replay), Some(0));
        port.throughput = Some(NvmlError::NotSupported);
        assert!(reader.read(&port, 6.0).no_throughput.is_some());
        let later = reader.read(&port, 7.0);
        assert_eq!(later.no_throughput, None);
        assert_eq!(later.links.unwrap().links.len(), 18);
    }
}

#[cfg(test)]
mod listing {
    use super::tests::SimLinks;
    use super::*;

    #[test]
    fn a_gpu_that_answers_nothing_is_listed_again_later() {
        let mut port = SimLinks::of("H200 SXM", 1);
        port.state_fails = (0..MAX_LINKS).collect();
        let mut reader = LinkReader::default();
        let lost = reader.read(&port, 0.0);
        assert!(lost
            .failure
            .unwrap()
            .starts_with("listing the links: link 0"));
        assert_eq!((lost.links, lost.absent), (None, None));
        port.state_fails.clear();
        assert_eq!(reader.read(&port, 1.0).links.unwrap().active(), 18);
    }
}
