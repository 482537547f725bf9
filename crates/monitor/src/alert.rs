//! Alerts, and the gate that de-duplicates them: a condition that stays true raises one alert
//! when it starts, again when it gets worse, and a reminder after each cool-down.

use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// How bad an alert is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Worth knowing; no action needed.
    Info,
    /// Something is going wrong, or will: look at it (early warnings are here).
    Warning,
    /// The GPU is failing now or its results cannot be trusted.
    Critical,
}

impl Severity {
    /// The lowercase name, as in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

/// What an alert is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    /// A temperature above what the load explains and rising, or at its limit; carries the
    /// time to the limit extrapolated from the slope.
    ThermalRunaway,
    /// Clocks held down by heat, a hardware slowdown or power brake, or a power cap far
    /// below the GPU's own.
    Throttling,
    /// SM or memory clock below the GPU's baseline for its load with no reason given.
    ClockDrop,
    /// Device memory growing without being freed.
    MemoryLeak,
    /// Uncorrected ECC errors.
    EccUncorrected,
    /// Many corrected ECC errors in a short time.
    EccCorrectedBurst,
    /// Memory rows remapped or pages retired.
    MemoryRemap,
    /// Many PCIe replays in a short time.
    PcieReplayBurst,
    /// An XID error from the driver.
    Xid,
    /// A sensor that stopped changing when it must change (a stuck reading).
    SensorFrozen,
    /// A sensor whose reading moved away from what the other signals say (a power reading
    /// that dropped while the load, the clocks and the temperature held).
    SensorDrift,
    /// Benchmark or proof performance below the GPU's own history.
    PerfDecay,
    /// A combination of signals unlike any in the GPU's healthy history (isolation forest).
    Multivariate,
    /// A temperature that moved to a new level at the same power and holds there, flat: the
    /// room or the cooling changed, and the GPU is judged from the new level on (info).
    AmbientShift,
    /// The samples stopped for a while or their clock stepped back: the detectors' windows
    /// start afresh (info).
    SampleGap,
    /// A slow drift the learned model sees over hours at equal power: the cooling losing
    /// capacity (the heat at load growing), a temperature sensor drifting from the other, or
    /// the power reading drifting from the energy counter; with its rate and the time until
    /// the limit at the GPU's typical full load.
    Degradation,
    /// The healthy history was recorded on another GPU model (its memory's clock or size
    /// tell): it judges nothing here, and the GPU learns its own levels (info).
    OtherModel,
}

impl AlertKind {
    /// The snake_case name, as in JSON.
    pub fn name(self) -> &'static str {
        match self {
            AlertKind::ThermalRunaway => "thermal_runaway",
            AlertKind::Throttling => "throttling",
            AlertKind::ClockDrop => "clock_drop",
            AlertKind::MemoryLeak => "memory_leak",
            AlertKind::EccUncorrected => "ecc_uncorrected",
            AlertKind::EccCorrectedBurst => "ecc_corrected_burst",
            AlertKind::MemoryRemap => "memory_remap",
            AlertKind::PcieReplayBurst => "pcie_replay_burst",
            AlertKind::Xid => "xid",
            AlertKind::SensorFrozen => "sensor_frozen",
            AlertKind::SensorDrift => "sensor_drift",
            AlertKind::PerfDecay => "perf_decay",
            AlertKind::Multivariate => "multivariate",
            AlertKind::AmbientShift => "ambient_shift",
            AlertKind::SampleGap => "sample_gap",
            AlertKind::Degradation => "degradation",
            AlertKind::OtherModel => "other_model",
        }
    }
}

/// The most likely cause of a finding and what to check first, from its kind and key (the
/// throttle reasons, the frozen signal, the XID code): `(cause, check)`.
pub fn explain(kind: AlertKind, key: &str) -> (&'static str, &'static str) {
    let sensor = |key: &str| {
        match key {
        "power" => (
            "the power sensor or its reading path (NVML, driver), not the load",
            "compare nvidia-smi's power.draw with the energy counter's growth and with the PSU or PDU reading; reload the driver or reseat the GPU if it stays",
        ),
        "energy" => (
            "the energy counter stopped (driver or firmware), not the load",
            "read total_energy_consumption twice under load (nvidia-smi -q -d POWER); update the driver or firmware if it does not grow",
        ),
        _ => (
            "the temperature sensor or its reading path, not the cooling",
            "compare nvidia-smi's temperature with the other GPUs' and with the power; a sensor that does not follow the load is not to be trusted for thermal alerts",
        ),
    }
    };
    match kind {
        AlertKind::ThermalRunaway if key == "temp_mem" => (
            "cooling failing on the HBM: airflow, fan or pump, or a memory thermal pad",
            "fan speed or coolant flow, inlet air temperature, the neighbours' memory temperatures; the thermal pads at the next service",
        ),
        AlertKind::ThermalRunaway => (
            "cooling failing: fan or pump, airflow, the room, or the heatsink's thermal interface",
            "fan speed or coolant flow, inlet air temperature, blocked filters or blanking panels, the neighbouring GPUs' temperatures at the same power",
        ),
        AlertKind::Throttling if key == "power_cap_low" => (
            "the power limit was lowered, or the power sensor reads high",
            "nvidia-smi -q -d POWER (current against default limit) and who set it; if the limit is the default, the power reading",
        ),
        AlertKind::Throttling if key.contains("thermal") => (
            "heat: the GPU slows itself down to stay under its temperature limit",
            "the cooling (fan or coolant flow, inlet air temperature) and the temperature history before the throttle",
        ),
        AlertKind::Throttling if key.contains("power_brake") => (
            "an external power brake: the power supply or chassis asked the GPU to slow down",
            "the power supplies and the chassis management (BMC) event log",
        ),
        AlertKind::Throttling => (
            "a hardware slowdown signal (power supply, board or GPU fault)",
            "the BMC event log, the power supplies, nvidia-smi -q -d PERFORMANCE; the GPU's XID history",
        ),
        AlertKind::ClockDrop => (
            "the GPU runs slower with no reason given: a clock or board fault, or application clocks changed",
            "nvidia-smi -q -d CLOCK (application and locked clocks), then the GPU with a diagnostic (dcgmi diag)",
        ),
        AlertKind::MemoryLeak => (
            "a process allocating GPU memory without freeing it",
            "nvidia-smi's process list and which process grows; restart or fix it before the memory is full",
        ),
        AlertKind::EccUncorrected => (
            "a failing HBM memory cell or row: results computed on this GPU may be wrong",
            "nvidia-smi -q -d ECC,ROW_REMAPPER (pending remaps: reset the GPU); drain the GPU if errors recur",
        ),
        AlertKind::EccCorrectedBurst => (
            "a weakening HBM region (corrected errors often come before uncorrected ones)",
            "nvidia-smi -q -d ECC,ROW_REMAPPER over the next hours; plan a reset and a memory test",
        ),
        AlertKind::MemoryRemap => (
            "memory rows remapped or pages retired after errors",
            "nvidia-smi -q -d ROW_REMAPPER (remap failures or rows left: replace the GPU)",
        ),
        AlertKind::PcieReplayBurst => (
            "a bad PCIe link: riser, cable, slot or board",
            "nvidia-smi -q (PCIe generation and width against the maximum), lspci -vv AER errors, reseat the GPU or riser",
        ),
        AlertKind::Xid => (
            "the driver reported an error (the XID code tells which: 48/94/95 memory, 79 fallen off the bus, 13/31/43 mostly the application)",
            "the kernel log (dmesg) around the time and NVIDIA's XID catalog for the code",
        ),
        AlertKind::SensorFrozen | AlertKind::SensorDrift => sensor(key),
        AlertKind::PerfDecay => (
            "the GPU delivers less than it used to: throttling, a clock or memory fault, or a changed driver",
            "the throttle and clock alerts around it, the driver version, then a benchmark on an idle GPU",
        ),
        AlertKind::Multivariate => (
            "a combination of readings unlike the GPU's healthy history, with no single rule broken",
            "the signals the alert names, against the same load on a healthy GPU",
        ),
        AlertKind::AmbientShift => (
            "the room or the cooling changed: a door, the air conditioning, a fan curve, another GPU's exhaust",
            "the inlet air temperature and the fan speed or coolant flow; if the cooling got worse, fix it: this GPU is judged from the new level on",
        ),
        AlertKind::SampleGap if key == "clock_step" => (
            "the clock the samples are timed by stepped back (a clock set by hand or by NTP, traces joined)",
            "the host's time synchronisation (timedatectl, chronyc tracking); the trace's times around the step",
        ),
        AlertKind::Degradation if key == "cooling" => (
            "the cooling losing capacity slowly: a fan or pump wearing, a filter clogging, coolant flow or inlet air getting worse",
            "fan speeds and tachometers or coolant flow and pressure, filters, the inlet air temperature; the neighbouring GPUs' temperatures at the same power",
        ),
        AlertKind::Degradation if key == "cooling_temp_gpu" => (
            "the die's thermal interface degrading (paste drying or pumping out, cold plate contact loosening)",
            "the GPU's temperature at the same power against its neighbours'; plan a repaste or cold plate service before it reaches its limit",
        ),
        AlertKind::Degradation if key == "cooling_temp_mem" => (
            "the memory's thermal pads or their contact with the cold plate degrading",
            "the HBM temperature at the same load against the neighbours'; the thermal pads at the next service",
        ),
        AlertKind::Degradation if key == "sensor_power" => (
            "the power sensor or its reading path drifting slowly, not the load",
            "compare nvidia-smi's power.draw with the energy counter's growth over minutes and with the PDU; a board fault if it keeps drifting",
        ),
        AlertKind::Degradation => (
            "a temperature sensor (the die's or the memory's) drifting slowly, not the room or the cooling",
            "compare the GPU and memory temperatures with the neighbours' at the same power and with an external probe; thermal alerts on the drifting sensor are in doubt",
        ),
        AlertKind::OtherModel => (
            "the healthy history given (--train) was recorded on another GPU model, whose clocks, power cap and temperatures are not this one's",
            "train on a healthy trace of this model (pog monitor run --record on a healthy GPU of it); until then this GPU is judged from its own levels, learned as it runs",
        ),
        AlertKind::SampleGap => (
            "no samples for a while: the sampler stalled, the host slept or was suspended, or the recording stopped",
            "the monitor's log around the gap, the host's load and NVML's answers (nvidia-smi); samples missing hide what the GPU did",
        ),
    }
}

/// How one signal moved: its value, the baseline it is judged against, and the difference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SignalChange {
    /// The value now (or over the alert's window, as `against` says).
    pub value: f64,
    /// The baseline value, when there is one.
    pub baseline: Option<f64>,
    /// `value - baseline`.
    pub change: Option<f64>,
    /// What the baseline is (and over what window the value is), in words.
    pub against: String,
}

impl SignalChange {
    /// A value against a baseline.
    pub fn against(value: f64, baseline: f64, against: impl Into<String>) -> SignalChange {
        SignalChange {
            value,
            baseline: Some(baseline),
            change: Some(value - baseline),
            against: against.into(),
        }
    }

    /// A value with no baseline (a rate, a count).
    pub fn value(value: f64, what: impl Into<String>) -> SignalChange {
        SignalChange {
            value,
            baseline: None,
            change: None,
            against: what.into(),
        }
    }
}

/// A detector's verdict on one sample, before de-duplication.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// What it is about.
    pub kind: AlertKind,
    /// Tells apart findings of one kind that are separate conditions (the cause of a
    /// throttle, the signal of a frozen sensor, an XID code).
    pub key: String,
    /// How bad.
    pub severity: Severity,
    /// The signals that moved.
    pub signals: BTreeMap<String, SignalChange>,
    /// One line for humans.
    pub message: String,
}

/// One alert, as `pog monitor replay --json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alert {
    /// The time of the sample that raised it (the trace's `t`).
    pub t: f64,
    /// What it is about.
    pub kind: AlertKind,
    /// How bad.
    pub severity: Severity,
    /// The signals that moved, how much, against which baseline.
    pub signals: BTreeMap<String, SignalChange>,
    /// One line for humans.
    pub message: String,
    /// The most likely cause, in words ([`explain`]).
    pub cause: &'static str,
    /// What to check first, in words ([`explain`]).
    pub check: &'static str,
}

/// The gate's timing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GateConfig {
    /// Seconds before a condition that is still true raises a reminder.
    pub cooldown_s: f64,
    /// Seconds a condition must stay absent before it counts as cleared (a new occurrence
    /// then raises a new alert).
    pub clear_s: f64,
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            cooldown_s: 300.0,
            clear_s: 30.0,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Open {
    last_emitted_t: f64,
    last_seen_t: f64,
    severity: Severity,
}

/// De-duplicates findings into alerts, per `(kind, key)`.
#[derive(Debug, Clone, Default)]
pub struct Gate {
    config: GateConfig,
    open: HashMap<(AlertKind, String), Open>,
}

impl Gate {
    /// A gate with these timings.
    pub fn new(config: GateConfig) -> Gate {
        Gate {
            config,
            open: HashMap::new(),
        }
    }

    /// The alerts that the findings of the sample at `t` raise.
    pub fn admit(&mut self, t: f64, findings: Vec<Finding>) -> Vec<Alert> {
        let clear_s = self.config.clear_s;
        self.open.retain(|_, open| t - open.last_seen_t <= clear_s);
        let mut alerts = Vec::new();
        for finding in findings {
            let slot = (finding.kind, finding.key.clone());
            let emit = match self.open.get_mut(&slot) {
                None => true,
                Some(open) => {
                    open.last_seen_t = t;
                    finding.severity > open.severity
                        || t - open.last_emitted_t >= self.config.cooldown_s
                }
            };
            if emit {
                self.open.insert(
                    slot,
                    Open {
                        last_emitted_t: t,
                        last_seen_t: t,
                        severity: finding.severity,
                    },
                );
                let (cause, check) = explain(finding.kind, &finding.key);
                alerts.push(Alert {
                    t,
                    kind: finding.kind,
                    severity: finding.severity,
                    signals: finding.signals,
                    message: finding.message,
                    cause,
                    check,
                });
            }
        }
        alerts
    }

    /// How many conditions are open (raised and not yet cleared).
    pub fn open_count(&self) -> usize {
        self.open.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(severity: Severity, key: &str) -> Finding {
        Finding {
            kind: AlertKind::Throttling,
            key: key.into(),
            severity,
            signals: BTreeMap::new(),
            message: "m".into(),
        }
    }

    #[test]
    fn a_lasting_condition_alerts_once_then_after_the_cooldown() {
        let mut gate = Gate::new(GateConfig {
            cooldown_s: 10.0,
            clear_s: 3.0,
        });
        let mut count = 0;
        for i in 0..25 {
            count += gate
                .admit(f64::from(i), vec![finding(Severity::Warning, "a")])
                .len();
        }
        assert_eq!(count, 3); // t = 0, 10, 20
        assert_eq!(gate.open_count(), 1);
    }

    #[test]
    fn escalation_and_other_keys_pass_the_gate() {
        let mut gate = Gate::new(GateConfig::default());
        assert_eq!(
            gate.admit(0.0, vec![finding(Severity::Warning, "a")]).len(),
            1
        );
        assert_eq!(
            gate.admit(1.0, vec![finding(Severity::Warning, "a")]).len(),
            0
        );
        assert_eq!(
            gate.admit(2.0, vec![finding(Severity::Critical, "a")])
                .len(),
            1
        );
        assert_eq!(
            gate.admit(3.0, vec![finding(Severity::Warning, "b")]).len(),
            1
        );
    }

    #[test]
    fn a_cleared_condition_alerts_again() {
        let mut gate = Gate::new(GateConfig {
            cooldown_s: 100.0,
            clear_s: 5.0,
        });
        assert_eq!(
            gate.admit(0.0, vec![finding(Severity::Warning, "a")]).len(),
            1
        );
        assert_eq!(
            gate.admit(4.0, vec![finding(Severity::Warning, "a")]).len(),
            0
        );
        assert_eq!(gate.admit(8.0, vec![]).len(), 0);
        assert_eq!(gate.admit(10.0, vec![]).len(), 0);
        assert_eq!(gate.open_count(), 0);
        assert_eq!(
            gate.admit(11.0, vec![finding(Severity::Warning, "a")])
                .len(),
            1
        );
    }

    #[test]
    fn alerts_serialize_as_the_replay_contract() {
        let mut signals = BTreeMap::new();
        signals.insert(
            "temp_gpu".to_string(),
            SignalChange::against(80.0, 62.0, "healthy max"),
        );
        let alert = Alert {
            t: 1.5,
            kind: AlertKind::ThermalRunaway,
            severity: Severity::Warning,
            signals,
            message: "hot".into(),
            cause: explain(AlertKind::ThermalRunaway, "temp_gpu").0,
            check: explain(AlertKind::ThermalRunaway, "temp_gpu").1,
        };
        let json = serde_json::to_value(&alert).unwrap();
        assert_eq!(json["kind"], "thermal_runaway");
        assert_eq!(json["severity"], "warning");
        assert_eq!(json["signals"]["temp_gpu"]["change"], 18.0);
        assert_eq!(json["t"], 1.5);
        assert!(json["cause"].as_str().unwrap().contains("cooling"));
        assert!(json["check"].as_str().unwrap().contains("fan"));
    }

    #[test]
    fn a_sensor_alert_blames_the_sensor_not_the_cooling() {
        for kind in [AlertKind::SensorFrozen, AlertKind::SensorDrift] {
            for key in ["power", "temp_gpu", "energy"] {
                let (cause, check) = explain(kind, key);
                assert!(cause.contains("not the"), "{cause}");
                assert!(!cause.contains("cooling failing") && !check.is_empty());
            }
        }
    }
}
