//! Exact dot products of seeded INT8, BF16 and FP16 rows in integer arithmetic: the
//! validator's fast path.
//!
//! Every value the generator makes in these formats is a small integer times a fixed power of
//! two: INT8 values are integers in ±127; a BF16 value is `(128 + mantissa) << e` times 2⁻⁹
//! and an FP16 value `(1024 + mantissa) << e` times 2⁻¹², with `e` ∈ {0, 1, 2} the chunk's
//! exponent choice (exponents −2…0, see [`crate::bits`]). Each such integer fits an i16 (at
//! most 127, 1020 and 8188), so a product of two is exact in i32, and Σa·b and Σ|a·b| are
//! exact in i64 and, being below 2⁵³ for any k this crate allows, exact in f64 too: the same
//! bits as the f64 path of [`crate::SeededGemm::reference`] (whose sums of these products are
//! also exact), in any order, on any CPU.
//!
//! The work is generation (one splitmix64 hash per 4 or 8 elements) and i16 multiply-adds,
//! both written over fixed-size arrays so the compiler vectorizes them; x86-64 CPUs with
//! AVX-512 (64-bit lane multiplies for the hash) or AVX2 get a copy compiled for them, chosen
//! at run time.

use crate::{hash, Storage};

/// Elements generated and multiplied per block. A block's products are summed per lane in
/// i32 before joining the i64 totals: 16 lanes × 2 products × (BLOCK / 32) steps, and FP16's
/// products reach 2²⁶, so 8 steps (2³⁰) stay below i32's range.
const BLOCK: usize = 256;

/// Σa·b and Σ|a·b| of `k` elements of two seeded matrices: the one with `seed_a` from element
/// `start_a` on, the one with `seed_b` from `start_b` on. `None` where this path does not
/// apply (another storage than INT8, BF16 or FP16, or a start or `k` that is not a whole
/// number of hashes); then use the f64 path.
pub fn exact_dot(
    storage: Storage,
    (seed_a, start_a): (u64, u64),
    (seed_b, start_b): (u64, u64),
    k: u64,
) -> Option<(f64, f64)> {
    let per = storage.per_hash();
    if !matches!(storage, Storage::I8 | Storage::Bf16 | Storage::F16)
        || !start_a.is_multiple_of(per)
        || !start_b.is_multiple_of(per)
        || !k.is_multiple_of(per)
    {
        return None;
    }
    let args = Args {
        storage,
        word_a: start_a / per,
        word_b: start_b / per,
        seed_a,
        seed_b,
        k: usize::try_from(k).ok()?,
    };
    let (sum, abs_sum) = dispatch(&args);
    // 2⁻¹⁸ (BF16: 2⁻⁹ per factor), 2⁻²⁴ (FP16: 2⁻¹² per factor), 1 (INT8).
    let scale = match storage {
        Storage::Bf16 => 2f64.powi(-18),
        Storage::F16 => 2f64.powi(-24),
        _ => 1.0,
    };
    Some((sum as f64 * scale, abs_sum as f64 * scale))
}

/// What one dot product needs, passed whole to the per-CPU copies.
struct Args {
    storage: Storage,
    word_a: u64,
    word_b: u64,
    seed_a: u64,
    seed_b: u64,
    k: usize,
}

/// Runs the copy compiled for the best instruction set this CPU has.
fn dispatch(args: &Args) -> (i64, i64) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512vl")
        {
            // SAFETY: the CPU has every feature the function is compiled for (checked above).
            return unsafe { dot_avx512(args) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: as above, for AVX2.
            return unsafe { dot_avx2(args) };
        }
    }
    dot_generic(args)
}

/// [`dot_generic`] compiled for AVX-512 (F, BW, DQ, VL).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,bmi2")]
fn dot_avx512(args: &Args) -> (i64, i64) {
    if args.k.is_multiple_of(8 * args.storage.per_hash() as usize) {
        if std::arch::is_x86_feature_detected!("avx512vnni") {
            // SAFETY: this function runs only where the CPU has AVX-512 F, BW and DQ, and it
            // has VNNI too (checked above).
            return unsafe { dot_avx512_whole_vnni(args) };
        }
        // SAFETY: this function runs only where the CPU has AVX-512 F, BW and DQ.
        return unsafe { dot_avx512_whole(args) };
    }
    match args.storage {
        Storage::I8 => dot_with::<8, INT8, true>(args),
        Storage::Bf16 => dot_with::<4, BF16, true>(args),
        _ => dot_with::<4, FP16, true>(args),
    }
}

/// [`dot_generic`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,bmi2")]
fn dot_avx2(args: &Args) -> (i64, i64) {
    dot_generic(args)
}

/// The portable dot product, inlined into each per-CPU copy.
#[inline(always)]
fn dot_generic(args: &Args) -> (i64, i64) {
    match args.storage {
        Storage::I8 => dot_with::<8, INT8, false>(args),
        Storage::Bf16 => dot_with::<4, BF16, false>(args),
        _ => dot_with::<4, FP16, false>(args),
    }
}

/// The formats [`chunk`] decodes, as const generic arguments (closures would not inherit the
/// per-CPU copies' target features).
const INT8: u8 = 0;
/// See [`INT8`].
const BF16: u8 = 1;
/// See [`INT8`].
const FP16: u8 = 2;

/// A chunk's value as an integer, in format `KIND`.
#[inline(always)]
fn chunk<const KIND: u8>(c: u64) -> i16 {
    match KIND {
        INT8 => int8_chunk(c),
        BF16 => float_chunk(c, 0x7f, 0x80),
        _ => float_chunk(c, 0x3ff, 0x400),
    }
}

/// INT8: a byte `c` of the hash is `c % 255 − 127`, which is `c − 127` as an i8 except for
/// c = 255, where the wrapped −128 is lifted to −127.
#[inline(always)]
fn int8_chunk(chunk: u64) -> i16 {
    i16::from(((chunk as u8).wrapping_sub(127) as i8).max(-127))
}

/// BF16 or FP16: a 16-bit chunk's value as the integer `±(implicit | mantissa) << e`, with
/// bit 0 the sign, bits 1–2 the exponent choice (3 wraps to 0) and the mantissa from bit 3.
#[inline(always)]
fn float_chunk(chunk: u64, mantissa: u16, implicit: u16) -> i16 {
    let c = chunk as u16;
    let sign = (c & 1) as i16;
    let e = (c >> 1) & 3;
    let e = e - 3 * ((e + 1) >> 2);
    let magnitude = (((c >> 3) & mantissa) | implicit) << e;
    (magnitude as i16 ^ -sign) + sign
}

/// `words` hashes' worth of a block (slot-major, see [`dot_with`]), zeros after them.
#[inline(always)]
fn fill<const PER: usize, const KIND: u8>(
    seed: u64,
    word: u64,
    words: usize,
    out: &mut [i16; BLOCK],
) {
    let width = 64 / PER as u32;
    let per_slot = BLOCK / PER;
    let mut hashes = [0u64; BLOCK];
    for (i, h) in hashes[..per_slot].iter_mut().enumerate() {
        *h = hash(seed, word + i as u64);
    }
    for (s, slot) in out.chunks_exact_mut(per_slot).enumerate() {
        for (x, h) in slot.iter_mut().zip(&hashes[..per_slot]) {
            *x = chunk::<KIND>(h >> (width * s as u32));
        }
        slot[words..].fill(0);
    }
}

/// The block loop: generate a block of each row, multiply-add it in i16 pairs into i32 lanes,
/// fold the lanes into i64 totals.
///
/// A block is laid out slot-major: element `PER·i + s` (chunk `s` of the block's hash `i`) sits
/// at `s·(BLOCK / PER) + i`, so every step is the same operation across consecutive hashes
/// (what vectorizes), and both rows use the same layout, so each product still pairs
/// element j of one row with element j of the other; the sum of exact products does not
/// depend on their order.
#[inline(always)]
fn dot_with<const PER: usize, const KIND: u8, const AVX512: bool>(args: &Args) -> (i64, i64) {
    let (mut sum, mut abs_sum) = ([0i64; 16], [0i64; 16]);
    let (mut a, mut b) = ([0i16; BLOCK], [0i16; BLOCK]);
    let mut done = 0;
    while done < args.k {
        let len = (args.k - done).min(BLOCK);
        let skip = (done / PER) as u64;
        fill::<PER, KIND>(args.seed_a, args.word_a + skip, len / PER, &mut a);
        fill::<PER, KIND>(args.seed_b, args.word_b + skip, len / PER, &mut b);
        #[cfg(target_arch = "x86_64")]
        if AVX512 {
            // SAFETY: `AVX512` is true only in `dot_avx512`, which runs only on a CPU with
            // AVX-512 F and BW (checked in `dispatch`).
            let (block, abs_block) = unsafe { block_avx512(&a, &b) };
            for l in 0..8 {
                sum[l] += block[l];
                abs_sum[l] += abs_block[l];
            }
            done += len;
            continue;
        }
        let (mut lanes, mut abs_lanes) = ([0i32; 16], [0i32; 16]);
        for (x, y) in a.chunks_exact(32).zip(b.chunks_exact(32)) {
            for l in 0..16 {
                let (x0, x1) = (i32::from(x[2 * l]), i32::from(x[2 * l + 1]));
                let (y0, y1) = (i32::from(y[2 * l]), i32::from(y[2 * l + 1]));
                lanes[l] += x0 * y0 + x1 * y1;
                abs_lanes[l] += x0.abs() * y0.abs() + x1.abs() * y1.abs();
            }
        }
        for l in 0..16 {
            sum[l] += i64::from(lanes[l]);
            abs_sum[l] += i64::from(abs_lanes[l]);
        }
        done += len;
    }
    (sum.iter().sum(), abs_sum.iter().sum())
}

/// A BF16/FP16 chunk's exponent choice by the low five bits of `chunk >> 1` (bits 1–2 of the
/// chunk; 3 wraps to 0), for `vpermw`.
const EXPONENT_CHOICE: [i16; 32] = {
    let mut table = [0i16; 32];
    let mut i = 0;
    while i < 32 {
        table[i] = [0, 1, 2, 0][i & 3];
        i += 1;
    }
    table
};

/// Defines the AVX-512 dot product for `k` a whole number of 8-hash steps: each step hashes 8
/// words of each row at once (`vpmullq`) and turns the 64 bytes into 64 INT8 or 32 BF16/FP16 integers
/// in their natural order, multiply-added into i32 lanes that are widened into i64 every 8
/// steps (FP16's pair sums reach 2²⁷: 8 of them stay below 2³¹). Σ|a·b| comes from the
/// magnitudes, and the sign of a·b goes on one factor: BF16/FP16 pairs go through `vpmaddwd`
/// (`vpdpwssd` with `VNNI`), INT8 through `vpmaddwd` on widened bytes, or `vpdpbusd` on |a| and
/// b carrying a's sign with `VNNI`.
///
/// The body is written once and compiled into each function with its own target features (the
/// intrinsics inline only into a function compiled for them: an `#[inline(always)]` generic
/// body left them as calls, ten times slower).
#[cfg(target_arch = "x86_64")]
macro_rules! whole_steps {
    ($(#[$doc:meta])* $name:ident, $features:literal, VNNI = $vnni:literal) => {
        $(#[$doc])*
        #[target_feature(enable = $features)]
        unsafe fn $name(args: &Args) -> (i64, i64) {
            const VNNI: bool = $vnni;
            use std::arch::x86_64::*;
            const GOLDEN: i64 = 0x9E37_79B9_7F4A_7C15_u64 as i64;
            // splitmix64 of the 8 states in `z`, as `crate::hash`.
            let mix = |z: __m512i| {
                let z = _mm512_xor_si512(z, _mm512_srli_epi64::<30>(z));
                let z = _mm512_mullo_epi64(z, _mm512_set1_epi64(0xBF58_476D_1CE4_E5B9_u64 as i64));
                let z = _mm512_xor_si512(z, _mm512_srli_epi64::<27>(z));
                let z = _mm512_mullo_epi64(z, _mm512_set1_epi64(0x94D0_49BB_1331_11EB_u64 as i64));
                _mm512_xor_si512(z, _mm512_srli_epi64::<31>(z))
            };
            // The states of words `word .. word + 8`: seed + (word + i + 1)·GOLDEN.
            let start = |seed: u64, word: u64| {
                let lanes = _mm512_set_epi64(8, 7, 6, 5, 4, 3, 2, 1);
                let first = _mm512_add_epi64(_mm512_set1_epi64(word as i64), lanes);
                _mm512_add_epi64(
                    _mm512_set1_epi64(seed as i64),
                    _mm512_mullo_epi64(first, _mm512_set1_epi64(GOLDEN)),
                )
            };
            let step = _mm512_set1_epi64(GOLDEN.wrapping_mul(8));
            let zero = _mm512_setzero_si512();
            // BF16/FP16 chunks' magnitudes, (implicit | mantissa) << e (see `float_chunk`); the sign
            // is bit 0.
            let (mantissa, implicit) = match args.storage {
                Storage::Bf16 => (0x7f, 0x80),
                _ => (0x3ff, 0x400),
            };
            // SAFETY: the table holds the 32 i16 one load reads.
            let exponents = unsafe { _mm512_loadu_si512(EXPONENT_CHOICE.as_ptr().cast()) };
            let magnitude = |c: __m512i| {
                let e = _mm512_permutexvar_epi16(_mm512_srli_epi16::<1>(c), exponents);
                // (chunk >> 3 & mantissa) | implicit in one ternary-logic op (A & B | C: 0xEA).
                let m = _mm512_ternarylogic_epi32::<0xEA>(
                    _mm512_srli_epi16::<3>(c),
                    _mm512_set1_epi16(mantissa),
                    _mm512_set1_epi16(implicit),
                );
                _mm512_sllv_epi16(m, e)
            };
            // An INT8 chunk byte `c` is max(c − 127, −127) as an i8 (see `int8_chunk`).
            let int8 = |c: __m512i| {
                _mm512_max_epi8(
                    _mm512_sub_epi8(c, _mm512_set1_epi8(127)),
                    _mm512_set1_epi8(-127),
                )
            };
            let widen_bytes = |v: __m512i| {
                (
                    _mm512_cvtepi8_epi16(_mm512_castsi512_si256(v)),
                    _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64::<1>(v)),
                )
            };
            // acc + the pairwise i16 products of x and y.
            let pairs = |acc: __m512i, x: __m512i, y: __m512i| {
                if VNNI {
                    _mm512_dpwssd_epi32(acc, x, y)
                } else {
                    _mm512_add_epi32(acc, _mm512_madd_epi16(x, y))
                }
            };
            let widen = |v: __m512i| {
                _mm512_add_epi64(
                    _mm512_cvtepi32_epi64(_mm512_castsi512_si256(v)),
                    _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64::<1>(v)),
                )
            };
            let (mut za, mut zb) = (
                start(args.seed_a, args.word_a),
                start(args.seed_b, args.word_b),
            );
            let (mut sum, mut abs_sum) = (zero, zero);
            let (mut acc, mut abs_acc) = (zero, zero);
            let steps = args.k / (8 * args.storage.per_hash() as usize);
            for i in 0..steps {
                let (ha, hb) = (mix(za), mix(zb));
                za = _mm512_add_epi64(za, step);
                zb = _mm512_add_epi64(zb, step);
                if args.storage == Storage::I8 {
                    let (a, b) = (int8(ha), int8(hb));
                    if VNNI {
                        // |a| as unsigned bytes times b with a's sign, four products a lane.
                        let a_abs = _mm512_abs_epi8(a);
                        let b_signed = _mm512_mask_sub_epi8(b, _mm512_movepi8_mask(a), zero, b);
                        acc = _mm512_dpbusd_epi32(acc, a_abs, b_signed);
                        abs_acc = _mm512_dpbusd_epi32(abs_acc, a_abs, _mm512_abs_epi8(b));
                    } else {
                        let ((a0, a1), (b0, b1)) = (widen_bytes(a), widen_bytes(b));
                        acc = pairs(pairs(acc, a0, b0), a1, b1);
                        let abs = _mm512_abs_epi16;
                        abs_acc = pairs(pairs(abs_acc, abs(a0), abs(b0)), abs(a1), abs(b1));
                    }
                } else {
                    let (ma, mb) = (magnitude(ha), magnitude(hb));
                    let negative = _mm512_test_epi16_mask(_mm512_xor_si512(ha, hb), _mm512_set1_epi16(1));
                    acc = pairs(acc, _mm512_mask_sub_epi16(ma, negative, zero, ma), mb);
                    abs_acc = pairs(abs_acc, ma, mb);
                }
                if i % 8 == 7 || i + 1 == steps {
                    sum = _mm512_add_epi64(sum, widen(acc));
                    abs_sum = _mm512_add_epi64(abs_sum, widen(abs_acc));
                    acc = zero;
                    abs_acc = zero;
                }
            }
            (
                _mm512_reduce_add_epi64(sum),
                _mm512_reduce_add_epi64(abs_sum),
            )
        }
    };
}

#[cfg(target_arch = "x86_64")]
whole_steps!(
    /// The whole-step dot product with AVX-512 VNNI's multiply-adds into the accumulators
    /// (Ice Lake, Sapphire Rapids, Zen 4 and later).
    dot_avx512_whole_vnni,
    "avx512f,avx512bw,avx512dq,avx512vnni",
    VNNI = true
);

#[cfg(target_arch = "x86_64")]
whole_steps!(
    /// The whole-step dot product with AVX-512 F, BW and DQ alone (Skylake-SP).
    dot_avx512_whole,
    "avx512f,avx512bw,avx512dq",
    VNNI = false
);

/// One block's Σa·b and Σ|a·b| in eight i64 lanes: `vpmaddwd` (32 i16 products summed in
/// pairs into 16 i32 lanes) over the block's 8 steps, then widened.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn block_avx512(a: &[i16; BLOCK], b: &[i16; BLOCK]) -> ([i64; 8], [i64; 8]) {
    use std::arch::x86_64::*;
    let (mut acc, mut abs_acc) = (_mm512_setzero_si512(), _mm512_setzero_si512());
    for j in (0..BLOCK).step_by(32) {
        // SAFETY: j + 32 ≤ BLOCK: each load reads 32 i16 inside the arrays.
        let (x, y) = unsafe {
            (
                _mm512_loadu_si512(a.as_ptr().add(j).cast()),
                _mm512_loadu_si512(b.as_ptr().add(j).cast()),
            )
        };
        acc = _mm512_add_epi32(acc, _mm512_madd_epi16(x, y));
        let (ax, ay) = (_mm512_abs_epi16(x), _mm512_abs_epi16(y));
        abs_acc = _mm512_add_epi32(abs_acc, _mm512_madd_epi16(ax, ay));
    }
    let widen = |v: __m512i| {
        let low = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(v));
        let high = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64::<1>(v));
        let mut out = [0i64; 8];
        // SAFETY: `out` holds exactly the 8 lanes stored.
        unsafe { _mm512_storeu_si512(out.as_mut_ptr().cast(), _mm512_add_epi64(low, high)) };
        out
    };
    (widen(acc), widen(abs_acc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value;
    use proptest::prelude::*;

    /// The f64 dot product, element by element.
    fn slow(storage: Storage, a: (u64, u64), b: (u64, u64), k: u64) -> (f64, f64) {
        let mut sum = 0.0;
        let mut abs_sum = 0.0;
        for i in 0..k {
            let p = value(storage, a.0, a.1 + i) * value(storage, b.0, b.1 + i);
            sum += p;
            abs_sum += p.abs();
        }
        (sum, abs_sum)
    }

    #[test]
    fn every_path_matches_the_f64_sum_at_the_largest_values() {
        for storage in [Storage::I8, Storage::Bf16, Storage::F16] {
            for k in [8, 256, 264, 1000, 4096] {
                let k = k / storage.per_hash() * storage.per_hash();
                let a = (3, 8 * 77);
                let b = (4, 8 * 5);
                let fast = exact_dot(storage, a, b, k).unwrap();
                assert_eq!(fast, slow(storage, a, b, k), "{storage:?} k = {k}");
                let args = Args {
                    storage,
                    word_a: a.1 / storage.per_hash(),
                    word_b: b.1 / storage.per_hash(),
                    seed_a: a.0,
                    seed_b: b.0,
                    k: k as usize,
                };
                assert_eq!(dispatch(&args), dot_generic(&args));
                assert_whole_steps_agree(&args);
            }
        }
        // Unaligned starts and other formats are left to the f64 path.
        assert_eq!(exact_dot(Storage::I8, (1, 3), (2, 0), 8), None);
        assert_eq!(exact_dot(Storage::F32, (1, 0), (2, 0), 8), None);
        assert_eq!(exact_dot(Storage::Bf16, (1, 0), (2, 0), 6), None);
    }

    /// Both AVX-512 copies of the whole-step path, where this CPU runs them and `k` is whole
    /// steps, give the portable path's sums (`dispatch` runs only the best one there is).
    fn assert_whole_steps_agree(args: &Args) {
        #[cfg(target_arch = "x86_64")]
        if args.k.is_multiple_of(8 * args.storage.per_hash() as usize)
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512dq")
        {
            // SAFETY: the CPU has the features each copy is compiled for (checked here).
            assert_eq!(unsafe { dot_avx512_whole(args) }, dot_generic(args));
            if std::arch::is_x86_feature_detected!("avx512vnni") {
                // SAFETY: as above, and VNNI.
                assert_eq!(unsafe { dot_avx512_whole_vnni(args) }, dot_generic(args));
            }
        }
    }

    proptest! {
        #[test]
        fn exact_sums_match_the_f64_path(
            seed_a: u64, seed_b: u64, wa in 0u64..1 << 30, wb in 0u64..1 << 30, words in 0u64..200,
        ) {
            for storage in [Storage::I8, Storage::Bf16, Storage::F16] {
                let per = storage.per_hash();
                let (a, b) = ((seed_a, wa * per), (seed_b, wb * per));
                let fast = exact_dot(storage, a, b, words * per).unwrap();
                prop_assert_eq!(fast, slow(storage, a, b, words * per));
                assert_whole_steps_agree(&Args {
                    storage,
                    word_a: wa,
                    word_b: wb,
                    seed_a,
                    seed_b,
                    k: (words * per) as usize,
                });
            }
        }
    }
}
