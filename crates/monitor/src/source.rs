//! Where live samples come from: the seam between the monitor loops (`pog monitor run`, the
//! agent's health watch) and what feeds them — `pog-device`'s NVML sampler on a GPU host, a
//! recorded trace ([`Replay`]) in tests and `--from-trace` rehearsals.

use crate::prometheus::{GpuIdentity, SamplerHealth};
use crate::Sample;

/// A source of samples for one or more GPUs.
pub trait Source {
    /// The GPUs, in order.
    fn identities(&self) -> Vec<GpuIdentity>;
    /// The next sample of GPU `i`, `t` seconds after the start; `None` when the source is
    /// exhausted.
    fn sample(&mut self, i: usize, t: f64) -> Option<Sample>;
    /// Lines to log: fields found unsupported and new kinds of failure since the last call.
    fn take_notices(&mut self) -> Vec<String>;
    /// XIDs seen on GPU `i` so far, and the last code (0 when none).
    fn xids(&self, i: usize) -> (u64, u32);
    /// The sampler's own health, all GPUs.
    fn health(&self) -> SamplerHealth;
}

/// One GPU's recorded samples played back in order, each keeping the time it was recorded at
/// (the detectors see the trace as it was); XIDs counted from the rows' `xid` lists.
pub struct Replay {
    identity: GpuIdentity,
    rows: std::vec::IntoIter<Sample>,
    taken: u64,
    xids: (u64, u32),
}

impl Replay {
    /// Plays `rows` back as the GPU `identity`.
    pub fn new(identity: GpuIdentity, rows: Vec<Sample>) -> Replay {
        Replay {
            identity,
            rows: rows.into_iter(),
            taken: 0,
            xids: (0, 0),
        }
    }
}

impl Source for Replay {
    fn identities(&self) -> Vec<GpuIdentity> {
        vec![self.identity.clone()]
    }
    fn sample(&mut self, _: usize, _: f64) -> Option<Sample> {
        let row = self.rows.next()?;
        self.taken += 1;
        self.xids.0 += row.xid.len() as u64;
        if let Some(&last) = row.xid.last() {
            self.xids.1 = last;
        }
        Some(row)
    }
    fn take_notices(&mut self) -> Vec<String> {
        Vec::new()
    }
    fn xids(&self, _: usize) -> (u64, u32) {
        self.xids
    }
    fn health(&self) -> SamplerHealth {
        SamplerHealth {
            samples: self.taken,
            ..SamplerHealth::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_keeps_recorded_times_and_counts_xids_until_it_runs_out() {
        let identity = GpuIdentity {
            index: 0,
            uuid: "GPU-r".into(),
            model_name: "recorded".into(),
            hostname: "host".into(),
            pci_bus_id: None,
            driver_version: None,
        };
        let rows: Vec<Sample> = (0..3)
            .map(|i| {
                let mut s = Sample::at(10.0 + f64::from(i));
                if i == 1 {
                    s.xid = vec![48, 79];
                }
                s
            })
            .collect();
        let mut replay = Replay::new(identity, rows);
        assert_eq!(replay.xids(0), (0, 0));
        assert_eq!(replay.sample(0, 0.0).map(|s| s.t), Some(10.0));
        assert_eq!(replay.sample(0, 99.0).map(|s| s.t), Some(11.0));
        assert_eq!(replay.xids(0), (2, 79));
        assert!(replay.sample(0, 0.0).is_some());
        assert!(replay.sample(0, 0.0).is_none());
        assert_eq!(replay.health().samples, 3);
    }
}
