//! The CUDA fill kernels (`fill.cu`) must make exactly the elements the Rust generator does:
//! the GPU's GEMM checks and the proof's spot checks recompute elements on the CPU. This test
//! compiles fill.cu for the host with the system C++ compiler (the CUDA qualifiers defined
//! away, the grid run one thread at a time), runs both the packed and the per-element kernel
//! for every format, and compares every element with `pog_matgen::bits`.

use pog_matgen::Storage;
use std::process::Command;

const HARNESS: &str = r#"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#define __device__
#define __host__
#define __forceinline__ inline
#define __global__
struct dim { unsigned long long x, y, z; };
static dim gridDim, blockDim, blockIdx, threadIdx;
#include FILL_CU
int main(int argc, char** argv) {
    const int format = atoi(argv[1]);
    const u64 n = strtoull(argv[2], 0, 10), seed = strtoull(argv[3], 0, 10);
    const int bytes = 8 / pog_per_hash(format);  // a hash makes 8 bytes of elements
    std::vector<unsigned char> packed(n * bytes + 8, 0xee);
    const u64 words = n / pog_per_hash(format);
    gridDim = {3, 1, 1}; blockDim = {5, 1, 1};
    for (blockIdx.x = 0; blockIdx.x < gridDim.x; blockIdx.x++)
        for (threadIdx.x = 0; threadIdx.x < blockDim.x; threadIdx.x++)
            pog_fill_words((u64*)packed.data(), words, seed, format);
    for (blockIdx.x = 0; blockIdx.x < gridDim.x; blockIdx.x++)
        for (threadIdx.x = 0; threadIdx.x < blockDim.x; threadIdx.x++) {
            const u64 first = words * pog_per_hash(format);
            switch (bytes) {
            case 8: pog_fill_u64((unsigned long long*)packed.data(), first, n, seed, format); break;
            case 4: pog_fill_u32((unsigned int*)packed.data(), first, n, seed, format); break;
            case 2: pog_fill_u16((unsigned short*)packed.data(), first, n, seed, format); break;
            default: pog_fill_u8(packed.data(), first, n, seed, format);
            }
        }
    fwrite(packed.data(), 1, n * bytes, stdout);
    return 0;
}
"#;

#[test]
fn the_cuda_fill_makes_the_rust_generators_elements() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("harness.cpp");
    let binary = dir.path().join("harness");
    std::fs::write(&source, HARNESS).unwrap();
    let fill_cu = concat!(env!("CARGO_MANIFEST_DIR"), "/src/fill.cu");
    let built = Command::new("c++")
        .args(["-O1", "-std=c++17", "-o"])
        .arg(&binary)
        .arg(&source)
        .arg(format!("-DFILL_CU=\"{fill_cu}\""))
        .output()
        .expect("a C++ compiler (c++) to build the host harness");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );

    for storage in Storage::ALL {
        // 1003 elements: whole hashes for the packed kernel and a tail for the per-element one.
        let (n, seed) = (1003u64, 0x5eed + storage.format_code() as u64);
        let out = Command::new(&binary)
            .args([
                storage.format_code().to_string(),
                n.to_string(),
                seed.to_string(),
            ])
            .output()
            .unwrap();
        assert!(out.status.success());
        let width = storage.bytes();
        assert_eq!(out.stdout.len(), n as usize * width);
        for (i, chunk) in out.stdout.chunks(width).enumerate() {
            let mut word = [0u8; 8];
            word[..width].copy_from_slice(chunk);
            assert_eq!(
                u64::from_le_bytes(word),
                pog_matgen::bits(storage, seed, i as u64),
                "{storage:?} element {i}"
            );
        }
    }
}
