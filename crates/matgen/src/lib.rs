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

use pog_spec::Precision;

/// The CUDA C twin of [`bits`], compiled by NVRTC. Kernels: `pog_fill_words(out, words, seed,
/// format)` writes whole hashes (8 bytes of elements each); `pog_fill_u64/u32/u16/u8(out,
/// first, n, seed, format)` writes elements one at a time; `format` =
/// [`Storage::format_code`].
pub const CUDA_SOURCE: &str = include_str!("fill.cu");

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// splitmix64's output of step `index + 1` from state `seed`.
pub fn hash(seed: u64, index: u64) -> u64 {
    let mut z = seed.wrapping_add(index.wrapping_add(1).wrapping_mul(GOLDEN));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The storage format an input matrix of this precision uses (TF32 is stored as FP32).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    F64,
    F32,
    F16,
    Bf16,
    E4m3,
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
    let exp = ((c >> 1) & 3) % 3; // value exponent = exp - 2
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
/// the fast path for a row or column of a K-major matrix (what a checker recomputes).
pub fn values_into(storage: Storage, seed: u64, start: u64, out: &mut [f64]) {
    match storage {
        Storage::F64 => fill_with(storage, seed, start, out, |c| {
            decode(Storage::F64, chunk_to_bits(Storage::F64, c))
        }),
        Storage::F32 => fill_with(storage, seed, start, out, |c| {
            decode(Storage::F32, chunk_to_bits(Storage::F32, c))
        }),
        Storage::F16 => fill_with(storage, seed, start, out, |c| {
            decode(Storage::F16, chunk_to_bits(Storage::F16, c))
        }),
        Storage::Bf16 => fill_with(storage, seed, start, out, |c| {
            decode(Storage::Bf16, chunk_to_bits(Storage::Bf16, c))
        }),
        Storage::E4m3 => fill_with(storage, seed, start, out, |c| {
            decode(Storage::E4m3, chunk_to_bits(Storage::E4m3, c))
        }),
        Storage::I8 => fill_with(storage, seed, start, out, |c| {
            decode(Storage::I8, chunk_to_bits(Storage::I8, c))
        }),
    }
}

/// The loop of [`values_into`], monomorphized per storage so the per-element work is
/// branch-free: one hash per group, then each chunk decoded.
#[inline(always)]
fn fill_with(
    storage: Storage,
    seed: u64,
    start: u64,
    out: &mut [f64],
    chunk_value: impl Fn(u64) -> f64,
) {
    let per = storage.per_hash();
    let width = 64 / per;
    let mask = if width == 64 {
        u64::MAX
    } else {
        (1 << width) - 1
    };
    let mut index = start;
    let mut written = 0;
    while written < out.len() {
        let mut h = hash(seed, index / per);
        let slot = index % per;
        if width < 64 {
            h >>= slot * width;
        }
        let take = ((per - slot) as usize).min(out.len() - written);
        for x in &mut out[written..written + take] {
            *x = chunk_value(h & mask);
            if width < 64 {
                h >>= width;
            }
        }
        written += take;
        index += take as u64;
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

/// The output format of a GEMM in each precision, shared by the GPU runner, the checker and
/// the proof's leaves. Bytes of one output element: FP32 for FP32 (and FP64 for FP64), FP16 / BF16 for those
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
    pub precision: Precision,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub seed_a: u64,
    pub seed_b: u64,
    pub a_layout: ALayout,
}

/// One output element recomputed in f64, with the sums that scale honest rounding error.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reference {
    pub value: f64,
    /// Σ|a·b|: scales accumulation error.
    pub abs_sum: f64,
    /// Σ(a·b)²: scales the random error of rounded inputs (TF32).
    pub square_sum: f64,
}

impl SeededGemm {
    /// Recomputes `D[row, col]` in f64 (O(k) element evaluations).
    pub fn reference(&self, row: u64, col: u64) -> Reference {
        let storage = Storage::of(self.precision);
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
        let (mut sum, mut abs_sum, mut square_sum) = (0.0, 0.0, 0.0);
        for (x, y) in a.iter().zip(&b) {
            let p = x * y;
            sum += p;
            abs_sum += p.abs();
            square_sum += p * p;
        }
        Reference {
            value: sum,
            abs_sum,
            square_sum,
        }
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
    fn e4m3_decoding() {
        assert_eq!(e4m3_to_f64(0x38), 1.0); // 0.0111.000
        assert_eq!(e4m3_to_f64(0x7e), 448.0); // the largest finite value
        assert_eq!(e4m3_to_f64(0xb8), -1.0);
        assert_eq!(e4m3_to_f64(0x01), 2f64.powi(-9)); // smallest subnormal
        assert!(e4m3_to_f64(0x7f).is_nan());
    }

    proptest! {
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
        for s in Storage::ALL {
            let mut out = vec![0.0; 37];
            values_into(s, 5, 13, &mut out);
            for (i, v) in out.iter().enumerate() {
                assert_eq!(*v, value(s, 5, 13 + i as u64), "{s:?} element {i}");
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
