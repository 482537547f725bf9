//! The GPUs of one host together ([`Fabric`]): peer-to-peer transfers by copy engine and by
//! SM, and the latency of reading a peer's memory, as nvbandwidth's device_to_device cases
//! measure them, and NCCL's all-reduce across all of them. Peer access is enabled for every
//! pair the driver allows.

use super::Gpu;
use crate::compute::{Fabric, GpuError, PeerKind, PeerRequest};
use crate::during::During;
use cudarc::driver::result as drv;
use cudarc::driver::sys::{self, cudaError_enum as CuResult};
use cudarc::driver::PushKernelArg;
use cudarc::nccl;

/// NCCL settings pog runs with unless the environment says otherwise. NVLink multicast
/// (NVLS) stays off: pog measures the links, not the switch's in-network reduction, and some
/// shared hosts forbid it. NCCL reads them from the environment when it initializes, and the
/// environment may only be changed while no other thread runs, so the binary applies them
/// first thing in `main` ([`apply_nccl_defaults`]).
pub const NCCL_DEFAULTS: [(&str, &str); 1] = [("NCCL_NVLS_ENABLE", "0")];

/// Sets each of [`NCCL_DEFAULTS`] the environment does not already set.
///
/// # Safety
/// Call before any other thread exists (first thing in `main`): changing the environment
/// while another thread reads it is undefined behaviour.
pub unsafe fn apply_nccl_defaults() {
    for (name, value) in NCCL_DEFAULTS {
        if std::env::var_os(name).is_none() {
            // SAFETY: the caller guarantees that no other thread is running.
            unsafe { std::env::set_var(name, value) };
        }
    }
}

/// Links followed per latency run, and the chain's size (larger than any L1, so each link is
/// a trip to the memory's L2).
const CHASE_STEPS: u64 = 20_000;
const CHASE_BYTES: u64 = 8 << 20;

/// Every CUDA device of the host, with peer access enabled where the driver allows it.
pub struct GpuFabric {
    gpus: Vec<Gpu>,
    /// access[src][dst]: whether src reaches dst's memory, or why not.
    access: Vec<Vec<Result<(), GpuError>>>,
}

impl GpuFabric {
    /// Opens CUDA devices 0..count and enables peer access between every pair that has it.
    pub fn open(count: usize) -> Result<GpuFabric, GpuError> {
        let gpus = (0..count).map(Gpu::open).collect::<Result<Vec<_>, _>>()?;
        let mut access =
            vec![vec![Err(GpuError::Unsupported("the same GPU".into())); count]; count];
        for (src, row) in access.iter_mut().enumerate() {
            for (dst, cell) in row.iter_mut().enumerate() {
                if src != dst {
                    *cell = enable_peer_access(&gpus[src], &gpus[dst]);
                }
            }
        }
        Ok(GpuFabric { gpus, access })
    }

    fn pair(&self, src: usize, dst: usize) -> Result<(&Gpu, &Gpu), GpuError> {
        self.peer_access(src, dst).map_err(|why| match why {
            GpuError::Unsupported(why) => {
                GpuError::Unsupported(format!("GPU {src} → GPU {dst}: {why}"))
            }
            other => other,
        })?;
        Ok((&self.gpus[src], &self.gpus[dst]))
    }
}

/// Lets `from` reach `to`'s memory.
fn enable_peer_access(from: &Gpu, to: &Gpu) -> Result<(), GpuError> {
    let mut can = 0i32;
    // SAFETY: writes one int; both devices are valid ordinals of this host.
    unsafe { sys::cuDeviceCanAccessPeer(&mut can, from.ctx.cu_device(), to.ctx.cu_device()) }
        .result()
        .during("asking the driver about peer access")?;
    if can == 0 {
        return Err(GpuError::Unsupported(
            "the driver reports no peer access between them".into(),
        ));
    }
    from.bind()?;
    // SAFETY: `to`'s context is live; flags must be 0.
    match unsafe { sys::cuCtxEnablePeerAccess(to.ctx.cu_ctx(), 0) } {
        CuResult::CUDA_SUCCESS | CuResult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(()),
        e => Err(GpuError::Cuda {
            step: "enabling peer access".into(),
            code: e as u32,
            name: format!("{e:?}"),
        }),
    }
}

impl Fabric for GpuFabric {
    fn count(&self) -> usize {
        self.gpus.len()
    }

    fn peer_access(&self, src: usize, dst: usize) -> Result<(), GpuError> {
        self.access
            .get(src)
            .and_then(|row| row.get(dst))
            .cloned()
            .unwrap_or_else(|| Err(GpuError::Unsupported(format!("no GPU pair {src}, {dst}"))))
    }

    fn peer_copy(&mut self, request: &PeerRequest) -> Result<Vec<f64>, GpuError> {
        // The side that does the work must reach the other's memory.
        let (src, dst) = match request.kind {
            PeerKind::CopyEngineWrite | PeerKind::SmWrite => self.pair(request.src, request.dst)?,
            PeerKind::CopyEngineRead | PeerKind::SmRead => {
                let (dst, src) = self.pair(request.dst, request.src)?;
                (src, dst)
            }
        };
        src.bind()?;
        let from = src.alloc(request.bytes)?;
        dst.bind()?;
        let to = dst.alloc(request.bytes)?;
        // The side whose engine or SMs do the work, and its stream.
        let runner = match request.kind {
            PeerKind::CopyEngineWrite | PeerKind::SmWrite => src,
            PeerKind::CopyEngineRead | PeerKind::SmRead => dst,
        };
        runner.bind()?;
        let vectors = request.bytes / 16;
        let sink = runner.alloc(8)?;
        let once = || -> Result<(), GpuError> {
            match request.kind {
                PeerKind::CopyEngineWrite | PeerKind::CopyEngineRead => {
                    // SAFETY: both buffers hold `bytes`; peer access is enabled between them.
                    unsafe {
                        drv::memcpy_peer_async(
                            dst.ctx.cu_ctx(),
                            to.ptr,
                            src.ctx.cu_ctx(),
                            from.ptr,
                            request.bytes as usize,
                            runner.stream.cu_stream(),
                        )
                    }
                    .during("a peer copy")
                }
                PeerKind::SmWrite => {
                    let value = 0x5a5a_5a5au32;
                    let passes = 1u64;
                    let mut launch = runner.stream.launch_builder(&runner.kernels.write);
                    launch.arg(&to.ptr).arg(&vectors).arg(&passes).arg(&value);
                    // SAFETY: writes `vectors` 16-byte elements of the peer's buffer.
                    unsafe { launch.launch(runner.geometry(vectors)) }
                        .map(|_| ())
                        .during("launching a peer write")
                }
                PeerKind::SmRead => {
                    let passes = 1u64;
                    let mut launch = runner.stream.launch_builder(&runner.kernels.read);
                    launch
                        .arg(&from.ptr)
                        .arg(&vectors)
                        .arg(&passes)
                        .arg(&sink.ptr);
                    // SAFETY: reads `vectors` 16-byte elements of the peer's buffer.
                    unsafe { launch.launch(runner.geometry(vectors)) }
                        .map(|_| ())
                        .during("launching a peer read")
                }
            }
        };
        let timed = (0..request.warmup)
            .try_for_each(|_| once())
            .and_then(|_| runner.sync())
            .and_then(|_| (0..request.iterations).map(|_| runner.time(once)).collect());
        // Each buffer is freed with its own GPU's context current.
        drop(sink);
        src.bind()?;
        drop(from);
        dst.bind()?;
        drop(to);
        timed
    }

    fn peer_latency(
        &mut self,
        src: usize,
        dst: usize,
        iterations: u32,
    ) -> Result<Vec<f64>, GpuError> {
        let (reader, owner) = self.pair(src, dst)?;
        // A random cycle through the chain (Sattolo's shuffle), so no prefetcher helps.
        let links = (CHASE_BYTES / 8) as usize;
        let mut next: Vec<u64> = (0..links as u64).collect();
        for i in (1..links).rev() {
            let j = (pog_matgen::hash(0xc4a5e, i as u64) % i as u64) as usize;
            next.swap(i, j);
        }
        owner.bind()?;
        let chain = owner.alloc(CHASE_BYTES)?;
        // SAFETY: chain holds `links` u64; queued on the owner's stream, then waited for.
        unsafe { drv::memcpy_htod_async(chain.ptr, &next[..], owner.stream.cu_stream()) }
            .during("writing the pointer chain")?;
        owner.sync()?;
        reader.bind()?;
        let out = reader.alloc(8)?;
        let chase = || -> Result<(), GpuError> {
            let steps = CHASE_STEPS;
            let mut launch = reader.stream.launch_builder(&reader.kernels.chase);
            launch.arg(&chain.ptr).arg(&steps).arg(&out.ptr);
            // SAFETY: every link of the chain is an index inside it.
            unsafe { launch.launch(super::ONE_THREAD) }
                .map(|_| ())
                .during("launching the pointer chase")
        };
        let timed = chase().and_then(|_| {
            (0..iterations)
                .map(|_| reader.time(chase).map(|ms| ms * 1e6 / CHASE_STEPS as f64))
                .collect()
        });
        drop(out);
        owner.bind()?;
        drop(chain);
        timed
    }

    fn collectives(&self) -> Result<(), GpuError> {
        // SAFETY: only tries to dlopen the library (cudarc panics on a missing one).
        if unsafe { nccl::sys::is_culib_present() } {
            Ok(())
        } else {
            Err(GpuError::Unsupported(
                "NCCL library not found: put a directory holding libnccl.so on the loader path \
                 (the nvidia-nccl wheel ships libnccl.so.2: link libnccl.so to it)"
                    .into(),
            ))
        }
    }

    fn all_reduce(
        &mut self,
        bytes: u64,
        warmup: u32,
        iterations: u32,
    ) -> Result<Vec<f64>, GpuError> {
        self.collectives()?;
        let streams: Vec<_> = self.gpus.iter().map(|g| g.stream.clone()).collect();
        let comms = nccl::Comm::from_devices(streams).during("starting NCCL")?;
        let elements = (bytes / 4).max(1) as usize;
        let mut buffers = Vec::with_capacity(self.gpus.len());
        for g in &self.gpus {
            g.bind()?;
            buffers.push(
                g.stream
                    .alloc_zeros::<f32>(elements)
                    .during("allocating the all-reduce buffer")?,
            );
        }
        // Rank r holds r + 1 at both ends of its buffer (zeros between), so the first
        // all-reduce must leave n(n + 1)/2 there on every GPU: a library or link that returns
        // without reducing is caught, not timed.
        let count = buffers.len();
        for (r, (g, buffer)) in self.gpus.iter().zip(buffers.iter_mut()).enumerate() {
            let mark = [(r + 1) as f32];
            for at in [0, elements - 1] {
                g.stream
                    .memcpy_htod(&mark, &mut buffer.slice_mut(at..at + 1))
                    .during("marking the all-reduce buffer")?;
            }
        }
        let sync_all = || self.gpus.iter().try_for_each(|g| g.sync());
        let once = |buffers: &mut Vec<cudarc::driver::CudaSlice<f32>>| -> Result<(), GpuError> {
            nccl::result::group_start().during("opening an NCCL group")?;
            // The group is always closed, even when a rank's call failed.
            let queued = comms
                .iter()
                .zip(buffers.iter_mut())
                .try_for_each(|(comm, buffer)| {
                    comm.all_reduce_in_place(buffer, &nccl::ReduceOp::Sum)
                        .map(|_| ())
                        .during("NCCL all-reduce")
                });
            let closed = nccl::result::group_end()
                .map(|_| ())
                .during("closing an NCCL group");
            queued.and(closed)?;
            sync_all()
        };
        once(&mut buffers)?;
        let sum = (count * (count + 1) / 2) as f32;
        for (r, (g, buffer)) in self.gpus.iter().zip(&buffers).enumerate() {
            let mut ends = [0f32; 2];
            for (slot, at) in [0, elements - 1].into_iter().enumerate() {
                g.stream
                    .memcpy_dtoh(&buffer.slice(at..at + 1), &mut ends[slot..slot + 1])
                    .during("reading the all-reduce result")?;
            }
            g.sync()?;
            if ends != [sum; 2] {
                return Err(GpuError::Unsupported(format!(
                    "NCCL's all-reduce left {ends:?} at the ends of GPU {r}'s buffer; the sum over {count} GPU(s) is {sum}"
                )));
            }
        }
        // More warm-ups. The sums keep growing (×count each time, reaching f32's infinity
        // after some 40 rounds on 8 GPUs), which changes nothing in the timing.
        for _ in 1..warmup {
            once(&mut buffers)?;
        }
        // Host-timed from a synchronized start to the last GPU's completion, as nccl-tests
        // takes the slowest rank.
        (0..iterations)
            .map(|_| {
                let started = std::time::Instant::now();
                once(&mut buffers).map(|_| started.elapsed().as_secs_f64() * 1e3)
            })
            .collect()
    }
}
