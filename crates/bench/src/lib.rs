//! Benchmarks: what to run on a GPU of a given model ([`plan`]), running it through the device
//! layer's [`pog_facts::Accelerator`] with results checked against an f64 reference
//! ([`gpu`]), summary statistics ([`stats`]), judgement against per-model thresholds
//! ([`judge`]), the memory test and bandwidth sweep ([`memory`]), the sustained run
//! ([`sustained`]), and the host's CPU, memory and storage ([`host`]).

#![warn(missing_docs)]

pub mod cutlass;
pub mod gpu;
pub mod host;
pub mod judge;
pub mod memory;
pub mod peer;
pub mod plan;
pub mod run;
pub mod stats;
pub mod sustained;

pub use judge::Verdict;
pub use plan::{Overrides, Suite};
pub use run::{measure, BenchError, BenchOptions, BenchReport, Progress};
