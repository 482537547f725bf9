// pog's own CUDA kernels (compiled by NVRTC for the device's architecture together with
// pog_matgen's fill kernels): memory patterns, bandwidth probes and result comparison.

typedef unsigned long long u64;

// ---- Memory integrity -------------------------------------------------------------------
// pattern: 0 walking ones, 1 walking zeros, 2 0x55.., 3 0xAA.., 4 seeded random,
// 5 address in address.
__device__ __forceinline__ u64 pog_pattern(int pattern, u64 seed, u64 index, const u64* base) {
    switch (pattern) {
    case 0: return 1ULL << (index & 63);
    case 1: return ~(1ULL << (index & 63));
    case 2: return 0x5555555555555555ULL;
    case 3: return 0xAAAAAAAAAAAAAAAAULL;
    case 4: {
        u64 z = seed + (index + 1ULL) * 0x9E3779B97F4A7C15ULL;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
    }
    default: return (u64)(base + index);
    }
}

extern "C" __global__ void pog_pattern_write(u64* p, u64 n, int pattern, u64 seed) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        p[i] = pog_pattern(pattern, seed, i, p);
    }
}

// counters[0]: words that differ; counters[1]: bits that differ; counters[2]: first bad index.
extern "C" __global__ void pog_pattern_check(const u64* p, u64 n, int pattern, u64 seed, u64* counters) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    u64 words = 0, bits = 0, first = ~0ULL;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        u64 diff = p[i] ^ pog_pattern(pattern, seed, i, p);
        if (diff) {
            words++;
            bits += __popcll(diff);
            if (i < first) first = i;
        }
    }
    if (words) {
        atomicAdd(&counters[0], words);
        atomicAdd(&counters[1], bits);
        atomicMin(&counters[2], first);
    }
}

// ---- Bandwidth probes ---------------------------------------------------------------------
// 16-byte accesses, four in flight per thread, `passes` sweeps over the buffer per launch (so
// small, L2-resident buffers are not launch-bound). Loads use ld.global.cg (cached in L2, not
// L1) so that L2 is what a small buffer measures.
extern "C" __global__ void pog_read(const uint4* p, u64 n, u64 passes, u64* sink) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    unsigned int acc = 0;
    for (u64 pass = 0; pass < passes; pass++) {
        u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
        for (; i + 3 * stride < n; i += 4 * stride) {
            uint4 a = __ldcg(p + i), b = __ldcg(p + i + stride), c = __ldcg(p + i + 2 * stride), d = __ldcg(p + i + 3 * stride);
            acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
        }
        for (; i < n; i += stride) {
            uint4 a = __ldcg(p + i);
            acc ^= a.x ^ a.y ^ a.z ^ a.w;
        }
    }
    // Never true for pog's buffers in practice; keeps the loads from being optimized away.
    if (acc == 0x9E3779B9u) sink[0] = acc;
}

extern "C" __global__ void pog_write(uint4* p, u64 n, u64 passes, unsigned int value) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 pass = 0; pass < passes; pass++) {
        uint4 v = make_uint4(value, value ^ (unsigned int)pass, value, value);
        for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
            __stcg(p + i, v);
        }
    }
}

// ---- Result comparison (gpu-burn style) ---------------------------------------------------
// Compares n elements of `width` bytes (2, 4 or 8) of a against b bit for bit and counts NaNs
// in a. kind: 0 integer (no NaN), 1 IEEE float of that width, 2 bfloat16.
// counters[0]: elements that differ; counters[1]: NaNs.
__device__ __forceinline__ bool pog_is_nan(u64 v, int width, int kind) {
    if (kind == 0) return false;
    if (width == 8) return ((v >> 52) & 0x7ff) == 0x7ff && (v & ((1ULL << 52) - 1));
    if (width == 4) return ((v >> 23) & 0xff) == 0xff && (v & 0x7fffff);
    if (kind == 2) return ((v >> 7) & 0xff) == 0xff && (v & 0x7f);
    return ((v >> 10) & 0x1f) == 0x1f && (v & 0x3ff);
}

extern "C" __global__ void pog_compare(const unsigned char* a, const unsigned char* b, u64 n, int width, int kind, u64* counters) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    u64 differ = 0, nans = 0;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        u64 x = 0, y = 0;
        if (width == 8) { x = ((const u64*)a)[i]; y = ((const u64*)b)[i]; }
        else if (width == 4) { x = ((const unsigned int*)a)[i]; y = ((const unsigned int*)b)[i]; }
        else { x = ((const unsigned short*)a)[i]; y = ((const unsigned short*)b)[i]; }
        if (x != y) differ++;
        if (pog_is_nan(x, width, kind)) nans++;
    }
    if (differ) atomicAdd(&counters[0], differ);
    if (nans) atomicAdd(&counters[1], nans);
}

// ---- Copy timing (as nvbandwidth does it) -------------------------------------------------
// Holds the stream until the host sets *flag (in mapped pinned memory), so that the copies
// queued behind it start back to back, without the host's enqueue latency inside the timing.
// Gives up after timeout_cycles so a lost flag can never hang the GPU.
extern "C" __global__ void pog_wait(volatile int* flag, long long timeout_cycles) {
    long long start = clock64();
    while (*flag == 0) {
        if (clock64() - start > timeout_cycles) break;
    }
}

// ---- Latency ------------------------------------------------------------------------------
// One thread follows `steps` links of the chain in p (p[i] is the index of the next link),
// each load waiting for the one before: the time per step is the memory's latency. Loads go
// through L2 only (cg), so on a peer's memory each one crosses the link.
extern "C" __global__ void pog_chase(const u64* p, u64 steps, u64* out) {
    u64 i = 0;
    for (u64 s = 0; s < steps; s++) i = __ldcg(p + i);
    out[0] = i;
}
