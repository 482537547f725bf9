//! GPU health as pure logic (issue 13): what the sampler reads, how it is recorded, and how
//! anomalies are found in it. No NVML here: `pog-device` reads the hardware, this crate judges
//! the readings, so every detector is tested on recorded traces.
//!
//! - [`sample`]: [`Sample`], one reading of every field (each `None` when not read), and
//!   NVML's clock-event [`reasons`](sample::reasons).
//! - [`trace`]: the trace CSV (the H200 fixture's columns), read with typed, line-numbered
//!   errors and written back unchanged.
//! - [`model`]: what healthy history teaches: median/MAD baselines per load state, a thermal
//!   envelope over recent power, how long sensors stay unchanged, an isolation forest.
//! - [`baseline`]: what is learned online, per GPU, as it runs: its thermal level against
//!   the healthy envelope (the room, the cooling, the card).
//! - [`response`]: the die's own thermal time constant, learned online per GPU from its load
//!   steps, and how far its die still has to go to settle at the load it holds.
//! - [`degradation`]: the learned model of slow drifts: each temperature regressed on power,
//!   utilization and clocks (trained on healthy history, frozen), its residual fitted online
//!   per GPU against a frozen per-GPU reference, with predictive alerts.
//! - [`monitor`]: [`Monitor`], every detector run sample by sample (the live path and
//!   [`replay`] are the same code), with alerts de-duplicated by the [`alert::Gate`].
//! - [`mod@downsample`]: 1-minute min/mean/max aggregates.
//! - [`history`]: the embedded SQLite history (raw samples, minutes, alerts), written in batches.
//! - [`inject`]: faults injected into real traces, for tests and the evaluation set.
//! - [`dashboard`]: the dashboard's JSON (each GPU's current values, charts, limits, counters
//!   and alerts) and its page, whose own script draws the charts and redraws in place.
//! - [`prometheus`]: the `/metrics` page, under dcgm-exporter's names and labels.
//! - [`source`]: the [`Source`] of live samples (and of each GPU's [`Limits`]) the monitor loop
//!   reads, and [`Replay`] of a recorded trace ([`Replays`]: several, as several GPUs).
//! - [`live`] (feature `live`): [`LiveMonitor`], the one sampling loop (`pog monitor run` and
//!   the agent's health watch): detectors, history, alert delivery and the live snapshot;
//!   [`webhook`]: alerts POSTed from a bounded queue; [`serve`]: its `/metrics` and dashboard.

#![warn(missing_docs)]

pub mod alert;
pub mod baseline;
pub mod config;
pub mod dashboard;
pub mod degradation;
pub mod downsample;
pub mod forest;
pub mod history;
pub mod inject;
#[cfg(feature = "live")]
pub mod live;
pub mod model;
pub mod monitor;
pub mod prometheus;
pub mod response;
pub mod sample;
#[cfg(feature = "live")]
pub mod serve;
pub mod source;
pub mod stats;
pub mod trace;
#[cfg(feature = "live")]
pub mod webhook;
pub mod xid;

pub use alert::{Alert, AlertKind, Severity, SignalChange};
pub use config::Config;
pub use downsample::{downsample, Aggregate, Downsampler};
#[cfg(feature = "live")]
pub use live::{LiveMonitor, RunSummary, Settings};
pub use model::{Model, TrainError};
pub use monitor::{replay, Monitor};
pub use sample::{NvLinkSample, NvLinks, Profiling, Sample, Signal};
pub use source::{Limits, Replay, Replays, Source};
pub use trace::{parse_trace, read_trace, StepsBack, TraceError, TraceReader, TraceWriter};
