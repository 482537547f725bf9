//! The proofs' commitment kernels (`src/gpu/blake3.cu`) must hash exactly as
//! `pog_merkle::Blake3` does (its leaves, its nodes, RFC 6962's tree shape). This test compiles them for the host with the system C++
//! compiler: CUDA's qualifiers are defined away, its intrinsics written out, and each block
//! runs as 256 host threads with a barrier per warp for `__syncwarp`, so the warp-cooperative
//! loads of the fast leaf kernel run as they do on a GPU. CI has no GPU; the H200 runs check
//! the same kernels against the CPU prover.

use pog_merkle::{Blake3, Hash, Tree, TreeHasher};
use std::io::Write;
use std::process::{Command, Stdio};

const HARNESS: &str = r#"
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>
#define __device__
#define __forceinline__ inline
#define __global__
#define __constant__
#define __shared__ static
#define __launch_bounds__(n)
#define POG_HOST_THREADS 256
struct dim { unsigned long long x, y, z; };
static dim gridDim, blockIdx, blockDim;
thread_local dim threadIdx;
thread_local std::barrier<>* warp_barrier;
static void __syncwarp() { warp_barrier->arrive_and_wait(); }
struct uint4 { unsigned int x, y, z, w; };
static uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
static unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned s) {
    s &= 31; return s ? (lo >> s) | (hi << (32 - s)) : lo;
}
static unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    unsigned long long both = ((unsigned long long)y << 32) | x, r = 0;
    for (int n = 0; n < 4; n++) r |= ((both >> (8 * ((s >> (4 * n)) & 7))) & 0xff) << (8 * n);
    return (unsigned)r;
}
static unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
#include COMMITMENT_CU

// Runs `kernel` over `blocks` blocks of `threads` threads, a block at a time.
template <class F> static void launch(unsigned blocks, unsigned threads, F kernel) {
    gridDim = {blocks, 1, 1}; blockDim = {threads, 1, 1};
    for (unsigned b = 0; b < blocks; b++) {
        blockIdx = {b, 0, 0};
        std::vector<std::unique_ptr<std::barrier<>>> warps;
        for (unsigned w = 0; w < (threads + 31) / 32; w++) warps.emplace_back(new std::barrier<>(32));
        std::vector<std::thread> pool;
        for (unsigned t = 0; t < threads; t++)
            pool.emplace_back([&, t] { threadIdx = {t, 0, 0}; warp_barrier = warps[t / 32].get(); kernel(); });
        for (auto& th : pool) th.join();
    }
}

static void put_hashes(const std::vector<u32>& words) {  // each word little-endian
    for (u32 w : words) { unsigned char b[4] = {(unsigned char)w, (unsigned char)(w >> 8), (unsigned char)(w >> 16), (unsigned char)(w >> 24)}; fwrite(b, 1, 4, stdout); }
}

int main(int argc, char** argv) {
    std::string mode = argv[1];
    std::vector<unsigned char> in;
    int c; while ((c = getchar()) != EOF) in.push_back((unsigned char)c);
    if (mode == "fast") {  // leaf_bytes, leaves, blocks, "low16" or "whole"
        u32 leaf_bytes = atoi(argv[2]); u64 leaves = strtoull(argv[3], 0, 10); unsigned blocks = atoi(argv[4]);
        bool low16 = std::string(argv[5]) == "low16";
        std::vector<u32> data(in.size() / 4 + 4); memcpy(data.data(), in.data(), in.size());
        std::vector<u32> out(leaves * 8);
        launch(blocks, 256, [&] {
            if (low16) pog_leaf_hash_low16(data.data(), leaves, leaf_bytes, out.data());
            else pog_leaf_hash(data.data(), leaves, leaf_bytes, out.data());
        });
        put_hashes(out);
    } else if (mode == "bytes") {  // leaf_bytes, first, count, stored, kept (of all of stdin)
        u32 leaf_bytes = atoi(argv[2]); u64 first = strtoull(argv[3], 0, 10), count = strtoull(argv[4], 0, 10);
        u32 stored = atoi(argv[5]), kept = atoi(argv[6]);
        std::vector<u32> out(count * 8);
        u64 committed = in.size() / stored * kept;
        launch(2, 64, [&] { pog_leaf_hash_bytes(in.data(), committed, leaf_bytes, first, count, stored, kept, out.data()); });
        put_hashes(out);
    } else {  // "tree": stdin holds leaf hashes; prints the root
        u64 count = in.size() / 32;
        std::vector<u32> level(count * 8);
        for (u64 i = 0; i < count * 8; i++) level[i] = (u32)in[4*i+3] << 24 | (u32)in[4*i+2] << 16 | (u32)in[4*i+1] << 8 | in[4*i];
        while (count > 1) {
            std::vector<u32> above((count + 1) / 2 * 8);
            launch(2, 64, [&] { pog_merkle_level(level.data(), count, above.data()); });
            level = above; count = (count + 1) / 2;
        }
        std::vector<u64> at = {0};
        std::vector<u32> root(8);
        launch(1, 32, [&] { pog_gather_hashes(level.data(), at.data(), 1, root.data()); });
        put_hashes(root);
    }
    return 0;
}
"#;

/// Builds the harness once per test process.
fn harness() -> std::path::PathBuf {
    static BUILT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("commitment-harness");
            std::fs::create_dir_all(&dir).unwrap();
            let source = dir.join("harness.cpp");
            let binary = dir.join("harness");
            std::fs::write(&source, HARNESS).unwrap();
            // The kernels as the GPU compiles them: after the prelude of starting states.
            let cu = dir.join("blake3.cu");
            std::fs::write(
                &cu,
                pog_device::gpu::commitment_prelude() + pog_device::gpu::COMMITMENT_SOURCE,
            )
            .unwrap();
            let built = Command::new("c++")
                .args(["-O1", "-std=c++20", "-pthread", "-o"])
                .arg(&binary)
                .arg(&source)
                .arg(format!("-DCOMMITMENT_CU=\"{}\"", cu.display()))
                .output()
                .expect("a C++ compiler (c++) to build the host harness");
            assert!(
                built.status.success(),
                "{}",
                String::from_utf8_lossy(&built.stderr)
            );
            binary
        })
        .clone()
}

fn run(args: &[String], input: &[u8]) -> Vec<Hash> {
    let mut child = Command::new(harness())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    out.stdout
        .chunks(32)
        .map(|c| c.try_into().unwrap())
        .collect()
}

fn bytes(n: usize, seed: u64) -> Vec<u8> {
    (0..n as u64)
        .map(|i| pog_matgen::hash(seed, i) as u8)
        .collect()
}

#[test]
fn the_fast_leaf_kernel_hashes_as_the_reference_does() {
    // 300 leaves of 256 bytes on one block: two sweeps of the grid, the second with partial
    // warps; 128-byte leaves (the plans') over two blocks; one-block and one-chunk leaves.
    for (leaf_bytes, leaves, blocks) in [
        (256usize, 300usize, 1u32),
        (128, 600, 2),
        (64, 70, 1),
        (1024, 40, 2),
    ] {
        let data = bytes(leaf_bytes * leaves, leaf_bytes as u64);
        let got = run(
            &[
                "fast".into(),
                leaf_bytes.to_string(),
                leaves.to_string(),
                blocks.to_string(),
                "whole".into(),
            ],
            &data,
        );
        let want: Vec<Hash> = data.chunks(leaf_bytes).map(Blake3::leaf).collect();
        assert_eq!(got, want, "leaves of {leaf_bytes} bytes");
    }
}

/// The committed bytes of 4-byte outputs committed by their low 16 bits (INT8's).
fn low_halves(outputs: &[u8]) -> Vec<u8> {
    outputs
        .chunks_exact(4)
        .flat_map(|element| element[..2].to_vec())
        .collect()
}

#[test]
fn the_fast_low16_kernel_hashes_each_outputs_low_half_as_the_reference_does() {
    // 256 committed bytes a leaf (the plans': 128 INT8 outputs), over one and two blocks, with
    // partial warps; one-block and one-chunk leaves.
    for (leaf_bytes, leaves, blocks) in [
        (256usize, 300usize, 1u32),
        (256, 600, 2),
        (64, 70, 1),
        (1024, 40, 2),
    ] {
        let outputs = bytes(2 * leaf_bytes * leaves, leaf_bytes as u64 + 7);
        let got = run(
            &[
                "fast".into(),
                leaf_bytes.to_string(),
                leaves.to_string(),
                blocks.to_string(),
                "low16".into(),
            ],
            &outputs,
        );
        let want: Vec<Hash> = low_halves(&outputs)
            .chunks(leaf_bytes)
            .map(Blake3::leaf)
            .collect();
        assert_eq!(got, want, "leaves of {leaf_bytes} committed bytes");
    }
}

#[test]
fn the_byte_wise_leaf_kernel_hashes_any_length() {
    // Leaves of 100 bytes (not a multiple of 64), and the short last one; also lengths around
    // the block boundaries, where the last block is zero-filled or not filled at all.
    for (leaf_bytes, total) in [
        (100usize, 1030usize),
        (55, 55 * 3),
        (64, 64 * 2 + 7),
        (1, 3),
        (1000, 2100),
        (65, 200),
        (128, 128 * 3 + 1),
        (119, 300),
    ] {
        let data = bytes(total, total as u64);
        let leaves = total.div_ceil(leaf_bytes);
        let got = run(
            &[
                "bytes".into(),
                leaf_bytes.to_string(),
                "0".into(),
                leaves.to_string(),
                "1".into(),
                "1".into(),
            ],
            &data,
        );
        let want: Vec<Hash> = data.chunks(leaf_bytes).map(Blake3::leaf).collect();
        assert_eq!(got, want, "leaves of {leaf_bytes} bytes over {total}");
    }
}

#[test]
fn the_byte_wise_leaf_kernel_commits_4_byte_outputs_by_their_low_half() {
    // INT8's outputs where the fast kernel does not apply: a product of 10 × 10 outputs in
    // leaves of 64 (a short last leaf of 36), and leaves of a length not a multiple of 64,
    // from a leaf past the first.
    for (leaf_bytes, elements, first) in [(128usize, 100usize, 0usize), (50, 77, 1)] {
        let outputs = bytes(4 * elements, elements as u64);
        let committed = low_halves(&outputs);
        let leaves = committed.len().div_ceil(leaf_bytes);
        let got = run(
            &[
                "bytes".into(),
                leaf_bytes.to_string(),
                first.to_string(),
                (leaves - first).to_string(),
                "4".into(),
                "2".into(),
            ],
            &outputs,
        );
        let want: Vec<Hash> = committed
            .chunks(leaf_bytes)
            .skip(first)
            .map(Blake3::leaf)
            .collect();
        assert_eq!(got, want, "leaves of {leaf_bytes} of {elements} outputs");
    }
}

#[test]
fn the_tree_kernel_builds_the_reference_root() {
    for count in [1usize, 2, 3, 5, 8, 13, 100] {
        let leaves: Vec<Hash> = (0..count)
            .map(|i| Blake3::leaf(&(i as u64).to_le_bytes()))
            .collect();
        let input: Vec<u8> = leaves.iter().flatten().copied().collect();
        let got = run(&["tree".into()], &input);
        assert_eq!(
            got,
            vec![Tree::build::<Blake3>(leaves).root()],
            "{count} leaves"
        );
    }
}
