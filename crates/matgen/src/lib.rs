//! Seeded matrices for benchmarks and proofs.
//!
//! Element `i` of the matrix with seed `s` is a pure function of `(s, i)`: a splitmix64 hash
//! turned directly into the bit pattern of the storage format. The GPU fills whole matrices with
//! the CUDA twin of the same function ([`CUDA_SOURCE`]); the CPU evaluates any single element
//! alone, so a checker can recompute any output element from nothing but the seeds.
//!
//! Values have random signs, exponents in {-2, -1, 0} and *full* random mantissas (magnitudes in
//! [0.25, 2)): as much bit entropy as `randn` inputs, so a power-capped GPU is measured under
//! realistic load, and never zero. INT8 values are uniform in [-127, 127].
//!
//! B is always stored K-major: element `(kk, col)` at `col * k + kk`. A is K-major too
//! (`(row, kk)` at `row * k + kk`: the "TN" layout cuBLASLt needs for FP8 and INT8) or M-major
//! (`(row, kk)` at `kk * m + row`: "NN", which some FP32/FP64 kernels prefer); see [`ALayout`].

#![warn(missing_docs)]

use pog_spec::Precision;

mod exact;
pub use exact::exact_dot;

/// The CUDA C twin of [`bits`], compiled by NVRTC. Kernels: `pog_fill_words(out, words, seed,
/// format)` writes whole hashes (8 bytes of elements each); `pog_fill_u64/u32/u16/u8(out,
/// first, n, seed, format)` writes elements one at a time; `format` =
/// [`Storage::format_code`].
pub const CUDA_SOURCE: &str = include_str!("fill.cu");

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// splitmix64's output of step `index + 1` from state `seed`.
#[inline(always)]
pub fn hash(seed: u64, index: u64) -> u64 {
    let mut z = seed.wrapping_add(index.wrapping_add(1).wrapping_mul(GOLDEN));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The storage format an input matrix of this precision uses (TF32 is stored as FP32).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    /// IEEE 754 double, 8 bytes (FP64 GEMMs).
    F64,
    /// IEEE 754 single, 4 bytes (FP32 and TF32 GEMMs).
    F32,
    /// IEEE 754 half, 2 bytes (FP16 GEMMs).
    F16,
    /// bfloat16, 2 bytes (BF16 GEMMs).
    Bf16,
    /// FP8 E4M3, 1 byte (FP8 GEMMs).
    E4m3,
    /// Signed 8-bit integer (INT8 GEMMs).
    I8,
}

impl Storage {
    /// The input storage of a GEMM in `precision`.
    pub fn of(precision: Precision) -> Storage {
        match precision {
            Precision::Fp64 => Storage::F64,
            Precision::Fp32 | Precision::Tf32 => Storage::F32,
            Precision::Fp16 => Storage::F16,
            Precision::Bf16 => Storage::Bf16,
            Precision::Fp8 => Storage::E4m3,
            Precision::Int8 => Storage::I8,
        }
    }

    /// Every storage format.
    pub const ALL: [Storage; 6] = [
        Storage::F64,
        Storage::F32,
        Storage::F16,
        Storage::Bf16,
        Storage::E4m3,
        Storage::I8,
    ];

    /// Bytes per element.
    pub fn bytes(self) -> usize {
        match self {
            Storage::F64 => 8,
            Storage::F32 => 4,
            Storage::F16 | Storage::Bf16 => 2,
            Storage::E4m3 | Storage::I8 => 1,
        }
    }

    /// Elements drawn from one 64-bit hash: as many as fit the bits each needs (sign,
    /// exponent choice, mantissa; a byte for INT8).
    pub fn per_hash(self) -> u64 {
        match self {
            Storage::F64 => 1,
            Storage::F32 => 2,
            Storage::F16 | Storage::Bf16 => 4,
            Storage::E4m3 | Storage::I8 => 8,
        }
    }

    /// The code the CUDA kernels take for this format.
    pub fn format_code(self) -> i32 {
        match self {
            Storage::F64 => 0,
            Storage::F32 => 1,
            Storage::F16 => 2,
            Storage::Bf16 => 3,
            Storage::E4m3 => 4,
            Storage::I8 => 5,
        }
    }
}

/// The bit pattern of element `index` of the matrix with this seed.
///
/// One splitmix64 output feeds [`Storage::per_hash`] consecutive elements: element `i` uses
/// the `(i % per)`-th chunk of `64 / per` bits of `hash(seed, i / per)`. In a chunk, bit 0 is
/// the sign, bits 1–2 pick the exponent (−2, −1 or 0; the value 3 wraps to −2) and the bits
/// from 3 up fill the mantissa; INT8 takes the whole byte modulo 255, minus 127.
pub fn bits(storage: Storage, seed: u64, index: u64) -> u64 {
    let per = storage.per_hash();
    chunk_bits(storage, hash(seed, index / per), index % per)
}

/// Element `slot` of the chunked hash `h` (see [`bits`]).
fn chunk_bits(storage: Storage, h: u64, slot: u64) -> u64 {
    let width = 64 / storage.per_hash();
    let c = if width == 64 {
        h
    } else {
        (h >> (slot * width)) & ((1 << width) - 1)
    };
    chunk_to_bits(storage, c)
}

/// The bit pattern a chunk of hash bits stands for.
#[inline(always)]
fn chunk_to_bits(storage: Storage, c: u64) -> u64 {
    let sign = c & 1;
    let exp = match (c >> 1) & 3 {
        3 => 0, // 3 wraps to 0 (% 3, without a division)
        e => e,
    }; // value exponent = exp - 2
    let man = c >> 3;
    match storage {
        Storage::F64 => sign << 63 | (1021 + exp) << 52 | (man & ((1 << 52) - 1)),
        Storage::F32 => sign << 31 | (125 + exp) << 23 | (man & 0x7f_ffff),
        Storage::F16 => sign << 15 | (13 + exp) << 10 | (man & 0x3ff),
        Storage::Bf16 => sign << 15 | (125 + exp) << 7 | (man & 0x7f),
        Storage::E4m3 => sign << 7 | (5 + exp) << 3 | (man & 0x7),
        Storage::I8 => ((c % 255) as i64 - 127) as u8 as u64,
    }
}

/// Fills `out` with the values of elements `start, start + 1, …`, one hash per chunk group:
/// the fast path for a row or column of a K-major matrix (what a checker recomputes), and
/// most of a validator's work: each chunk becomes its value by a table lookup (see
/// [`ChunkValues`]) rather than a decode of a dozen instructions.
pub fn values_into(storage: Storage, seed: u64, start: u64, out: &mut [f64]) {
    match ChunkValues::of(storage) {
        ChunkValues::Whole(table) => {
            let lookup = |c: u64| table[(c as usize) & (table.len() - 1)];
            match storage.per_hash() {
                4 => fill_with::<4>(seed, start, out, lookup),
                _ => fill_with::<8>(seed, start, out, lookup),
            }
        }
        ChunkValues::SignAndExponent(heads) => {
            // FP32 widens to f64 by moving its mantissa up 29 bits.
            let (mantissa, shift) = match storage {
                Storage::F64 => ((1 << 52) - 1, 0),
                _ => (0x7f_ffff, 29),
            };
            let assemble =
                |c: u64| f64::from_bits(heads[(c & 7) as usize] | (c >> 3 & mantissa) << shift);
            match storage.per_hash() {
                1 => fill_with::<1>(seed, start, out, assemble),
                _ => fill_with::<2>(seed, start, out, assemble),
            }
        }
    }
}

/// Precomputed values of chunks, per storage format.
enum ChunkValues {
    /// The value of every chunk of a narrow format, indexed by the chunk's low bits: all the
    /// bits a value depends on (sign, exponent choice and mantissa: 13 for FP16, 10 for BF16,
    /// 6 for E4M3; INT8's whole byte).
    Whole(&'static [f64]),
    /// F32 and F64 have too many mantissa bits for a table: the f64 bit pattern of the sign
    /// and exponent a chunk's low 3 bits choose, to be completed with its mantissa.
    SignAndExponent(&'static [u64; 8]),
}

impl ChunkValues {
    /// The tables of `storage`, built on first use from [`chunk_to_bits`] and [`decode`], so
    /// they cannot drift from the element-by-element path.
    fn of(storage: Storage) -> ChunkValues {
        use std::sync::LazyLock;
        fn whole(storage: Storage, bits: u32) -> Vec<f64> {
            (0..1u64 << bits)
                .map(|c| decode(storage, chunk_to_bits(storage, c)))
                .collect()
        }
        fn heads(storage: Storage) -> [u64; 8] {
            std::array::from_fn(|c| decode(storage, chunk_to_bits(storage, c as u64)).to_bits())
        }
        static F16: LazyLock<Vec<f64>> = LazyLock::new(|| whole(Storage::F16, 13));
        static BF16: LazyLock<Vec<f64>> = LazyLock::new(|| whole(Storage::Bf16, 10));
        static E4M3: LazyLock<Vec<f64>> = LazyLock::new(|| whole(Storage::E4m3, 6));
        static I8: LazyLock<Vec<f64>> = LazyLock::new(|| whole(Storage::I8, 8));
        static F32: LazyLock<[u64; 8]> = LazyLock::new(|| heads(Storage::F32));
        static F64: LazyLock<[u64; 8]> = LazyLock::new(|| heads(Storage::F64));
        match storage {
            Storage::F16 => ChunkValues::Whole(&F16),
            Storage::Bf16 => ChunkValues::Whole(&BF16),
            Storage::E4m3 => ChunkValues::Whole(&E4M3),
            Storage::I8 => ChunkValues::Whole(&I8),
            Storage::F32 => ChunkValues::SignAndExponent(&F32),
            Storage::F64 => ChunkValues::SignAndExponent(&F64),
        }
    }
}

/// The loop of [`values_into`], monomorphized per storage (`PER` elements per hash) so the
/// per-element work is branch-free: a partial hash at each end, whole hashes between.
#[inline(always)]
fn fill_with<const PER: usize>(
    seed: u64,
    start: u64,
    out: &mut [f64],
    chunk_value: impl Fn(u64) -> f64,
) {
    let per = PER as u64;
    let width = 64 / per;
    let mask = if PER == 1 { u64::MAX } else { (1 << width) - 1 };
    // Writes the chunks of hash `word` from `slot` on into `out`.
    let write = |out: &mut [f64], word: u64, slot: u64| {
        let mut h = hash(seed, word);
        if PER > 1 {
            h >>= slot * width;
        }
        for x in out {
            *x = chunk_value(h & mask);
            if PER > 1 {
                h >>= width;
            }
        }
    };
    let slot = start % per;
    let head = if slot == 0 {
        0
    } else {
        ((per - slot) as usize).min(out.len())
    };
    let (head_out, rest) = out.split_at_mut(head);
    if head > 0 {
        write(head_out, start / per, slot);
    }
    let mut word = start.div_ceil(per);
    let mut groups = rest.chunks_exact_mut(PER);
    for group in &mut groups {
        // A whole hash into exactly PER values: a fixed-length loop, unrolled.
        let group: &mut [f64; PER] = group.try_into().expect("chunks of PER");
        let mut h = hash(seed, word);
        for x in group {
            *x = chunk_value(h & mask);
            if PER > 1 {
                h >>= width;
            }
        }
        word += 1;
    }
    let tail = groups.into_remainder();
    if !tail.is_empty() {
        write(tail, word, 0);
    }
}

/// The exact value of element `index`.
pub fn value(storage: Storage, seed: u64, index: u64) -> f64 {
    decode(storage, bits(storage, seed, index))
}

/// The value of a bit pattern the generator produced in `storage`. The generator only makes
/// normal numbers (exponents −2…0), so FP16 and BF16 widen to FP32 by moving bits, without
/// the subnormal, infinity and NaN cases a general conversion must check.
#[inline(always)]
fn decode(storage: Storage, b: u64) -> f64 {
    match storage {
        Storage::F64 => f64::from_bits(b),
        Storage::F32 => f64::from(f32::from_bits(b as u32)),
        Storage::F16 => {
            let (sign, exp, man) = ((b >> 15) & 1, (b >> 10) & 0x1f, b & 0x3ff);
            f64::from(f32::from_bits(
                (sign << 31 | (exp + 112) << 23 | man << 13) as u32,
            ))
        }
        Storage::Bf16 => f64::from(f32::from_bits((b as u32) << 16)),
        Storage::E4m3 => e4m3_to_f64(b as u8),
        Storage::I8 => f64::from(b as u8 as i8),
    }
}

/// Decodes an FP8 E4M3 (OCP "fn" variant: bias 7, no infinities, S.1111.111 is NaN).
pub fn e4m3_to_f64(b: u8) -> f64 {
    let sign = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((b >> 3) & 0xf);
    let man = f64::from(b & 0x7);
    match exp {
        0 => sign * man / 8.0 * 2f64.powi(-6),
        15 if b & 0x7 == 7 => f64::NAN,
        _ => sign * (1.0 + man / 8.0) * 2f64.powi(exp - 7),
    }
}

/// How A's elements are laid out in memory (the same seeded buffer read two ways).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ALayout {
    /// `(row, kk)` at `row * k + kk`; cuBLAS "TN" with B K-major.
    #[default]
    KMajor,
    /// `(row, kk)` at `kk * m + row`; cuBLAS "NN".
    MMajor,
}

/// The output format of a GEMM in each precision, shared by the GPU runner and the checker
/// (a proof's leaves hold each element's [`committed_bytes`] of it). Bytes of one output element: FP32 for FP32 (and FP64 for FP64), FP16 / BF16 for those
/// (FP32 accumulation, rounded on output, as cuBLAS writes them), INT32 for INT8.
pub fn output_bytes(precision: Precision) -> usize {
    match precision {
        Precision::Fp64 => 8,
        Precision::Fp32 | Precision::Tf32 | Precision::Int8 => 4,
        Precision::Fp16 | Precision::Bf16 | Precision::Fp8 => 2,
    }
}

/// Encodes one output value as the GPU stores it (round to nearest even).
pub fn encode_output(precision: Precision, value: f64) -> Vec<u8> {
    match precision {
        Precision::Fp64 => value.to_le_bytes().to_vec(),
        Precision::Fp32 | Precision::Tf32 => (value as f32).to_le_bytes().to_vec(),
        Precision::Int8 => (value as i32).to_le_bytes().to_vec(),
        Precision::Fp16 => half::f16::from_f64(value).to_le_bytes().to_vec(),
        Precision::Bf16 | Precision::Fp8 => half::bf16::from_f64(value).to_le_bytes().to_vec(),
    }
}

/// Bytes of one output element in a proof's Merkle leaves: the low [`committed_bytes`] bytes of
/// its little-endian output format. Every format is committed whole but INT8's INT32 outputs,
/// committed by their low 16 bits (challenge version 8): no GPU computes an INT8 product's
/// sums modulo 2¹⁶ for less than the whole product (docs/protocol.md, "Committed outputs"),
/// and half the bytes halve the agent's leaf hashing.
pub fn committed_bytes(precision: Precision) -> usize {
    match precision {
        Precision::Int8 => 2,
        other => output_bytes(other),
    }
}

/// Encodes one output value as a proof's leaves hold it: [`encode_output`]'s bytes cut to
/// [`committed_bytes`].
pub fn encode_committed(precision: Precision, value: f64) -> Vec<u8> {
    let mut bytes = encode_output(precision, value);
    bytes.truncate(committed_bytes(precision));
    bytes
}

/// Decodes one committed output value (INT8: its low 16 bits, as an unsigned number).
pub fn decode_committed(precision: Precision, bytes: &[u8]) -> Option<f64> {
    match precision {
        Precision::Int8 => Some(f64::from(u16::from_le_bytes(bytes.try_into().ok()?))),
        other => decode_output(other, bytes),
    }
}

/// Decodes one output value.
pub fn decode_output(precision: Precision, bytes: &[u8]) -> Option<f64> {
    Some(match precision {
        Precision::Fp64 => f64::from_le_bytes(bytes.try_into().ok()?),
        Precision::Fp32 | Precision::Tf32 => f64::from(f32::from_le_bytes(bytes.try_into().ok()?)),
        Precision::Int8 => f64::from(i32::from_le_bytes(bytes.try_into().ok()?)),
        Precision::Fp16 => half::f16::from_le_bytes(bytes.try_into().ok()?).to_f64(),
        Precision::Bf16 | Precision::Fp8 => {
            half::bf16::from_le_bytes(bytes.try_into().ok()?).to_f64()
        }
    })
}

/// A GEMM `D = A·B` of seeded matrices: A is m×k (seed `seed_a`), B is k×n (seed `seed_b`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeededGemm {
    /// The precision the GEMM runs in; it fixes the input [`Storage`].
    pub precision: Precision,
    /// Rows of A and of the output.
    pub m: u64,
    /// Columns of B and of the output.
    pub n: u64,
    /// The inner dimension: columns of A, rows of B.
    pub k: u64,
    /// Seed of A's elements.
    pub seed_a: u64,
    /// Seed of B's elements.
    pub seed_b: u64,
    /// How A is laid out in memory.
    pub a_layout: ALayout,
}

/// One output element recomputed in f64, with the sums that scale honest rounding error.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reference {
    /// Σa·b over the row of A and column of B, summed in f64.
    pub value: f64,
    /// Σ|a·b|: scales accumulation error.
    pub abs_sum: f64,
    /// Σ(a·b)²: scales the random error of rounded inputs (TF32). Only the precisions whose
    /// bound reads it compute it: it is 0 for INT8, BF16 and FP16, whose sums
    /// [`SeededGemm::reference`] takes exactly in integers ([`exact_dot`]).
    pub square_sum: f64,
}

impl Reference {
    /// The reference as a proof's leaves commit it ([`committed_bytes`]): INT8's value reduced
    /// to its low 16 bits, as [`decode_committed`] reads them; every other precision as it is.
    pub fn committed(self, precision: Precision) -> Reference {
        match precision {
            Precision::Int8 => Reference {
                value: f64::from(self.value as i64 as u16),
                ..self
            },
            _ => self,
        }
    }

    /// Independent partial sums: the additions of one lane depend on each other (4 cycles
    /// each), the lanes do not, so the CPU overlaps them and can use SIMD. The order is fixed,
    /// so every validator gets the same bits; it differs from a serial sum by a few f64 ulps,
    /// nothing against the bounds of [`tolerance`] (INT8 sums are exact in any order).
    const LANES: usize = 8;

    /// The dot product of `a` and `b` with its error-scaling sums.
    fn of_products(a: &[f64], b: &[f64]) -> Reference {
        let mut sum = [0.0; Self::LANES];
        let mut abs_sum = [0.0; Self::LANES];
        let mut square_sum = [0.0; Self::LANES];
        let mut add = |lane: usize, p: f64| {
            sum[lane] += p;
            abs_sum[lane] += p.abs();
            square_sum[lane] += p * p;
        };
        let (xs, ys) = (a.chunks_exact(Self::LANES), b.chunks_exact(Self::LANES));
        let tail = xs.remainder().iter().zip(ys.remainder());
        for (x, y) in xs.zip(ys) {
            for lane in 0..Self::LANES {
                add(lane, x[lane] * y[lane]);
            }
        }
        for (lane, (x, y)) in tail.enumerate() {
            add(lane, x * y);
        }
        let total = |lanes: [f64; Self::LANES]| lanes.iter().sum();
        Reference {
            value: total(sum),
            abs_sum: total(abs_sum),
            square_sum: total(square_sum),
        }
    }
}

impl SeededGemm {
    /// Recomputes `D[row, col]` in f64 (O(k) element evaluations).
    pub fn reference(&self, row: u64, col: u64) -> Reference {
        let storage = Storage::of(self.precision);
        if self.a_layout == ALayout::KMajor {
            let exact = exact_dot(
                storage,
                (self.seed_a, row * self.k),
                (self.seed_b, col * self.k),
                self.k,
            );
            if let Some((value, abs_sum)) = exact {
                return Reference {
                    value,
                    abs_sum,
                    square_sum: 0.0,
                };
            }
        }
        let k = self.k as usize;
        let mut a = vec![0.0; k];
        let mut b = vec![0.0; k];
        match self.a_layout {
            ALayout::KMajor => values_into(storage, self.seed_a, row * self.k, &mut a),
            ALayout::MMajor => a
                .iter_mut()
                .enumerate()
                .for_each(|(kk, x)| *x = value(storage, self.seed_a, self.a_index(row, kk as u64))),
        }
        values_into(storage, self.seed_b, col * self.k, &mut b);
        Reference::of_products(&a, &b)
    }

    /// Where A's element `(row, kk)` lives in its buffer.
    pub fn a_index(&self, row: u64, kk: u64) -> u64 {
        match self.a_layout {
            ALayout::KMajor => row * self.k + kk,
            ALayout::MMajor => kk * self.m + row,
        }
    }

    /// Whether a computed `D[row, col]` is within the error honest arithmetic in this
    /// precision can produce (INT8: exactly equal). See [`tolerance`].
    pub fn accepts(&self, computed: f64, reference: Reference) -> bool {
        if self.precision == Precision::Int8 {
            return computed == reference.value;
        }
        computed.is_finite()
            && (computed - reference.value).abs() <= tolerance(self.precision, reference)
    }

    /// Multiply-adds ×2: the FLOP count of the product.
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }
}

/// Unit roundoff of the output format and of the accumulation, per precision.
///
/// FP16/BF16/FP8 GEMMs accumulate in FP32 and round the result to FP16 / BF16 / BF16 (as
/// PyTorch does). FP8 tensor-core accumulation on Hopper keeps fewer bits than FP32 between
/// cuBLASLt's promotions, so it gets a wider accumulation bound.
fn roundoff(precision: Precision) -> (f64, f64) {
    let u = |bits: i32| 2f64.powi(-bits);
    match precision {
        Precision::Fp64 => (u(53), u(53)),
        Precision::Fp32 | Precision::Tf32 => (u(24), u(24)),
        Precision::Fp16 => (u(11), u(24)),
        Precision::Bf16 => (u(8), u(24)),
        Precision::Fp8 => (u(8), u(14)),
        Precision::Int8 => (0.0, 0.0),
    }
}

/// Safety factor between the expected honest error and the bound.
const TOLERANCE_FACTOR: f64 = 8.0;

/// The largest |computed − reference| honest arithmetic in this precision produces, times
/// [`TOLERANCE_FACTOR`]:
/// `8 · (u_out·|D| + u_acc·Σ|a·b| + u_in·√Σ(a·b)²)`, where u_in = 2⁻¹⁰ for TF32 (inputs
/// rounded to 10 mantissa bits; other formats read their inputs exactly).
///
/// A kernel that skips or fakes part of the sum is off by about √(k/2)·rms(a·b), i.e. about
/// 1/√(2k) of Σ|a·b| (≈ 0.8 % at k = 8192): tens to hundreds of times these bounds, so each
/// checked element catches it with high probability and a few dozen catch it surely.
pub fn tolerance(precision: Precision, r: Reference) -> f64 {
    let (u_out, u_acc) = roundoff(precision);
    let u_in = if precision == Precision::Tf32 {
        2f64.powi(-10)
    } else {
        0.0
    };
    TOLERANCE_FACTOR * (u_out * r.value.abs() + u_acc * r.abs_sum + u_in * r.square_sum.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hash_is_splitmix64() {
        // splitmix64 seeded with 0: the published first outputs.
        assert_eq!(hash(0, 0), 0xE220_A839_7B1D_CDAF);
        assert_eq!(hash(0, 1), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn a_layouts_read_the_same_buffer_two_ways() {
        let tn = SeededGemm {
            precision: Precision::Fp64,
            m: 3,
            n: 2,
            k: 4,
            seed_a: 9,
            seed_b: 8,
            a_layout: ALayout::KMajor,
        };
        let nn = SeededGemm {
            a_layout: ALayout::MMajor,
            ..tn
        };
        let (row, col) = (2, 1);
        let by_hand = |g: &SeededGemm, a_index: &dyn Fn(u64) -> u64| -> f64 {
            (0..g.k)
                .map(|kk| {
                    value(Storage::F64, 9, a_index(kk)) * value(Storage::F64, 8, col * g.k + kk)
                })
                .sum()
        };
        assert_eq!(
            tn.reference(row, col).value,
            by_hand(&tn, &|kk| row * 4 + kk)
        );
        assert_eq!(
            nn.reference(row, col).value,
            by_hand(&nn, &|kk| kk * 3 + row)
        );
        assert_ne!(tn.reference(row, col).value, nn.reference(row, col).value);
    }

    #[test]
    fn fast_decoding_matches_the_general_conversions() {
        for i in 0..4096 {
            let f16 = bits(Storage::F16, 11, i);
            assert_eq!(
                value(Storage::F16, 11, i),
                half::f16::from_bits(f16 as u16).to_f64()
            );
            let bf16 = bits(Storage::Bf16, 11, i);
            assert_eq!(
                value(Storage::Bf16, 11, i),
                half::bf16::from_bits(bf16 as u16).to_f64()
            );
        }
    }

    #[test]
    fn outputs_round_trip() {
        for p in [
            Precision::Fp32,
            Precision::Fp16,
            Precision::Bf16,
            Precision::Int8,
            Precision::Fp64,
        ] {
            let bytes = encode_output(p, -3.0);
            assert_eq!(bytes.len(), output_bytes(p));
            assert_eq!(decode_output(p, &bytes), Some(-3.0));
        }
        assert_eq!(decode_output(Precision::Fp32, &[1, 2]), None);
    }

    #[test]
    fn int8_outputs_are_committed_by_their_low_16_bits_and_the_rest_whole() {
        for p in [
            Precision::Fp32,
            Precision::Fp16,
            Precision::Bf16,
            Precision::Fp64,
        ] {
            assert_eq!(encode_committed(p, -3.0), encode_output(p, -3.0));
            assert_eq!(decode_committed(p, &encode_committed(p, -3.0)), Some(-3.0));
        }
        let int8 = Precision::Int8;
        assert_eq!(committed_bytes(int8), 2);
        for (value, low) in [(-3.0, 65533.0), (70_000.0, 4464.0), (-70_000.0, 61072.0)] {
            let bytes = encode_committed(int8, value);
            assert_eq!(bytes, encode_output(int8, value)[..2]);
            assert_eq!(decode_committed(int8, &bytes), Some(low));
            let reference = Reference {
                value,
                abs_sum: 0.0,
                square_sum: 0.0,
            };
            assert_eq!(reference.committed(int8).value, low);
        }
        assert_eq!(decode_committed(int8, &[1, 2, 3, 4]), None);
    }

    #[test]
    fn e4m3_decoding() {
        assert_eq!(e4m3_to_f64(0x38), 1.0); // 0.0111.000
        assert_eq!(e4m3_to_f64(0x7e), 448.0); // the largest finite value
        assert_eq!(e4m3_to_f64(0xb8), -1.0);
        assert_eq!(e4m3_to_f64(0x01), 2f64.powi(-9)); // smallest subnormal
        assert!(e4m3_to_f64(0x7f).is_nan());
    }

    proptest! {
        #[test]
        fn the_bulk_path_matches_anywhere(seed: u64, start in 0u64..1 << 40, len in 0usize..40) {
            for s in Storage::ALL {
                let mut out = vec![0.0; len];
                values_into(s, seed, start, &mut out);
                for (i, v) in out.iter().enumerate() {
                    prop_assert_eq!(v.to_bits(), value(s, seed, start + i as u64).to_bits());
                }
            }
        }

        #[test]
        fn values_are_nonzero_finite_and_in_range(seed: u64, index in 0u64..1 << 40) {
            for s in [Storage::F64, Storage::F32, Storage::F16, Storage::Bf16, Storage::E4m3] {
                let v = value(s, seed, index).abs();
                prop_assert!((0.25..2.0).contains(&v), "{s:?}: {v}");
            }
            let i = value(Storage::I8, seed, index);
            prop_assert!((-127.0..=127.0).contains(&i) && i.fract() == 0.0);
        }
    }

    #[test]
    fn the_bulk_path_matches_element_by_element() {
        // Starts inside and at the edge of a hash, runs shorter than the rest of the first
        // hash, ends inside one.
        for (start, len) in [(13, 37), (13, 2), (16, 16), (0, 5), (7, 1), (3, 0)] {
            for s in Storage::ALL {
                let mut out = vec![0.0; len];
                values_into(s, 5, start, &mut out);
                for (i, v) in out.iter().enumerate() {
                    assert_eq!(*v, value(s, 5, start + i as u64), "{s:?} {start}+{i}");
                }
            }
        }
    }

    #[test]
    fn mantissas_are_fully_random() {
        // Every mantissa bit of FP32 is set in about half of the elements.
        let n = 4096;
        for bit in 0..23 {
            let ones = (0..n)
                .filter(|i| bits(Storage::F32, 7, *i) >> bit & 1 == 1)
                .count();
            assert!((1700..2400).contains(&ones), "bit {bit}: {ones}");
        }
    }

    #[test]
    fn honest_products_pass_and_faked_ones_fail() {
        for precision in Precision::ALL {
            let g = SeededGemm {
                precision,
                m: 64,
                n: 64,
                k: 2048,
                seed_a: 1,
                seed_b: 2,
                a_layout: ALayout::KMajor,
            };
            for (row, col) in [(0, 0), (5, 63), (63, 17)] {
                let r = g.reference(row, col);
                // Honest: the exact value, and that value rounded to the output format.
                assert!(g.accepts(r.value, r), "{precision:?}");
                if precision != Precision::Int8 {
                    let rounded = f64::from(half::bf16::from_f64(r.value).to_f32());
                    let out = if matches!(
                        precision,
                        Precision::Fp16 | Precision::Bf16 | Precision::Fp8 | Precision::Tf32
                    ) {
                        rounded
                    } else {
                        r.value
                    };
                    assert!(g.accepts(out, r), "{precision:?} rounded output");
                }
                assert!(!g.accepts(f64::NAN, r));
            }
            // A product computed over half of k is rejected at nearly every element.
            let lazy = SeededGemm { k: g.k / 2, ..g };
            let caught = (0..32)
                .filter(|i| !g.accepts(lazy.reference(*i, 2 * i).value, g.reference(*i, 2 * i)))
                .count();
            assert!(
                caught >= 28,
                "{precision:?}: only {caught} of 32 lazy elements caught"
            );
            // A planted wrong element is rejected.
            let r = g.reference(1, 1);
            assert!(
                !g.accepts(r.value + 0.01 * r.abs_sum + 1.0, r),
                "{precision:?}"
            );
        }
    }
}
