// SHA-256's compression function (FIPS 180-4) on the GPU for the proofs' Merkle commitments,
// hashed as `pog_merkle::Compression` defines it: a leaf's hash is the state after compressing
// its 64-byte blocks (the last one zero-filled) from POG_LEAF_IV, a node's the state after
// compressing left || right from POG_NODE_IV. Both starting states come from that Rust module
// (the host prepends their #defines, `gpu::sha256_prelude`); it is the reference these kernels
// must match bit for bit.
//
// A hash is kept as its eight state words (h0..h7); its bytes are those words big-endian.

typedef unsigned int u32;
typedef unsigned long long u64;

__constant__ u32 POG_SHA256_K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

__device__ __forceinline__ u32 pog_rotr(u32 x, int n) { return __funnelshift_r(x, x, n); }

// One compression of the 16 big-endian message words w into the state s (w is overwritten
// by the message schedule).
__device__ __forceinline__ void pog_sha256_block(u32 s[8], u32 w[16]) {
    u32 a = s[0], b = s[1], c = s[2], d = s[3], e = s[4], f = s[5], g = s[6], h = s[7];
#pragma unroll
    for (int t = 0; t < 64; t++) {
        if (t >= 16) {
            u32 x = w[(t - 15) & 15], y = w[(t - 2) & 15];
            w[t & 15] += (pog_rotr(x, 7) ^ pog_rotr(x, 18) ^ (x >> 3)) + w[(t - 7) & 15] +
                         (pog_rotr(y, 17) ^ pog_rotr(y, 19) ^ (y >> 10));
        }
        u32 t1 = h + (pog_rotr(e, 6) ^ pog_rotr(e, 11) ^ pog_rotr(e, 25)) + ((e & f) ^ (~e & g)) +
                 POG_SHA256_K[t] + w[t & 15];
        u32 t2 = (pog_rotr(a, 2) ^ pog_rotr(a, 13) ^ pog_rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        h = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    s[0] += a; s[1] += b; s[2] += c; s[3] += d; s[4] += e; s[5] += f; s[6] += g; s[7] += h;
}

#define POG_HASH_WARPS 8  // warps per block of pog_leaf_hash (256 threads)

__constant__ u32 POG_LEAF_IV[8] = {POG_LEAF_IV_WORDS};
__constant__ u32 POG_NODE_IV[8] = {POG_NODE_IV_WORDS};

__device__ __forceinline__ void pog_start(u32 s[8], const u32 iv[8]) {
#pragma unroll
    for (int k = 0; k < 8; k++) s[k] = iv[k];
}

// Leaf hashes of `leaves` whole leaves of `leaf_bytes` each, laid end to end from `data`.
// Fast path: needs leaf_bytes % 64 == 0 and data 16-byte aligned. Each lane of a warp hashes
// one leaf; the warp loads its 32 leaves' next 64-byte chunks together (coalesced, through
// shared memory), so memory reads run at full width while each lane compresses its own.
// A chunk is one message block: its words are the leaf's bytes read big-endian.
extern "C" __global__ void __launch_bounds__(256) pog_leaf_hash(const u32* data, u64 leaves,
                                                                u32 leaf_bytes, u32* out) {
    __shared__ u32 stage[POG_HASH_WARPS][32 * 17];  // 17: pad so lanes hit distinct banks
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    u32* mine = stage[warp];
    const u64 words = leaf_bytes / 4, chunks = leaf_bytes / 64;
    const u64 step = (u64)gridDim.x * POG_HASH_WARPS * 32;
    for (u64 first = ((u64)blockIdx.x * POG_HASH_WARPS + warp) * 32; first < leaves; first += step) {
        u32 s[8];
        pog_start(s, POG_LEAF_IV);
        for (u64 j = 0; j < chunks; j++) {
#pragma unroll
            for (int part = 0; part < 4; part++) {
                int q = part * 32 + lane, l = q >> 2, quarter = q & 3;
                uint4 v = make_uint4(0, 0, 0, 0);
                if (first + l < leaves)
                    v = *(const uint4*)(data + (first + l) * words + j * 16 + quarter * 4);
                u32* dst = mine + l * 17 + quarter * 4;
                dst[0] = v.x; dst[1] = v.y; dst[2] = v.z; dst[3] = v.w;
            }
            __syncwarp();
            u32 w[16];
            const u32* chunk = mine + lane * 17;
#pragma unroll
            for (int t = 0; t < 16; t++) w[t] = __byte_perm(chunk[t], 0, 0x0123);
            __syncwarp();
            pog_sha256_block(s, w);
        }
        u64 leaf = first + lane;
        if (leaf < leaves) {
#pragma unroll
            for (int k = 0; k < 8; k++) out[leaf * 8 + k] = s[k];
        }
    }
}

// Leaf hashes for any leaf length: thread per leaf, byte by byte. Hashes leaves first ..
// first + count of a product output of total_bytes cut into leaves of leaf_bytes (the last
// one may be short), writing leaf first + i's hash at out[i * 8]. Used where the fast path
// does not apply: a product's short last leaf, or leaf sizes not a multiple of 64 bytes.
extern "C" __global__ void pog_leaf_hash_bytes(const unsigned char* data, u64 total_bytes,
                                               u32 leaf_bytes, u64 first, u64 count, u32* out) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        const u64 leaf = first + i, start = leaf * leaf_bytes;
        const u64 len = min((u64)leaf_bytes, total_bytes - start);
        const unsigned char* p = data + start;
        const u64 blocks = len == 0 ? 1 : (len + 63) / 64;  // the last block zero-filled
        u32 s[8];
        pog_start(s, POG_LEAF_IV);
        for (u64 b = 0; b < blocks; b++) {
            u32 w[16];
#pragma unroll
            for (int t = 0; t < 16; t++) {
                u32 word = 0;
                for (int k = 0; k < 4; k++) {
                    u64 at = b * 64 + t * 4 + k;
                    word = word << 8 | (at < len ? p[at] : 0);
                }
                w[t] = word;
            }
            pog_sha256_block(s, w);
        }
#pragma unroll
        for (int k = 0; k < 8; k++) out[i * 8 + k] = s[k];
    }
}

// One level of the tree: above[i] = the compression of below[2i] || below[2i+1] from
// POG_NODE_IV; an unpaired last node is carried up unchanged (RFC 6962's tree shape, built
// level by level).
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
        u32 s[8], w[16];
        pog_start(s, POG_NODE_IV);
#pragma unroll
        for (int t = 0; t < 16; t++) w[t] = l[t];  // left's eight words, then right's
        pog_sha256_block(s, w);
#pragma unroll
        for (int k = 0; k < 8; k++) above[i * 8 + k] = s[k];
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
