// The CUDA twin of pog_matgen::bits (lib.rs): fills a matrix with seeded elements.
// Keep the two in step: the GPU GEMM check recomputes elements on the CPU with the Rust one.

typedef unsigned long long u64;

__device__ __forceinline__ u64 pog_hash(u64 seed, u64 index) {
    u64 z = seed + (index + 1ULL) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// Elements per hash, by format: 0 f64, 1 f32, 2 f16, 3 bf16, 4 e4m3, 5 i8 (1, 2, 4, 4, 8, 8).
// Each takes a chunk of 64/per bits, which is also its storage width: a hash makes 8 bytes.
__device__ __forceinline__ int pog_per_hash(int format) {
    return format == 0 ? 1 : format == 1 ? 2 : format <= 3 ? 4 : 8;
}

// The element (its storage bits) that a chunk of hash bits becomes.
__device__ __forceinline__ u64 pog_element(int format, u64 c) {
    u64 sign = c & 1ULL;
    u64 e = ((c >> 1) & 3ULL) % 3ULL;
    u64 man = c >> 3;
    switch (format) {
    case 0: return sign << 63 | (1021ULL + e) << 52 | (man & ((1ULL << 52) - 1ULL));
    case 1: return sign << 31 | (125ULL + e) << 23 | (man & 0x7fffffULL);
    case 2: return sign << 15 | (13ULL + e) << 10 | (man & 0x3ffULL);
    case 3: return sign << 15 | (125ULL + e) << 7 | (man & 0x7fULL);
    case 4: return sign << 7 | (5ULL + e) << 3 | (man & 0x7ULL);
    default: return (u64)(unsigned char)(signed char)((int)(c % 255ULL) - 127);
    }
}

// Element `index` alone.
__device__ __forceinline__ u64 pog_bits(int format, u64 seed, u64 index) {
    const u64 per = pog_per_hash(format);
    const u64 width = 64ULL / per;
    u64 h = pog_hash(seed, index / per);
    u64 c = width == 64ULL ? h : (h >> ((index % per) * width)) & ((1ULL << width) - 1ULL);
    return pog_element(format, c);
}

// The fast fill: one thread per hash, its elements packed into one 8-byte store (little-endian,
// element 0 lowest). Fills the first `words` * per elements.
extern "C" __global__ void pog_fill_words(u64* out, u64 words, u64 seed, int format) {
    const int per = pog_per_hash(format);
    const int width = 64 / per;
    const u64 mask = width == 64 ? ~0ULL : (1ULL << width) - 1ULL;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 w = (u64)blockIdx.x * blockDim.x + threadIdx.x; w < words; w += stride) {
        const u64 h = pog_hash(seed, w);
        u64 packed = 0;
        for (int j = 0; j < per; j++) {
            packed |= (pog_element(format, (h >> (j * width)) & mask) & mask) << (j * width);
        }
        out[w] = packed;
    }
}

// Elements first .. n one at a time (the tail the packed fill leaves when n is not a multiple
// of the elements per hash).
#define POG_FILL(NAME, T)                                                               \
    extern "C" __global__ void NAME(T* out, u64 first, u64 n, u64 seed, int format) {   \
        u64 stride = (u64)gridDim.x * blockDim.x;                                        \
        for (u64 i = first + (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n;          \
             i += stride) {                                                              \
            out[i] = (T)pog_bits(format, seed, i);                                       \
        }                                                                                \
    }

POG_FILL(pog_fill_u64, unsigned long long)
POG_FILL(pog_fill_u32, unsigned int)
POG_FILL(pog_fill_u16, unsigned short)
POG_FILL(pog_fill_u8, unsigned char)
