// The proof of memory on the GPU: building the data set and walking it. Bit for bit what
// `pog_proof::memory::arx` computes on the CPU (the reference these must match): ChaCha blocks
// with a chosen number of double rounds, items of two blocks, walkers of 8 lanes reading
// 128-byte items at data-dependent indices and folding them with FNV-1.

#define POG_MEM_DOMAIN_ITEM 0x6d656d31u
#define POG_MEM_DOMAIN_WALK 0x77616c6bu
#define POG_MEM_WALK_START_ROUNDS 2
#define POG_FNV_PRIME 0x01000193u
#define POG_FNV_OFFSET 0x811c9dc5u

__device__ __forceinline__ u32 pog_rotl(u32 x, int n) { return __funnelshift_l(x, x, n); }

#define POG_QR(a, b, c, d)                      \
    a += b; d ^= a; d = pog_rotl(d, 16);        \
    c += d; b ^= c; b = pog_rotl(b, 12);        \
    a += b; d ^= a; d = pog_rotl(d, 8);         \
    c += d; b ^= c; b = pog_rotl(b, 7);

struct PogKey { u32 w[8]; };

// One ChaCha block in a single thread: the 16 output words (state after the rounds plus the
// input state), tail = the words RFC 8439 gives the counter and nonce.
__device__ __forceinline__ void pog_chacha_block(const PogKey& k, u32 t0, u32 t1, u32 t2, u32 t3,
                                                 u32 rounds, u32 out[16]) {
    u32 x0 = 0x61707865u, x1 = 0x3320646eu, x2 = 0x79622d32u, x3 = 0x6b206574u;
    u32 x4 = k.w[0], x5 = k.w[1], x6 = k.w[2], x7 = k.w[3];
    u32 x8 = k.w[4], x9 = k.w[5], x10 = k.w[6], x11 = k.w[7];
    u32 x12 = t0, x13 = t1, x14 = t2, x15 = t3;
    for (u32 r = 0; r < rounds; r++) {
        POG_QR(x0, x4, x8, x12) POG_QR(x1, x5, x9, x13) POG_QR(x2, x6, x10, x14) POG_QR(x3, x7, x11, x15)
        POG_QR(x0, x5, x10, x15) POG_QR(x1, x6, x11, x12) POG_QR(x2, x7, x8, x13) POG_QR(x3, x4, x9, x14)
    }
    out[0] = x0 + 0x61707865u; out[1] = x1 + 0x3320646eu; out[2] = x2 + 0x79622d32u; out[3] = x3 + 0x6b206574u;
    out[4] = x4 + k.w[0]; out[5] = x5 + k.w[1]; out[6] = x6 + k.w[2]; out[7] = x7 + k.w[3];
    out[8] = x8 + k.w[4]; out[9] = x9 + k.w[5]; out[10] = x10 + k.w[6]; out[11] = x11 + k.w[7];
    out[12] = x12 + t0; out[13] = x13 + t1; out[14] = x14 + t2; out[15] = x15 + t3;
}

// Builds items [first, first + count) into `data` (item i at data + 32 (i - first) words): one
// thread per 64-byte half, so every thread does the same work and nothing is computed twice.
extern "C" __global__ void pog_mem_build(uint4* data, u64 first, u64 count, PogKey key, u32 rounds) {
    const u64 halves = count * 2;
    for (u64 h = (u64)blockIdx.x * blockDim.x + threadIdx.x; h < halves;
         h += (u64)gridDim.x * blockDim.x) {
        const u64 item = first + (h >> 1);
        u32 b[16];
        pog_chacha_block(key, (u32)item, (u32)(item >> 32), POG_MEM_DOMAIN_ITEM, (u32)(h & 1), rounds, b);
        uint4* out = data + h * 4;
        out[0] = make_uint4(b[0], b[1], b[2], b[3]);
        out[1] = make_uint4(b[4], b[5], b[6], b[7]);
        out[2] = make_uint4(b[8], b[9], b[10], b[11]);
        out[3] = make_uint4(b[12], b[13], b[14], b[15]);
    }
}

// A ChaCha block computed by four lanes together (the lanes `base`..`base`+3 of a group of 8,
// each holding one column: words j, 4+j, 8+j, 12+j), then handed out row-wise: lane j gets
// words 4j..4j+3. This is how a prover without the data set recomputes an item at the least
// cost (no lane repeats another's work), so the capacity cheats measured are the best ones.
__device__ __forceinline__ uint4 pog_chacha_block_shared(const PogKey& k, u32 t0, u32 t1, u32 t2,
                                                         u32 t3, u32 rounds, u32 j, u32 mask) {
    const u32 sigma[4] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u};
    const u32 tail[4] = {t0, t1, t2, t3};
    const u32 i0 = sigma[j], i1 = k.w[j], i2 = k.w[4 + j], i3 = tail[j];
    u32 a = i0, b = i1, c = i2, d = i3;
    const int width = 4;
    for (u32 r = 0; r < rounds; r++) {
        POG_QR(a, b, c, d)  // column round: each lane its own column
        // diagonal round: lane j takes row 1 from column j+1, row 2 from j+2, row 3 from j+3
        b = __shfl_sync(mask, b, (j + 1) & 3, width);
        c = __shfl_sync(mask, c, (j + 2) & 3, width);
        d = __shfl_sync(mask, d, (j + 3) & 3, width);
        POG_QR(a, b, c, d)
        b = __shfl_sync(mask, b, (j + 3) & 3, width);
        c = __shfl_sync(mask, c, (j + 2) & 3, width);
        d = __shfl_sync(mask, d, (j + 1) & 3, width);
    }
    a += i0; b += i1; c += i2; d += i3;
    // Transpose: lane j wants row j (words 4j..4j+3) = column q's entry of row j, for q = 0..3.
    const u32 col[4] = {a, b, c, d};
    u32 row[4];
#pragma unroll
    for (int q = 0; q < 4; q++) {
        // Lane q holds column q; lane j asks it for its row j entry: each lane sends the entry
        // of the row its reader wants (row = reader's j), so read col[(reader)] from lane q.
        u32 v0 = __shfl_sync(mask, col[0], q, width);
        u32 v1 = __shfl_sync(mask, col[1], q, width);
        u32 v2 = __shfl_sync(mask, col[2], q, width);
        u32 v3 = __shfl_sync(mask, col[3], q, width);
        row[q] = j == 0 ? v0 : j == 1 ? v1 : j == 2 ? v2 : v3;
    }
    return make_uint4(row[0], row[1], row[2], row[3]);
}

// The 16 bytes of item `index` a lane holds: from `data` if resident, else (the test doubles'
// cheats only) from `spill` in host memory (mode 2) or recomputed (mode 1).
__device__ __forceinline__ uint4 pog_mem_load(const uint4* data, u64 resident, const uint4* spill,
                                              u32 mode, const PogKey& item_key, u32 item_rounds,
                                              u64 index, u32 lane, u32 group) {
    if (index < resident) return data[index * 8 + lane];
    if (mode == 2) return spill[(index - resident) * 8 + lane];
    return pog_chacha_block_shared(item_key, (u32)index, (u32)(index >> 32), POG_MEM_DOMAIN_ITEM,
                                   lane >> 2, item_rounds, lane & 3,
                                   0xfu << (group * 8 + (lane & 4)));
}

// Walks `walkers` walkers of `steps` steps over `items` items, 8 lanes a walker (lane l holds
// mix words 4l..4l+3 and loads the same 16 bytes of each item, so a walker's read of an item
// is one coalesced 128-byte line). Each step reads `span` consecutive items of a block chosen
// from the mix, 8 loads in flight at a time, and folds them in order. Each walker's 16-byte
// output goes to `out`.
//
// Items below `resident` are read from `data`. The rest exist only for the test doubles that
// prove the cheats fail: mode 1 recomputes them (a card that kept only part of the data set),
// mode 2 reads them from `spill` (host memory mapped over PCIe). An honest walk has
// resident == items and never takes either branch.
extern "C" __global__ void __launch_bounds__(256) pog_mem_walk(
    const uint4* data, u64 items, u64 resident, const uint4* spill, u32 mode, PogKey item_key,
    u32 item_rounds, PogKey walk_key, u64 walkers, u32 steps, u32 span, uint4* out) {
    const u32 lane = threadIdx.x & 7;
    const u32 group = (threadIdx.x & 31) >> 3;
    const u32 mask = 0xffu << (group * 8);
    const u64 blocks = items / span;
    const u64 stride = ((u64)gridDim.x * blockDim.x) >> 3;
    for (u64 w = ((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 3; w < walkers; w += stride) {
        u32 start[16];
        pog_chacha_block(walk_key, (u32)w, (u32)(w >> 32), POG_MEM_DOMAIN_WALK, lane >> 2,
                         POG_MEM_WALK_START_ROUNDS, start);
        const u32 q = (lane & 3) * 4;
        uint4 m = make_uint4(start[q], start[q + 1], start[q + 2], start[q + 3]);
        for (u32 s = 0; s < steps; s++) {
            const u32 a = __shfl_sync(mask, m.x, s & 7, 8) ^ s;
            const u32 b = __shfl_sync(mask, m.y, (s + 3) & 7, 8);
            const u64 base = __umul64hi(((u64)a << 32) | b, blocks) * span;
            for (u32 j = 0; j < span; j += 8) {
                uint4 v[8];
#pragma unroll
                for (u32 k = 0; k < 8; k++) {
                    if (j + k < span) {
                        v[k] = pog_mem_load(data, resident, spill, mode, item_key, item_rounds,
                                            base + j + k, lane, group);
                    }
                }
#pragma unroll
                for (u32 k = 0; k < 8; k++) {
                    if (j + k < span) {
                        m.x = m.x * POG_FNV_PRIME ^ v[k].x;
                        m.y = m.y * POG_FNV_PRIME ^ v[k].y;
                        m.z = m.z * POG_FNV_PRIME ^ v[k].z;
                        m.w = m.w * POG_FNV_PRIME ^ v[k].w;
                    }
                }
            }
        }
        u32 h0 = POG_FNV_OFFSET, h1 = POG_FNV_OFFSET, h2 = POG_FNV_OFFSET, h3 = POG_FNV_OFFSET;
#pragma unroll
        for (int l = 0; l < 8; l++) {
            h0 = h0 * POG_FNV_PRIME ^ __shfl_sync(mask, m.x, l, 8);
            h1 = h1 * POG_FNV_PRIME ^ __shfl_sync(mask, m.y, l, 8);
            h2 = h2 * POG_FNV_PRIME ^ __shfl_sync(mask, m.z, l, 8);
            h3 = h3 * POG_FNV_PRIME ^ __shfl_sync(mask, m.w, l, 8);
        }
        if (lane == 0) out[w] = make_uint4(h0, h1, h2, h3);
    }
}
