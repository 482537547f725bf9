// The CUDA twin of pog_matgen::bits (lib.rs): fills a matrix with seeded elements.
// Keep the two in step: the GPU GEMM check recomputes elements on the CPU with the Rust one.
//
// The format (0 f64, 1 f32, 2 f16, 3 bf16, 4 e4m3, 5 i8) is a template parameter inside, so the
// packed fill compiles to straight-line code per format, and each chunk narrower than 64 bits
// becomes its element in 32-bit arithmetic (a GPU has no 64-bit integer ALU: u64 multiplies,
// shifts and divisions cost several instructions each); the hash and the chunk extraction stay
// 64-bit.

typedef unsigned long long u64;

__device__ __forceinline__ u64 pog_hash(u64 seed, u64 index) {
    u64 z = seed + (index + 1ULL) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// Elements per hash, by format (1, 2, 4, 4, 8, 8). Each takes a chunk of 64/per bits, which is
// also its storage width: a hash makes 8 bytes.
__host__ __device__ constexpr int pog_per_hash(int format) {
    return format == 0 ? 1 : format == 1 ? 2 : format <= 3 ? 4 : 8;
}

// The element (its storage bits) that a chunk of hash bits becomes: bit 0 the sign, bits 1-2
// the exponent choice (3 wraps to 0, as `% 3` in lib.rs), the bits from 3 up the mantissa;
// INT8 takes the byte modulo 255, minus 127.
template <int F> __device__ __forceinline__ u64 pog_element(u64 chunk) {
    if (F == 0) {
        const u64 e = ((chunk >> 1) & 3ULL) == 3ULL ? 0ULL : (chunk >> 1) & 3ULL;
        return (chunk & 1ULL) << 63 | (1021ULL + e) << 52 | ((chunk >> 3) & ((1ULL << 52) - 1ULL));
    }
    const unsigned c = (unsigned)chunk;  // formats 1-5 have chunks of at most 32 bits
    const unsigned s = c & 1u, e0 = (c >> 1) & 3u, e = e0 == 3u ? 0u : e0, m = c >> 3;
    if (F == 1) return s << 31 | (125u + e) << 23 | (m & 0x7fffffu);
    if (F == 2) return s << 15 | (13u + e) << 10 | (m & 0x3ffu);
    if (F == 3) return s << 15 | (125u + e) << 7 | (m & 0x7fu);
    if (F == 4) return s << 7 | (5u + e) << 3 | (m & 0x7u);
    return (unsigned char)(signed char)((int)(c == 255u ? 0u : c) - 127);  // c < 256
}

// Element `index` alone.
template <int F> __device__ __forceinline__ u64 pog_bits(u64 seed, u64 index) {
    constexpr u64 per = pog_per_hash(F), width = 64ULL / per;
    const u64 h = pog_hash(seed, index / per);
    return pog_element<F>(width == 64ULL ? h : (h >> ((index % per) * width)) & ((1ULL << (width % 64ULL)) - 1ULL));
}

// All the elements of one hash, packed into 8 bytes (little-endian, element 0 lowest).
template <int F> __device__ __forceinline__ u64 pog_packed(u64 h) {
    constexpr int per = pog_per_hash(F), width = 64 / per;
    if (per == 1) return pog_element<F>(h);
    const u64 mask = (1ULL << (width % 64)) - 1ULL;
    u64 packed = 0;
#pragma unroll
    for (int j = 0; j < per; j++) {
        packed |= pog_element<F>((h >> (j * width)) & mask) << (j * width);
    }
    return packed;
}

// The fast fill: one thread per hash, its elements in one 8-byte store. Fills the first
// `words` * per elements.
template <int F> __device__ __forceinline__ void pog_fill_words_as(u64* out, u64 words, u64 seed) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 w = (u64)blockIdx.x * blockDim.x + threadIdx.x; w < words; w += stride) {
        out[w] = pog_packed<F>(pog_hash(seed, w));
    }
}

// Elements first .. n one at a time (the tail the packed fill leaves when n is not a multiple
// of the elements per hash).
template <int F, typename T> __device__ __forceinline__ void pog_fill_each(T* out, u64 first, u64 n, u64 seed) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = first + (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = (T)pog_bits<F>(seed, i);
    }
}

// Calls BODY with the format as a compile-time constant `FMT`.
#define POG_BY_FORMAT(format, BODY)              \
    switch (format) {                            \
    case 0: { constexpr int FMT = 0; BODY; } break; \
    case 1: { constexpr int FMT = 1; BODY; } break; \
    case 2: { constexpr int FMT = 2; BODY; } break; \
    case 3: { constexpr int FMT = 3; BODY; } break; \
    case 4: { constexpr int FMT = 4; BODY; } break; \
    default: { constexpr int FMT = 5; BODY; } break; \
    }

extern "C" __global__ void pog_fill_words(u64* out, u64 words, u64 seed, int format) {
    POG_BY_FORMAT(format, pog_fill_words_as<FMT>(out, words, seed))
}

#define POG_FILL(NAME, T)                                                              \
    extern "C" __global__ void NAME(T* out, u64 first, u64 n, u64 seed, int format) {  \
        POG_BY_FORMAT(format, (pog_fill_each<FMT, T>(out, first, n, seed)))            \
    }

POG_FILL(pog_fill_u64, unsigned long long)
POG_FILL(pog_fill_u32, unsigned int)
POG_FILL(pog_fill_u16, unsigned short)
POG_FILL(pog_fill_u8, unsigned char)
