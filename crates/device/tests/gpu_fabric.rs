//! The GPU-to-GPU fabric on this host's real GPUs: every pair's transfers and latency run, and
//! NCCL's all-reduce sums right across all of them (one rank on a one-GPU host: the library,
//! the communicator and the checked reduction, without links). Needs CUDA, a GPU and NCCL, so
//! it is ignored by default; `scripts/gpu-run.sh` runs it on the GPU machine with
//! `--ignored` (and `NCCL_NVLS_ENABLE=0`, as `pog` sets it), where anything missing fails it.

use pog_device::gpu::GpuFabric;
use pog_facts::{Fabric, PeerKind, PeerRequest};

#[test]
#[ignore = "needs a GPU and NCCL: scripts/gpu-run.sh runs it with --ignored"]
fn the_fabric_runs_on_this_hosts_gpus() {
    assert!(
        pog_device::cuda::library_present(),
        "no CUDA driver library on this host"
    );
    let count = cudarc::driver::CudaContext::device_count().expect("counting GPUs") as usize;
    assert!(count > 0, "no GPU on this host");
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
    fabric.collectives().expect("the NCCL library");
    for bytes in [4 << 10, 64 << 20] {
        let ms = fabric
            .all_reduce(bytes, 2, 3)
            .expect("a checked all-reduce");
        assert_eq!(ms.len(), 3);
        eprintln!("all-reduce of {bytes} bytes on {count} GPU(s): {ms:?} ms");
    }
}
