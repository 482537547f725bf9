//! Where live samples come from: the seam between the monitor loops (`pog monitor run`, the
//! agent's health watch) and what feeds them — `pog-device`'s NVML sampler on a GPU host, a
//! recorded trace ([`Replay`]) in tests and `--from-trace` rehearsals.

use crate::prometheus::{GpuIdentity, SamplerHealth};
use crate::Sample;
use serde::{Deserialize, Serialize};

/// A GPU's own limits, as its driver reports them (NVML's temperature thresholds and the power
/// limit in force); each `None` where it is not known (a recorded trace, an unsupported field).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// The temperature at which the GPU starts slowing its clocks down, °C.
    pub slowdown_c: Option<f64>,
    /// The temperature at which the GPU shuts down, °C.
    pub shutdown_c: Option<f64>,
    /// The power limit in force, W.
    pub power_limit_w: Option<f64>,
}

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
    /// GPU `i`'s limits; a source that cannot read them reports none known (the default).
    fn limits(&self, i: usize) -> Limits {
        let _ = i;
        Limits::default()
    }
}

/// One GPU's recorded samples played back in order, each keeping the time it was recorded at
/// (the detectors see the trace as it was); XIDs counted from the rows' `xid` lists.
pub struct Replay {
    identity: GpuIdentity,
    rows: std::vec::IntoIter<Sample>,
    taken: u64,
    xids: (u64, u32),
    limits: Limits,
}

impl Replay {
    /// Plays `rows` back as the GPU `identity`.
    pub fn new(identity: GpuIdentity, rows: Vec<Sample>) -> Replay {
        Replay {
            identity,
            rows: rows.into_iter(),
            taken: 0,
            xids: (0, 0),
            limits: Limits::default(),
        }
    }

    /// The recorded GPU's limits (a trace does not carry them: the caller knows them).
    pub fn with_limits(mut self, limits: Limits) -> Replay {
        self.limits = limits;
        self
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
    fn limits(&self, _: usize) -> Limits {
        self.limits
    }
}

/// Several recorded GPUs played back side by side, GPU `i` being the `i`-th [`Replay`]; the
/// source runs out when any of them does.
pub struct Replays(pub Vec<Replay>);

impl Source for Replays {
    fn identities(&self) -> Vec<GpuIdentity> {
        self.0.iter().flat_map(Replay::identities).collect()
    }
    fn sample(&mut self, i: usize, t: f64) -> Option<Sample> {
        self.0.get_mut(i)?.sample(0, t)
    }
    fn take_notices(&mut self) -> Vec<String> {
        Vec::new()
    }
    fn xids(&self, i: usize) -> (u64, u32) {
        self.0.get(i).map_or((0, 0), |r| r.xids(0))
    }
    fn health(&self) -> SamplerHealth {
        SamplerHealth {
            samples: self.0.iter().map(|r| r.taken).sum(),
            ..SamplerHealth::default()
        }
    }
    fn limits(&self, i: usize) -> Limits {
        self.0.get(i).map(|r| r.limits).unwrap_or_default()
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
        assert_eq!(replay.limits(0), Limits::default());
    }

    #[test]
    fn replays_play_each_gpu_its_own_rows_with_its_own_limits() {
        let gpu = |index: u32| GpuIdentity {
            index,
            uuid: format!("GPU-{index}"),
            model_name: "recorded".into(),
            hostname: "host".into(),
            pci_bus_id: None,
            driver_version: None,
        };
        let rows = |t0: f64, n: u32| (0..n).map(|i| Sample::at(t0 + f64::from(i))).collect();
        let hot = Limits {
            slowdown_c: Some(90.0),
            shutdown_c: None,
            power_limit_w: Some(700.0),
        };
        let mut replays = Replays(vec![
            Replay::new(gpu(0), rows(0.0, 3)),
            Replay::new(gpu(1), rows(100.0, 2)).with_limits(hot),
        ]);
        let uuids: Vec<String> = replays.identities().into_iter().map(|g| g.uuid).collect();
        assert_eq!(uuids, ["GPU-0", "GPU-1"]);
        assert_eq!(replays.sample(1, 0.0).map(|s| s.t), Some(100.0));
        assert_eq!(replays.sample(0, 0.0).map(|s| s.t), Some(0.0));
        assert_eq!(
            (replays.limits(0), replays.limits(1)),
            (Limits::default(), hot)
        );
        assert_eq!(replays.health().samples, 2);
        assert!(replays.sample(1, 0.0).is_some());
        assert!(replays.sample(1, 0.0).is_none(), "GPU 1 ran out");
        assert!(replays.sample(2, 0.0).is_none(), "no GPU 2");
    }
}
