//! Benchmarks (being built).
