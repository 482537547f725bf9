//! The flags of `pog bench`.

use clap::Args;

/// What `pog bench` runs.
#[derive(Debug, Args, Clone)]
pub struct BenchArgs {
    /// quick (about half a minute per GPU; what `pog check` runs), standard or full.
    #[arg(long, default_value = "standard")]
    pub suite: pog_bench::Suite,

    /// CUDA ordinals of the GPUs to measure, e.g. 0,2 (default: all).
    #[arg(long, value_delimiter = ',', value_name = "N,...")]
    pub gpus: Option<Vec<usize>>,

    /// Square GEMM sizes instead of the suite's, e.g. 4096,8192.
    #[arg(long, value_delimiter = ',', value_name = "N,...", value_parser = clap::value_parser!(u64).range(16..=65536))]
    pub sizes: Option<Vec<u64>>,

    /// Precisions instead of all the GPU has: fp64,fp32,tf32,fp16,bf16,fp8,int8.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "P,...",
        value_enum,
        ignore_case = true
    )]
    pub precisions: Option<Vec<pog_spec::Precision>>,

    /// Timed runs per figure instead of the suite's.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub iterations: Option<u32>,

    /// Copy size in MiB instead of the suite's.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub copy_mib: Option<u64>,

    /// Seconds of sustained GEMM load instead of the suite's (0 skips it).
    #[arg(long, value_name = "SECONDS", value_parser = parse_sustained)]
    pub sustained_seconds: Option<f64>,

    /// Idle milliseconds before each GEMM's warm-up runs, after its algorithm is chosen
    /// (default 300): the figure is the burst rate from an idle card, as PyTorch's is. The rest
    /// before each timed run is `--gemm-run-rest-ms`.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u32).range(0..=60000))]
    pub gemm_rest_ms: Option<u32>,

    /// Idle milliseconds before each timed GEMM run, which follows one untimed run (default
    /// 300 from n = 16384 on, 0 below): each timed run a burst from rest, where back-to-back
    /// runs would meet the power cap; 0 times them back to back (the H200's references at
    /// n = 16384 were measured from rest, so such figures judge low).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u32).range(0..=60000))]
    pub gemm_run_rest_ms: Option<u32>,

    /// Skip the GPUs (host only).
    #[arg(long)]
    pub no_gpu: bool,

    /// Skip the host benchmarks.
    #[arg(long)]
    pub no_host: bool,

    /// Where the storage benchmark writes its test file (removed afterwards).
    #[arg(long, value_name = "DIR")]
    pub storage_dir: Option<std::path::PathBuf>,
}

/// A sustained load's length: up to a day, in seconds (0 skips it).
fn parse_sustained(s: &str) -> Result<f64, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(0.0..=86_400.0).contains(&secs) {
        return Err(format!("{secs} s is outside 0-86400 s"));
    }
    Ok(secs)
}
