//! GEMMs through cuBLASLt: seeded inputs filled on the GPU, the fastest of cuBLASLt's heuristic
//! candidates chosen by timing, each run timed with CUDA events, and sampled outputs read back
//! for the caller to check.
//!
//! Layout is "TN" for every precision (both inputs K-major, as FP8 and INT8 require): A is
//! stored k×m column-major and transposed, B is k×n, D is m×n column-major.

use super::{DeviceBuffer, Gpu};
use crate::compute::{GemmRequest, GemmRun, GpuError, SustainedRequest, SustainedRun};
use crate::during::During;
use cudarc::cublaslt::result as lt;
use cudarc::cublaslt::sys::{
    self, cublasComputeType_t as Compute, cublasLtMatmulDescAttributes_t as DescAttr,
    cublasLtMatmulHeuristicResult_t, cublasLtMatmulPreferenceAttributes_t as PrefAttr,
    cudaDataType as Dt,
};
use cudarc::driver::result as drv;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::CudaContext;
use pog_matgen::{ALayout, Storage};
use pog_spec::Precision;
use std::ffi::c_void;
use std::sync::Arc;

/// cuBLASLt workspace: what PyTorch gives it on Hopper is 32 MiB; more never hurts here.
const WORKSPACE_BYTES: u64 = 64 << 20;

/// cublasOperation_t values (cudarc declares the enum only with its `cublas` feature).
const CUBLAS_OP_N: i32 = 0;
const CUBLAS_OP_T: i32 = 1;

/// Output elements each candidate must get right before it is timed.
const CHECKED_ELEMENTS: u64 = 4;
/// Timed runs per candidate in the first round of choosing the algorithm.
const CANDIDATE_RUNS: usize = 3;
/// Candidates re-timed in the second round, and their runs each.
const FINALISTS: usize = 3;
const FINAL_RUNS: usize = 5;

/// Median of a set of timings.
fn median(mut runs: Vec<f64>) -> f64 {
    runs.sort_by(f64::total_cmp);
    runs[runs.len() / 2]
}

/// A cuBLASLt handle with its workspace.
pub(super) struct Lt {
    handle: sys::cublasLtHandle_t,
    workspace: DeviceBuffer,
}

impl Lt {
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Lt, GpuError> {
        ctx.bind_to_thread().during("binding the CUDA context")?;
        let handle = lt::create_handle().during("creating a cuBLASLt handle")?;
        Ok(Lt {
            handle,
            workspace: DeviceBuffer::new(ctx, WORKSPACE_BYTES)?,
        })
    }
}

impl Drop for Lt {
    fn drop(&mut self) {
        // SAFETY: created in new, destroyed once.
        let _ = unsafe { lt::destroy_handle(self.handle) };
    }
}

/// Data types of one precision's GEMM: inputs, output, compute and scale (alpha/beta) type.
struct Types {
    input: Dt,
    output: Dt,
    compute: Compute,
    scale: Dt,
}

/// The cuBLASLt configuration per precision, matching PyTorch's choices: FP16 and BF16 write
/// FP16/BF16, FP8 E4M3 writes BF16 (as `torch._scaled_mm(out_dtype=bfloat16)`), INT8 writes
/// INT32; FP32 runs without TF32 and TF32 with it.
fn types(precision: Precision) -> Types {
    let (input, output, compute, scale) = match precision {
        Precision::Fp64 => (
            Dt::CUDA_R_64F,
            Dt::CUDA_R_64F,
            Compute::CUBLAS_COMPUTE_64F,
            Dt::CUDA_R_64F,
        ),
        Precision::Fp32 => (
            Dt::CUDA_R_32F,
            Dt::CUDA_R_32F,
            Compute::CUBLAS_COMPUTE_32F,
            Dt::CUDA_R_32F,
        ),
        Precision::Tf32 => (
            Dt::CUDA_R_32F,
            Dt::CUDA_R_32F,
            Compute::CUBLAS_COMPUTE_32F_FAST_TF32,
            Dt::CUDA_R_32F,
        ),
        Precision::Fp16 => (
            Dt::CUDA_R_16F,
            Dt::CUDA_R_16F,
            Compute::CUBLAS_COMPUTE_32F,
            Dt::CUDA_R_32F,
        ),
        Precision::Bf16 => (
            Dt::CUDA_R_16BF,
            Dt::CUDA_R_16BF,
            Compute::CUBLAS_COMPUTE_32F,
            Dt::CUDA_R_32F,
        ),
        Precision::Fp8 => (
            Dt::CUDA_R_8F_E4M3,
            Dt::CUDA_R_16BF,
            Compute::CUBLAS_COMPUTE_32F,
            Dt::CUDA_R_32F,
        ),
        Precision::Int8 => (
            Dt::CUDA_R_8I,
            Dt::CUDA_R_32I,
            Compute::CUBLAS_COMPUTE_32I,
            Dt::CUDA_R_32I,
        ),
    };
    Types {
        input,
        output,
        compute,
        scale,
    }
}

/// Bytes per output element, as a device size.
fn output_bytes(precision: Precision) -> u64 {
    pog_matgen::output_bytes(precision) as u64
}

struct Desc(sys::cublasLtMatmulDesc_t);
impl Drop for Desc {
    fn drop(&mut self) {
        // SAFETY: created once, destroyed once.
        let _ = unsafe { lt::destroy_matmul_desc(self.0) };
    }
}
struct Layout(sys::cublasLtMatrixLayout_t);
impl Drop for Layout {
    fn drop(&mut self) {
        // SAFETY: created once, destroyed once.
        let _ = unsafe { lt::destroy_matrix_layout(self.0) };
    }
}
struct Pref(sys::cublasLtMatmulPreference_t);
impl Drop for Pref {
    fn drop(&mut self) {
        // SAFETY: created once, destroyed once.
        let _ = unsafe { lt::destroy_matmul_pref(self.0) };
    }
}

/// alpha = 1 and beta = 0 in the scale type, as raw bytes.
fn scalars(scale: Dt) -> ([u8; 8], [u8; 8]) {
    let mut one = [0u8; 8];
    match scale {
        Dt::CUDA_R_64F => one = 1f64.to_le_bytes(),
        Dt::CUDA_R_32I => one[..4].copy_from_slice(&1i32.to_le_bytes()),
        _ => one[..4].copy_from_slice(&1f32.to_le_bytes()),
    }
    (one, [0u8; 8])
}

/// One way to lay out A for cuBLASLt, with its descriptors (see `pog_matgen::ALayout`).
struct Variant {
    a_layout: ALayout,
    desc: Desc,
    la: Layout,
}

/// A cuBLASLt algorithm chosen for one shape, kept so later GEMMs of that shape can skip the
/// choice (the proof's products must not pay for it inside their timed window).
#[derive(Clone, Copy)]
pub(crate) struct Chosen {
    pub a_layout: ALayout,
    algo: sys::cublasLtMatmulAlgo_t,
    /// Where it ranked: (candidate, of how many).
    rank: (usize, usize),
}

/// A GEMM ready to run: filled inputs, output buffer, descriptors and the chosen algorithm.
pub(super) struct Prepared<'g> {
    gpu: &'g Gpu,
    lt: &'g Lt,
    precision: Precision,
    m: u64,
    n: u64,
    k: u64,
    /// The seeds A and B were last filled from.
    seeds: std::cell::Cell<(u64, u64)>,
    a: DeviceBuffer,
    b: DeviceBuffer,
    pub d: DeviceBuffer,
    variants: Vec<Variant>,
    lb: Layout,
    ld: Layout,
    pref: Pref,
    /// The chosen variant and algorithm.
    variant: usize,
    algo: Option<Chosen>,
    alpha: [u8; 8],
    beta: [u8; 8],
}

impl<'g> Prepared<'g> {
    /// Allocates and fills the inputs and sets up cuBLASLt for each of `layouts` the
    /// precision allows (FP8 and INT8 run only K-major A, "TN"). No algorithm is chosen yet:
    /// call [`Prepared::choose_fastest`] or [`Prepared::choose`].
    pub fn new(
        gpu: &'g Gpu,
        lt: &'g Lt,
        precision: Precision,
        (m, n, k): (u64, u64, u64),
        (seed_a, seed_b): (u64, u64),
        layouts: &[ALayout],
    ) -> Result<Prepared<'g>, GpuError> {
        let t = types(precision);
        let step = |what: &str| format!("{precision} GEMM {m}x{n}x{k}: {what}");
        let storage = Storage::of(precision);
        let a = gpu.alloc(m * k * storage.bytes() as u64)?;
        let b = gpu.alloc(k * n * storage.bytes() as u64)?;
        let d = gpu.alloc(m * n * output_bytes(precision))?;

        let layout = |dt: Dt, rows: u64, cols: u64| {
            lt::create_matrix_layout(dt, rows, cols, rows as i64)
                .map(Layout)
                .during(&step("matrix layout"))
        };
        let (lb, ld) = (layout(t.input, k, n)?, layout(t.output, m, n)?);
        let tn_only = matches!(precision, Precision::Fp8 | Precision::Int8);
        let mut variants = Vec::new();
        for &a_layout in layouts {
            if tn_only && a_layout != ALayout::KMajor {
                continue;
            }
            let desc = Desc(
                lt::create_matmul_desc(t.compute, t.scale).during(&step("matmul descriptor"))?,
            );
            let (trans_a, la) = match a_layout {
                ALayout::KMajor => (CUBLAS_OP_T, layout(t.input, k, m)?),
                ALayout::MMajor => (CUBLAS_OP_N, layout(t.input, m, k)?),
            };
            let trans_b = CUBLAS_OP_N;
            // SAFETY: the descriptor is live; each attribute is an int32 as cuBLASLt documents.
            unsafe {
                lt::set_matmul_desc_attribute(
                    desc.0,
                    DescAttr::CUBLASLT_MATMUL_DESC_TRANSA,
                    &trans_a as *const i32 as *const c_void,
                    4,
                )
                .and_then(|_| {
                    lt::set_matmul_desc_attribute(
                        desc.0,
                        DescAttr::CUBLASLT_MATMUL_DESC_TRANSB,
                        &trans_b as *const i32 as *const c_void,
                        4,
                    )
                })
                .during(&step("transpose attributes"))?;
            }
            variants.push(Variant { a_layout, desc, la });
        }
        if variants.is_empty() {
            return Err(GpuError::Invalid(step("no layout of A left to run")));
        }
        let pref = Pref(lt::create_matmul_pref().during(&step("preference"))?);
        let workspace = lt.workspace.bytes;
        // SAFETY: live preference; the attribute is a u64.
        unsafe {
            lt::set_matmul_pref_attribute(
                pref.0,
                PrefAttr::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                &workspace as *const u64 as *const c_void,
                8,
            )
        }
        .during(&step("workspace preference"))?;
        let (alpha, beta) = scalars(t.scale);
        let prepared = Prepared {
            gpu,
            lt,
            precision,
            m,
            n,
            k,
            seeds: std::cell::Cell::new((seed_a, seed_b)),
            a,
            b,
            d,
            variants,
            lb,
            ld,
            pref,
            variant: 0,
            algo: None,
            alpha,
            beta,
        };
        let storage = Storage::of(precision);
        prepared.gpu.fill(&prepared.a, storage, seed_a)?;
        prepared.gpu.fill(&prepared.b, storage, seed_b)?;
        Ok(prepared)
    }

    /// Fills A and B again from new seeds (queued on the stream; the descriptors and the
    /// chosen algorithm stay). A matrix whose seed did not change is not generated again: a
    /// proof's products share one A (challenge version 7), so a batch fills A once.
    pub fn refill(&self, (seed_a, seed_b): (u64, u64)) -> Result<(), GpuError> {
        let storage = Storage::of(self.precision);
        let (held_a, held_b) = self.seeds.replace((seed_a, seed_b));
        if seed_a != held_a {
            self.gpu.fill(&self.a, storage, seed_a)?;
        }
        if seed_b != held_b {
            self.gpu.fill(&self.b, storage, seed_b)?;
        }
        Ok(())
    }

    /// Runs the GEMM once into a zeroed output and checks a few elements against the f64
    /// reference: a candidate that returns without computing (or computes wrongly) must not
    /// win the choice by being fast. `Ok(false)` for a candidate that cuBLASLt refuses to
    /// launch or that computes wrongly; an error for a failure of the device itself (a faulted
    /// context fails every later call too, so it must surface, not read as "skip this one").
    fn computes_right(&self) -> Result<bool, GpuError> {
        // SAFETY: d holds d.bytes bytes; the memset is queued on the GEMM's stream.
        unsafe {
            drv::memset_d8_async(
                self.d.ptr,
                0,
                self.d.bytes as usize,
                self.gpu.stream.cu_stream(),
            )
        }
        .during("clearing the output")?;
        if self.run().is_err() {
            // cuBLASLt refused this candidate, or the device failed: a sync tells them apart.
            self.gpu.sync()?;
            return Ok(false);
        }
        self.gpu.sync()?;
        let (seed_a, seed_b) = self.seeds.get();
        let reference = pog_matgen::SeededGemm {
            precision: self.precision,
            m: self.m,
            n: self.n,
            k: self.k,
            seed_a,
            seed_b,
            a_layout: self.a_layout(),
        };
        let positions: Vec<(u64, u64)> = (0..CHECKED_ELEMENTS)
            .map(|i| {
                let h = pog_matgen::hash(seed_a ^ seed_b, i);
                (h % self.m, (h >> 32) % self.n)
            })
            .collect();
        let values = self.read_samples(&positions)?;
        Ok(positions
            .iter()
            .zip(values)
            .all(|(&(row, col), v)| reference.accepts(v, reference.reference(row, col))))
    }

    /// Every (variant, algorithm) cuBLASLt proposes, up to `wanted` per variant.
    fn proposals(&self, wanted: u32) -> Vec<(usize, sys::cublasLtMatmulAlgo_t)> {
        let wanted = wanted.clamp(1, 32) as usize;
        let mut proposals = Vec::new();
        for (v, variant) in self.variants.iter().enumerate() {
            // SAFETY: the heuristic result is plain data; cuBLASLt fills `count` entries.
            let mut results: Vec<cublasLtMatmulHeuristicResult_t> =
                vec![unsafe { std::mem::zeroed() }; wanted];
            let mut count = 0i32;
            // SAFETY: all descriptors are live; results has room for `wanted` entries.
            let status = unsafe {
                sys::cublasLtMatmulAlgoGetHeuristic(
                    self.lt.handle,
                    variant.desc.0,
                    variant.la.0,
                    self.lb.0,
                    self.ld.0,
                    self.ld.0,
                    self.pref.0,
                    wanted as i32,
                    results.as_mut_ptr(),
                    &mut count,
                )
            };
            if status == sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
                results.truncate(count.max(0) as usize);
                proposals.extend(
                    results
                        .iter()
                        .filter(|r| r.state == sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS)
                        .map(|r| (v, r.algo)),
                );
            }
        }
        proposals
    }

    /// Times up to `candidates` of cuBLASLt's heuristic algorithms per variant and keeps the
    /// fastest.
    ///
    /// Two rounds: every candidate warmed once and timed CANDIDATE_RUNS times; then the
    /// FINALISTS fastest re-timed in turn (round-robin, so clock and power drift hit them
    /// alike) and the lowest median of their runs kept. One quick round alone picked a slower
    /// kernel when this power-capped card's clocks moved mid-selection.
    pub fn choose_fastest(&mut self, candidates: u32) -> Result<(), GpuError> {
        let proposals = self.proposals(candidates);
        let total = proposals.len();
        let precision = self.precision;
        let step = |what: &str| format!("{precision} GEMM: {what}");
        if proposals.is_empty() {
            return Err(GpuError::Invalid(step(
                "cuBLASLt offers no algorithm; this GPU may lack this precision",
            )));
        }
        let layouts: Vec<ALayout> = self.variants.iter().map(|v| v.a_layout).collect();
        let chosen = |i: usize| {
            let (v, algo) = proposals[i];
            Chosen {
                a_layout: layouts[v],
                algo,
                rank: (i + 1, total),
            }
        };
        let mut first_round: Vec<(usize, f64)> = Vec::new();
        for i in 0..total {
            self.choose(chosen(i))?;
            // A candidate cuBLASLt offered that cannot run here, or runs wrongly, is skipped.
            if !self.computes_right()? {
                continue;
            }
            let runs: Vec<f64> = (0..CANDIDATE_RUNS)
                .map(|_| self.time())
                .collect::<Result<_, _>>()?;
            first_round.push((i, median(runs)));
        }
        first_round.sort_by(|a, b| a.1.total_cmp(&b.1));
        first_round.truncate(FINALISTS);
        let mut final_runs: Vec<Vec<f64>> = vec![Vec::new(); first_round.len()];
        for _ in 0..FINAL_RUNS {
            for (slot, (i, _)) in first_round.iter().enumerate() {
                self.choose(chosen(*i))?;
                final_runs[slot].push(self.time()?);
            }
        }
        let best = first_round
            .iter()
            .zip(final_runs)
            .map(|((i, _), runs)| (*i, median(runs)))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        let Some((best, _)) = best else {
            return Err(GpuError::Invalid(step("none of cuBLASLt's candidates ran")));
        };
        self.choose(chosen(best))
    }

    /// Uses an algorithm chosen earlier for this shape.
    pub fn choose(&mut self, chosen: Chosen) -> Result<(), GpuError> {
        self.variant = self
            .variants
            .iter()
            .position(|v| v.a_layout == chosen.a_layout)
            .ok_or_else(|| {
                GpuError::Unsupported(format!(
                    "{} GEMM: no {} variant for the chosen algorithm",
                    self.precision,
                    layout_name(chosen.a_layout)
                ))
            })?;
        self.algo = Some(chosen);
        Ok(())
    }

    /// The algorithm in use (after a choice).
    pub fn chosen(&self) -> Option<Chosen> {
        self.algo
    }

    /// The algorithm in use, described for the report.
    pub fn algorithm(&self) -> String {
        match self.algo {
            None => "none chosen".into(),
            Some(c) => format!(
                "cuBLASLt {}, candidate {} of {} (algo id {})",
                layout_name(c.a_layout),
                c.rank.0,
                c.rank.1,
                algo_id(&c.algo)
            ),
        }
    }

    /// How the chosen variant reads A.
    pub fn a_layout(&self) -> ALayout {
        self.variants[self.variant].a_layout
    }

    /// Enqueues one GEMM on the stream, into the prepared output buffer.
    pub fn run(&self) -> Result<(), GpuError> {
        self.run_at(self.d.ptr)
    }

    /// Enqueues one GEMM on the stream, writing the output into `out` from byte `offset`
    /// instead of the prepared buffer: a proof keeping every product's output computes each
    /// straight into its place, with no copy. Refused where the output would not fit there.
    pub fn run_into(&self, out: &DeviceBuffer, offset: u64) -> Result<(), GpuError> {
        if offset
            .checked_add(self.d.bytes)
            .is_none_or(|end| end > out.bytes)
        {
            return Err(GpuError::Invalid(format!(
                "{} GEMM output of {} bytes at byte {offset} of a {}-byte buffer",
                self.precision, self.d.bytes, out.bytes
            )));
        }
        self.run_at(out.ptr + offset)
    }

    /// Enqueues one GEMM writing its output at `out`, which holds [`Prepared::d`]'s bytes.
    fn run_at(&self, out: CUdeviceptr) -> Result<(), GpuError> {
        let Some(chosen) = &self.algo else {
            return Err(GpuError::Unsupported(format!(
                "{} GEMM run before an algorithm was chosen",
                self.precision
            )));
        };
        // SAFETY: buffers hold the sizes the layouts describe; the workspace is as declared.
        unsafe {
            lt::matmul(
                self.lt.handle,
                self.variants[self.variant].desc.0,
                self.alpha.as_ptr() as *const c_void,
                self.beta.as_ptr() as *const c_void,
                self.a.ptr as *const c_void,
                self.variants[self.variant].la.0,
                self.b.ptr as *const c_void,
                self.lb.0,
                out as *const c_void,
                self.ld.0,
                out as *mut c_void,
                self.ld.0,
                &chosen.algo,
                self.lt.workspace.ptr as *mut c_void,
                self.lt.workspace.bytes as usize,
                self.gpu.stream.cu_stream() as sys::cudaStream_t,
            )
        }
        .during(&format!("{} cublasLtMatmul", self.precision))
    }

    /// Runs one GEMM between two events and returns its milliseconds.
    pub fn time(&self) -> Result<f64, GpuError> {
        self.gpu.time(|| self.run())
    }

    /// Reads back `D[row, col]` for each sample.
    pub fn read_samples(&self, positions: &[(u64, u64)]) -> Result<Vec<f64>, GpuError> {
        let width = output_bytes(self.precision);
        positions
            .iter()
            .map(|&(row, col)| {
                if row >= self.m || col >= self.n {
                    return Err(GpuError::Unsupported(format!(
                        "sample ({row}, {col}) outside the {}x{} output",
                        self.m, self.n
                    )));
                }
                let mut bytes = [0u8; 8];
                // SAFETY: the element lies inside d (checked above); the copy is synchronous.
                unsafe {
                    drv::memcpy_dtoh_sync(
                        &mut bytes[..width as usize],
                        self.d.ptr + (col * self.m + row) * width,
                    )
                }
                .during("reading back a sample")?;
                pog_matgen::decode_output(self.precision, &bytes[..width as usize]).ok_or_else(
                    || GpuError::Unsupported("reading back a sample: wrong width".into()),
                )
            })
            .collect()
    }

    /// Output elements, their width in bytes and how NaN is spelled (for `pog_compare`).
    pub fn output_shape(&self) -> (u64, i32, i32) {
        let kind = match self.precision {
            Precision::Int8 => 0,
            Precision::Bf16 | Precision::Fp8 => 2,
            _ => 1,
        };
        (self.m * self.n, output_bytes(self.precision) as i32, kind)
    }
}

/// A layout of A by cuBLAS's transpose letters for (A, B): "TN" or "NN".
fn layout_name(layout: ALayout) -> &'static str {
    match layout {
        ALayout::KMajor => "TN",
        ALayout::MMajor => "NN",
    }
}

fn algo_id(algo: &sys::cublasLtMatmulAlgo_t) -> i32 {
    let mut id = 0i32;
    let mut written = 0usize;
    // SAFETY: reads one int32 attribute of a live algorithm.
    unsafe {
        sys::cublasLtMatmulAlgoConfigGetAttribute(
            algo,
            sys::cublasLtMatmulAlgoConfigAttributes_t::CUBLASLT_ALGO_CONFIG_ID,
            &mut id as *mut i32 as *mut c_void,
            4,
            &mut written,
        );
    }
    id
}

/// A timed GEMM with sampled outputs.
pub(super) fn run(gpu: &Gpu, lt: &Lt, req: &GemmRequest) -> Result<GemmRun, GpuError> {
    let mut g = Prepared::new(
        gpu,
        lt,
        req.precision,
        (req.m, req.n, req.k),
        (req.seed_a, req.seed_b),
        &[ALayout::KMajor, ALayout::MMajor],
    )?;
    g.choose_fastest(req.candidates)?;
    gpu.sync()?;
    std::thread::sleep(std::time::Duration::from_millis(req.rest_ms.into()));
    // A few warm-up runs, as PyTorch's and cutlass_profiler's timings do: the figure is the
    // GEMM's burst rate. (Warming for 200 ms instead drove the tensor-core GEMMs at n = 8192
    // into the 700 W cap, e.g. FP16 677 instead of 779 TFLOP/s on the H200: that steady state
    // is what the sustained run measures.)
    for _ in 0..req.warmup {
        g.run()?;
    }
    let times_ms = (0..req.iterations)
        .map(|_| {
            if req.run_rest_ms > 0 {
                gpu.sync()?;
                std::thread::sleep(std::time::Duration::from_millis(req.run_rest_ms.into()));
                g.run()?;
            }
            g.time()
        })
        .collect::<Result<Vec<_>, _>>()?;
    gpu.sync()?;
    Ok(GemmRun {
        times_ms,
        algorithm: g.algorithm(),
        candidates_timed: g.chosen().map_or(0, |c| c.rank.1 as u32),
        a_layout: g.a_layout(),
        samples: g.read_samples(&req.samples)?,
    })
}

/// GEMMs back to back for `seconds`, each compared with the first result on the GPU, with
/// NVML sampled alongside.
pub(super) fn sustained(
    gpu: &Gpu,
    lt: &Lt,
    req: &SustainedRequest,
) -> Result<SustainedRun, GpuError> {
    let mut g = Prepared::new(
        gpu,
        lt,
        req.precision,
        (req.size, req.size, req.size),
        (req.seed_a, req.seed_b),
        &[ALayout::KMajor, ALayout::MMajor],
    )?;
    g.choose_fastest(4)?;
    let (elements, width, kind) = g.output_shape();
    let first = gpu.alloc(g.d.bytes)?;
    let counters = gpu.alloc(16)?;
    let sampler = crate::telemetry::Sampler::start(
        gpu.bus_id,
        std::time::Duration::from_millis(req.sample_interval_ms.max(10)),
    );
    let started = std::time::Instant::now();
    let mut times_ms = vec![g.time()?];
    // SAFETY: both buffers hold d.bytes; synchronous copy after the first GEMM finished.
    unsafe {
        drv::memcpy_dtod_async(
            first.ptr,
            g.d.ptr,
            g.d.bytes as usize,
            gpu.stream.cu_stream(),
        )
    }
    .during("keeping the first result")?;
    let (mut mismatched, mut nans) = (Vec::new(), Vec::new());
    while started.elapsed().as_secs_f64() < req.seconds {
        times_ms.push(g.time()?);
        let [differ, nan] = gpu.compare(&g.d, &first, (elements, width, kind), &counters)?;
        mismatched.push(differ);
        nans.push(nan);
    }
    let telemetry = sampler.stop();
    Ok(SustainedRun {
        times_ms,
        elements,
        mismatched,
        nans,
        telemetry,
    })
}
