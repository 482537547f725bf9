//! Downsampling to fixed periods (1 minute by default): min, mean and max of every signal,
//! the union of clock-event reasons, the XIDs, and the counters' last values.

use crate::sample::{Sample, Signal};
use serde::Serialize;
use std::collections::BTreeMap;

/// Min, mean and max of one signal over a period.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MinMeanMax {
    /// Smallest value.
    pub min: f64,
    /// Mean value.
    pub mean: f64,
    /// Largest value.
    pub max: f64,
    /// Readings it was computed from.
    pub n: usize,
}

/// One period's summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Aggregate {
    /// Start of the period (a multiple of the period).
    pub t_start: f64,
    /// Length of the period, s.
    pub period_s: f64,
    /// Samples in it.
    pub samples: usize,
    /// Per signal that was read at least once.
    pub signals: BTreeMap<Signal, MinMeanMax>,
    /// Every clock-event reason bit seen in the period.
    pub clock_reasons_any: u64,
    /// XIDs that arrived in the period.
    pub xid: Vec<u32>,
    /// Last PCIe replay counter.
    pub pcie_replay: Option<u64>,
    /// Last corrected ECC counter.
    pub ecc_corr: Option<u64>,
    /// Last uncorrected ECC counter.
    pub ecc_uncorr: Option<u64>,
}

#[derive(Debug, Clone)]
struct Acc {
    index: i64,
    samples: usize,
    sums: BTreeMap<Signal, (f64, f64, f64, usize)>,
    reasons: u64,
    xid: Vec<u32>,
    replay: Option<u64>,
    corr: Option<u64>,
    uncorr: Option<u64>,
}

/// Turns a stream of samples into periods; a period is complete when a sample of a later one
/// arrives.
#[derive(Debug, Clone)]
pub struct Downsampler {
    period_s: f64,
    acc: Option<Acc>,
}

impl Downsampler {
    /// A downsampler to periods of `period_s` seconds (clamped to at least 1 ms).
    pub fn new(period_s: f64) -> Downsampler {
        Downsampler {
            period_s: period_s.max(0.001),
            acc: None,
        }
    }

    /// One-minute periods.
    pub fn minutes() -> Downsampler {
        Downsampler::new(60.0)
    }

    /// Adds a sample; returns the previous period when this sample starts a new one.
    pub fn push(&mut self, s: &Sample) -> Option<Aggregate> {
        let index = (s.t / self.period_s).floor() as i64;
        let done = match &self.acc {
            Some(acc) if acc.index != index => self.acc.take().map(|a| self.finish_acc(a)),
            _ => None,
        };
        let acc = self.acc.get_or_insert_with(|| Acc {
            index,
            samples: 0,
            sums: BTreeMap::new(),
            reasons: 0,
            xid: Vec::new(),
            replay: None,
            corr: None,
            uncorr: None,
        });
        acc.samples += 1;
        for signal in Signal::ALL {
            if let Some(v) = s.read_now(signal) {
                let e =
                    acc.sums
                        .entry(signal)
                        .or_insert((f64::INFINITY, 0.0, f64::NEG_INFINITY, 0));
                e.0 = e.0.min(v);
                e.1 += v;
                e.2 = e.2.max(v);
                e.3 += 1;
            }
        }
        acc.reasons |= s.clock_reasons.unwrap_or(0);
        acc.xid.extend(&s.xid);
        acc.replay = s.pcie_replay.or(acc.replay);
        acc.corr = s.ecc_corr.or(acc.corr);
        acc.uncorr = s.ecc_uncorr.or(acc.uncorr);
        done
    }

    /// The last, possibly partial, period.
    pub fn finish(mut self) -> Option<Aggregate> {
        self.acc.take().map(|a| self.finish_acc(a))
    }

    fn finish_acc(&self, acc: Acc) -> Aggregate {
        Aggregate {
            t_start: acc.index as f64 * self.period_s,
            period_s: self.period_s,
            samples: acc.samples,
            signals: acc
                .sums
                .into_iter()
                .map(|(signal, (min, sum, max, n))| {
                    (
                        signal,
                        MinMeanMax {
                            min,
                            mean: sum / n as f64,
                            max,
                            n,
                        },
                    )
                })
                .collect(),
            clock_reasons_any: acc.reasons,
            xid: acc.xid,
            pcie_replay: acc.replay,
            ecc_corr: acc.corr,
            ecc_uncorr: acc.uncorr,
        }
    }
}

/// Downsamples a whole trace.
pub fn downsample(samples: &[Sample], period_s: f64) -> Vec<Aggregate> {
    let mut d = Downsampler::new(period_s);
    let mut out: Vec<Aggregate> = samples.iter().filter_map(|s| d.push(s)).collect();
    out.extend(d.finish());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::parse_trace;

    #[test]
    fn minutes_of_a_synthetic_trace() {
        let samples: Vec<Sample> = (0..180)
            .map(|i| {
                let mut s = Sample::at(f64::from(i));
                s.power_w = Some(f64::from(i % 60));
                // Energy read every 10th sample, carried between: 6 reads a minute count.
                s.energy_mj = Some(f64::from(i - i % 10));
                if i % 10 != 0 {
                    s.carried.push(Signal::Energy);
                }
                s.clock_reasons = Some(if i == 70 { 0x20 } else { 0x4 });
                if i == 130 {
                    s.xid.push(79);
                }
                s
            })
            .collect();
        let minutes = downsample(&samples, 60.0);
        assert_eq!(minutes.len(), 3);
        let p = minutes[0].signals[&Signal::Power];
        assert_eq!((p.min, p.max, p.n), (0.0, 59.0, 60));
        assert!((p.mean - 29.5).abs() < 1e-9);
        assert_eq!(minutes[1].clock_reasons_any, 0x24);
        assert_eq!(minutes[2].xid, vec![79]);
        assert_eq!(minutes[2].t_start, 120.0);
        assert!(!minutes[0].signals.contains_key(&Signal::TempGpu));
        let e = minutes[1].signals[&Signal::Energy];
        assert_eq!((e.min, e.max, e.n), (60.0, 110.0, 6));
    }

    #[test]
    fn the_h200_trace_downsamples_to_four_minutes() {
        let samples = parse_trace(include_str!("../tests/data/h200-healthy.csv")).unwrap();
        let minutes = downsample(&samples, 60.0);
        assert_eq!(minutes.len(), 4);
        assert_eq!(
            minutes.iter().map(|m| m.samples).sum::<usize>(),
            samples.len()
        );
        let mem = minutes[2].signals[&Signal::MemUsed];
        assert!(mem.max > 100_000.0 && mem.min < 5_000.0, "{mem:?}");
    }
}
