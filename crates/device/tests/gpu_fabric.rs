//! The GPU-to-GPU fabric on this host's real GPUs: every pair's transfers and latency run, and
//! NCCL's all-reduce sums right across all of them (one rank on a one-GPU host: the library,
//! the communicator and the checked reduction, without links). Needs CUDA and a GPU: elsewhere
//! (CI) it reports itself skipped; `scripts/gpu-run.sh` runs it on the GPU machine with
//! `POG_REQUIRE_GPU=1`, where a missing GPU or NCCL library fails it.

use pog_device::compute::{Fabric, PeerKind, PeerRequest};
use pog_device::gpu::GpuFabric;

fn required() -> bool {
    std::env::var_os("POG_REQUIRE_GPU").is_some()
}

#[test]
fn the_fabric_runs_on_this_hosts_gpus() {
    let count = if pog_device::cuda::library_present() {
        cudarc::driver::CudaContext::device_count().unwrap_or(0) as usize
    } else {
        0
    };
    if count == 0 {
        assert!(
            !required(),
            "POG_REQUIRE_GPU is set, and no GPU is reachable"
        );
        eprintln!("no GPU: skipped");
        return;
    }
    let mut fabric = GpuFabric::open(count).expect("opening every GPU");
    assert_eq!(fabric.count(), count);
    for src in 0..count {
        for dst in (0..count).filter(|&d| d != src) {
            if fabric.peer_access(src, dst).is_err() {
                continue;
            }
            for kind in PeerKind::ALL {
                let request = PeerRequest {
                    src,
                    dst,
                    kind,
                    bytes: 64 << 20,
                    warmup: 1,
                    iterations: 3,
                };
                let ms = fabric.peer_copy(&request).expect("a peer transfer");
                assert!(ms.iter().all(|t| *t > 0.0), "{kind:?} {src}→{dst}: {ms:?}");
            }
            let ns = fabric.peer_latency(src, dst, 1000).expect("a latency");
            assert!(ns.iter().all(|t| *t > 0.0));
        }
    }
    match fabric.collectives() {
        Ok(()) => {
            for bytes in [4 << 10, 64 << 20] {
                let ms = fabric
                    .all_reduce(bytes, 2, 3)
                    .expect("a checked all-reduce");
                assert_eq!(ms.len(), 3);
                eprintln!("all-reduce of {bytes} bytes on {count} GPU(s): {ms:?} ms");
            }
        }
        Err(why) => {
            assert!(!required(), "POG_REQUIRE_GPU is set: {why}");
            eprintln!("all-reduce skipped: {why}");
        }
    }
}
