// The proofs' commitment hashes on the GPU, as `pog_merkle::commitment` defines them: BLAKE3's
// compression function (the BLAKE3 specification, §2.2) in key-derivation mode, a leaf hashed
// as a BLAKE3 chunk at counter 0 (its 64-byte blocks in turn, the first flagged CHUNK_START,
// the last CHUNK_END with its true length, zero-filled), a node as a BLAKE3 parent of
// left || right, in a tree of RFC 6962's shape. The starting chaining value (the key that
// pog_merkle's context derives) comes from Rust (the host prepends POG_COMMIT_KEY_WORDS,
// `gpu::commitment_prelude`); pog_merkle is the reference these must match bit for bit.
//
// A hash is kept as its eight chaining-value words; its bytes are those words little-endian,
// so a hash in device memory already has the bytes of pog_merkle's.

typedef unsigned int u32;
typedef unsigned long long u64;

__constant__ u32 POG_B3_IV[4] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a};
__constant__ u32 POG_COMMIT_KEY[8] = {POG_COMMIT_KEY_WORDS};

#define POG_B3_CHUNK_START 1u
#define POG_B3_CHUNK_END 2u
#define POG_B3_PARENT 4u
#define POG_B3_DERIVE_KEY_MATERIAL 64u

__device__ __forceinline__ u32 pog_rotr(u32 x, int n) { return __funnelshift_r(x, x, n); }

// BLAKE3's quarter-round on state words a, b, c, d with message words x, y.
#define POG_B3_G(a, b, c, d, x, y)                  \
    do {                                           \
        v[a] = v[a] + v[b] + (x);                  \
        v[d] = pog_rotr(v[d] ^ v[a], 16);          \
        v[c] = v[c] + v[d];                        \
        v[b] = pog_rotr(v[b] ^ v[c], 12);          \
        v[a] = v[a] + v[b] + (y);                  \
        v[d] = pog_rotr(v[d] ^ v[a], 8);           \
        v[c] = v[c] + v[d];                        \
        v[b] = pog_rotr(v[b] ^ v[c], 7);           \
    } while (0)

// One compression of the 16 little-endian message words m into the chaining value cv, at
// counter 0 (every commitment hash is), with this block length and these flags.
__device__ __forceinline__ void pog_b3_compress(u32 cv[8], const u32 m[16], u32 block_len,
                                                u32 flags) {
    u32 v[16] = {cv[0], cv[1], cv[2], cv[3], cv[4], cv[5], cv[6], cv[7],
                 POG_B3_IV[0], POG_B3_IV[1], POG_B3_IV[2], POG_B3_IV[3], 0, 0, block_len, flags};
    u32 w[16];
#pragma unroll
    for (int t = 0; t < 16; t++) w[t] = m[t];
#pragma unroll
    for (int r = 0; r < 7; r++) {
        POG_B3_G(0, 4, 8, 12, w[0], w[1]);
        POG_B3_G(1, 5, 9, 13, w[2], w[3]);
        POG_B3_G(2, 6, 10, 14, w[4], w[5]);
        POG_B3_G(3, 7, 11, 15, w[6], w[7]);
        POG_B3_G(0, 5, 10, 15, w[8], w[9]);
        POG_B3_G(1, 6, 11, 12, w[10], w[11]);
        POG_B3_G(2, 7, 8, 13, w[12], w[13]);
        POG_B3_G(3, 4, 9, 14, w[14], w[15]);
        // BLAKE3's message permutation between rounds (register renames once unrolled).
        u32 p[16] = {w[2], w[6], w[3], w[10], w[7], w[0], w[4], w[13],
                     w[1], w[11], w[12], w[5], w[9], w[14], w[15], w[8]};
#pragma unroll
        for (int t = 0; t < 16; t++) w[t] = p[t];
    }
#pragma unroll
    for (int k = 0; k < 8; k++) cv[k] = v[k] ^ v[k + 8];
}

// The flags of block b of a leaf of `blocks` blocks.
__device__ __forceinline__ u32 pog_leaf_flags(u64 b, u64 blocks) {
    return POG_B3_DERIVE_KEY_MATERIAL | (b == 0 ? POG_B3_CHUNK_START : 0u) |
           (b + 1 == blocks ? POG_B3_CHUNK_END : 0u);
}

__device__ __forceinline__ void pog_start(u32 cv[8]) {
#pragma unroll
    for (int k = 0; k < 8; k++) cv[k] = POG_COMMIT_KEY[k];
}

#define POG_HASH_WARPS 8  // warps per block of the fast leaf hash (256 threads)

// Leaf hashes of `leaves` whole leaves of `leaf_bytes` each (the committed bytes), laid end to
// end from `data`, with each committed 32-bit word read from WIDTH source words: WIDTH 1 reads
// the leaves as they are; WIDTH 2 reads INT32 outputs and commits each one's low 16 bits
// (`pog_matgen::committed_bytes`), two to a word. Fast path: needs leaf_bytes % 64 == 0 (at
// most 1024) and data 16-byte aligned. Each lane of a warp hashes one leaf; the warp loads its
// 32 leaves' next blocks together (coalesced, through shared memory), so memory reads run at
// full width while each lane compresses its own.
template <int WIDTH>
__device__ __forceinline__ void pog_leaf_hash_of(const u32* data, u64 leaves, u32 leaf_bytes,
                                                 u32* out) {
    constexpr int BLOCK_WORDS = 16 * WIDTH;    // source words of one 64-byte committed block
    constexpr int ROW = BLOCK_WORDS + 1;       // + 1: pad so lanes hit distinct banks
    constexpr int PIECES = BLOCK_WORDS / 4;    // 16-byte loads per leaf and block
    __shared__ u32 stage[POG_HASH_WARPS][32 * ROW];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    u32* mine = stage[warp];
    const u64 words = (u64)leaf_bytes / 4 * WIDTH, blocks = leaf_bytes / 64;
    const u64 step = (u64)gridDim.x * POG_HASH_WARPS * 32;
    for (u64 first = ((u64)blockIdx.x * POG_HASH_WARPS + warp) * 32; first < leaves; first += step) {
        u32 cv[8];
        pog_start(cv);
        for (u64 j = 0; j < blocks; j++) {
#pragma unroll
            for (int part = 0; part < PIECES; part++) {
                int q = part * 32 + lane, l = q / PIECES, piece = q % PIECES;
                uint4 v = make_uint4(0, 0, 0, 0);
                if (first + l < leaves)
                    v = *(const uint4*)(data + (first + l) * words + j * BLOCK_WORDS + piece * 4);
                u32* dst = mine + l * ROW + piece * 4;
                dst[0] = v.x; dst[1] = v.y; dst[2] = v.z; dst[3] = v.w;
            }
            __syncwarp();
            u32 m[16];
            const u32* block = mine + lane * ROW;
#pragma unroll
            for (int t = 0; t < 16; t++)
                m[t] = WIDTH == 1 ? block[t] : (block[2 * t] & 0xffffu) | (block[2 * t + 1] << 16);
            __syncwarp();
            pog_b3_compress(cv, m, 64, pog_leaf_flags(j, blocks));
        }
        u64 leaf = first + lane;
        if (leaf < leaves) {
#pragma unroll
            for (int k = 0; k < 8; k++) out[leaf * 8 + k] = cv[k];
        }
    }
}

// Whole leaves hashed as they are (pog_leaf_hash_of with WIDTH 1).
extern "C" __global__ void __launch_bounds__(256) pog_leaf_hash(const u32* data, u64 leaves,
                                                                u32 leaf_bytes, u32* out) {
    pog_leaf_hash_of<1>(data, leaves, leaf_bytes, out);
}

// Whole leaves of INT32 outputs committed by their low 16 bits (pog_leaf_hash_of, WIDTH 2);
// `leaf_bytes` counts the committed bytes, half those read.
extern "C" __global__ void __launch_bounds__(256) pog_leaf_hash_low16(const u32* data, u64 leaves,
                                                                      u32 leaf_bytes, u32* out) {
    pog_leaf_hash_of<2>(data, leaves, leaf_bytes, out);
}

// Leaf hashes for any leaf length: thread per leaf, byte by byte. Hashes leaves first ..
// first + count of a product output of total_bytes committed bytes cut into leaves of
// leaf_bytes (the last one may be short), writing leaf first + i's hash at out[i * 8]. Each
// output element is stored in `stored` bytes and committed by its low `kept` (equal but for
// INT8's outputs: 4 and 2). Used where the fast path does not apply: a product's short last
// leaf, or leaf sizes not a multiple of 64 bytes.
extern "C" __global__ void pog_leaf_hash_bytes(const unsigned char* data, u64 total_bytes,
                                               u32 leaf_bytes, u64 first, u64 count, u32 stored,
                                               u32 kept, u32* out) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        const u64 leaf = first + i, start = leaf * leaf_bytes;
        const u64 len = min((u64)leaf_bytes, total_bytes - start);
        const u64 blocks = (len + 63) / 64;  // none for an empty leaf: 32 zero bytes, as pog_merkle
        u32 cv[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (blocks > 0) pog_start(cv);
        for (u64 b = 0; b < blocks; b++) {
            u32 m[16];
#pragma unroll
            for (int t = 0; t < 16; t++) {
                u32 word = 0;
                for (int k = 3; k >= 0; k--) {
                    u64 at = b * 64 + t * 4 + k;  // committed byte within the leaf
                    u64 committed = start + at;   // and within the product
                    word = word << 8 |
                           (at < len ? data[committed / kept * stored + committed % kept] : 0);
                }
                m[t] = word;
            }
            const u64 block_len = min((u64)64, len - b * 64);
            pog_b3_compress(cv, m, (u32)block_len, pog_leaf_flags(b, blocks));
        }
#pragma unroll
        for (int k = 0; k < 8; k++) out[i * 8 + k] = cv[k];
    }
}

// One level of the tree: above[i] = the BLAKE3 parent of below[2i] || below[2i+1]; an
// unpaired last node is carried up unchanged (RFC 6962's tree shape, built level by level).
extern "C" __global__ void pog_merkle_level(const u32* below, u64 count, u32* above) {
    const u64 pairs = count / 2, items = (count + 1) / 2;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < items; i += stride) {
        const u32* l = below + 2 * i * 8;
        if (i == pairs) {  // count is odd and this is its last node
#pragma unroll
            for (int k = 0; k < 8; k++) above[i * 8 + k] = l[k];
            continue;
        }
        u32 cv[8], m[16];
        pog_start(cv);
#pragma unroll
        for (int t = 0; t < 16; t++) m[t] = l[t];  // left's eight words, then right's
        pog_b3_compress(cv, m, 64, POG_B3_PARENT | POG_B3_DERIVE_KEY_MATERIAL);
#pragma unroll
        for (int k = 0; k < 8; k++) above[i * 8 + k] = cv[k];
    }
}

// Copies the hashes at node indices index[0..n) of `nodes` to out (for inclusion proofs).
extern "C" __global__ void pog_gather_hashes(const u32* nodes, const u64* index, u64 n, u32* out) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
#pragma unroll
        for (int k = 0; k < 8; k++) out[i * 8 + k] = nodes[index[i] * 8 + k];
    }
}
