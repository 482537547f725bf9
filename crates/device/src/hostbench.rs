//! Host measurements: CPU floating-point throughput, memory bandwidth (STREAM triad) and
//! storage (sequential read and write, random 4 KiB reads), sized by a [`HostPlan`].

use pog_facts::hostbench::{HostMeasurement, HostPlan, StorageBench};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::Instant;

/// Independent accumulators per thread: enough to hide FMA latency on current cores.
const LANES: usize = 32;

/// The multiply-add loop both CPU variants run: LANES independent chains of x = x·m + a.
#[inline(always)]
fn fma_chains(iterations: u64) -> f64 {
    let mut acc = [1.0f64; LANES];
    let (m, a) = (
        std::hint::black_box(0.999_999_9),
        std::hint::black_box(1e-7),
    );
    for _ in 0..iterations {
        for x in acc.iter_mut() {
            *x = x.mul_add(m, a);
        }
    }
    acc.iter().sum()
}

/// [`fma_chains`] compiled for AVX2 and FMA, so that the chains run on fused vector units.
///
/// # Safety
///
/// The CPU must have AVX2 and FMA ([`has_fma`] says so): on one without, the instructions
/// this is compiled to fault.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn fma_chains_avx2(iterations: u64) -> f64 {
    fma_chains(iterations)
}

fn has_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        true // aarch64 always has FMA
    }
}

/// GFLOP/s of `threads` threads each running the FMA loop for about `seconds`.
fn cpu_gflops(threads: usize, seconds: f64) -> f64 {
    let fma = has_fma();
    let run = move |iterations: u64| -> f64 {
        #[cfg(target_arch = "x86_64")]
        if fma {
            // SAFETY: the CPU has AVX2 and FMA (checked above).
            return unsafe { fma_chains_avx2(iterations) };
        }
        fma_chains(iterations)
    };
    // Calibrate on one thread, then run all threads for the target time.
    let mut iterations = 1u64 << 16;
    loop {
        let t = Instant::now();
        std::hint::black_box(run(iterations));
        if t.elapsed().as_secs_f64() > 0.05 || iterations > 1 << 40 {
            let per_iteration = t.elapsed().as_secs_f64() / iterations as f64;
            iterations = ((seconds / per_iteration) as u64).max(1);
            break;
        }
        iterations *= 4;
    }
    let started = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(move || std::hint::black_box(run(iterations)));
        }
    });
    let flops = 2.0 * LANES as f64 * iterations as f64 * threads as f64;
    flops / started.elapsed().as_secs_f64() / 1e9
}

/// STREAM triad over three arrays of `bytes` each, split across `threads`: GB/s per repeat.
fn stream_triad(bytes: u64, threads: usize, repeats: u32) -> Vec<f64> {
    let n = (bytes / 8) as usize;
    let chunk = n.div_ceil(threads);
    let mut a = vec![0.0f64; n];
    let b = vec![1.0f64; n];
    let c = vec![2.0f64; n];
    let scalar = std::hint::black_box(3.0);
    (0..repeats)
        .map(|_| {
            let t = Instant::now();
            std::thread::scope(|s| {
                for ((a, b), c) in a
                    .chunks_mut(chunk)
                    .zip(b.chunks(chunk))
                    .zip(c.chunks(chunk))
                {
                    s.spawn(move || {
                        for ((x, y), z) in a.iter_mut().zip(b).zip(c) {
                            *x = y + scalar * z;
                        }
                    });
                }
            });
            std::hint::black_box(&a);
            3.0 * n as f64 * 8.0 / t.elapsed().as_secs_f64() / 1e9
        })
        .collect()
}

/// A buffer aligned for O_DIRECT (4 KiB), filled with non-zero bytes.
struct Aligned {
    storage: Vec<u8>,
    offset: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let storage = vec![0xa5u8; len + 4096];
        let offset = storage.as_ptr().align_offset(4096);
        Aligned {
            storage,
            offset,
            len,
        }
    }
    fn bytes(&self) -> &[u8] {
        &self.storage[self.offset..self.offset + self.len]
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.storage[self.offset..self.offset + self.len]
    }
}

/// Why the storage benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The directory to measure in is missing, not a directory, or not writable.
    #[error(
        "cannot write a test file in {dir}: {error}; pass a writable directory with --storage-dir"
    )]
    Create {
        /// The directory asked for.
        dir: String,
        /// Why the private directory could not be made in it.
        error: std::io::Error,
    },
    /// An I/O call failed part-way.
    #[error("{step} {file}: {error}")]
    Io {
        /// What was being done ("writing", "reading", …).
        step: &'static str,
        /// The test file.
        file: String,
        /// Why it failed.
        error: std::io::Error,
    },
}

/// Sequential write and read of `bytes`, then random 4 KiB reads, on a file in a private
/// temporary directory under `dir` (mode 0700, random name, removed afterwards: nothing
/// another user prepared can be followed or truncated). O_DIRECT where the file system
/// allows it.
pub fn storage(dir: &Path, bytes: u64, random_reads: u32) -> Result<StorageBench, StorageError> {
    const BLOCK: usize = 1 << 20;
    let bytes = bytes.max(BLOCK as u64) / BLOCK as u64 * BLOCK as u64;
    let private = tempfile::Builder::new()
        .prefix(".pog-storage-bench-")
        .tempdir_in(dir)
        .map_err(|error| StorageError::Create {
            dir: dir.display().to_string(),
            error,
        })?;
    let path = private.path().join("data");
    let file_name = path.display().to_string();
    let io = |step: &'static str| {
        let file = file_name.clone();
        move |error| StorageError::Io { step, file, error }
    };
    let open = |direct: bool, write: bool| {
        let mut o = std::fs::OpenOptions::new();
        o.read(true).write(write).create_new(write);
        if direct {
            o.custom_flags(libc::O_DIRECT);
        }
        o.open(&path)
    };
    let (mut file, direct) = match open(true, true) {
        Ok(f) => (f, true),
        Err(_) => (open(false, true).map_err(io("creating"))?, false),
    };
    let mut block = Aligned::new(BLOCK);
    let t = Instant::now();
    for i in 0..bytes / BLOCK as u64 {
        block.bytes_mut()[..8].copy_from_slice(&i.to_le_bytes());
        file.write_all(block.bytes()).map_err(io("writing"))?;
    }
    file.sync_all().map_err(io("syncing"))?;
    let write_mbs = bytes as f64 / t.elapsed().as_secs_f64() / 1e6;
    let mut reader = open(direct, false).map_err(io("reopening"))?;
    reader.seek(SeekFrom::Start(0)).map_err(io("seeking in"))?;
    let t = Instant::now();
    for _ in 0..bytes / BLOCK as u64 {
        reader
            .read_exact(block.bytes_mut())
            .map_err(io("reading"))?;
    }
    let read_mbs = bytes as f64 / t.elapsed().as_secs_f64() / 1e6;
    let mut page = Aligned::new(4096);
    let pages = bytes / 4096;
    let t = Instant::now();
    for i in 0..u64::from(random_reads) {
        let offset = pog_matgen::hash(0x10, i) % pages * 4096;
        reader
            .read_exact_at(page.bytes_mut(), offset)
            .map_err(io("random reads in"))?;
    }
    let random_read_iops = f64::from(random_reads) / t.elapsed().as_secs_f64();
    Ok(StorageBench {
        path: dir.display().to_string(),
        bytes,
        direct_io: direct,
        write_mbs,
        read_mbs,
        random_read_iops,
    })
}

/// Runs every host measurement.
pub fn run(plan: &HostPlan, storage_dir: &Path) -> HostMeasurement {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    HostMeasurement {
        threads,
        cpu_gflops_single: cpu_gflops(1, plan.cpu_seconds),
        cpu_gflops_multi: cpu_gflops(threads, plan.cpu_seconds),
        cpu_fma: has_fma(),
        stream_triad_gbs: stream_triad(plan.stream_bytes, threads, plan.stream_repeats),
        storage: storage(storage_dir, plan.storage_bytes, plan.random_reads).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_host_benchmarks_produce_plausible_figures() {
        let dir = tempfile::tempdir().unwrap();
        let plan = HostPlan {
            cpu_seconds: 0.05,
            stream_bytes: 4 << 20,
            stream_repeats: 3,
            storage_bytes: 4 << 20,
            random_reads: 64,
        };
        let h = run(&plan, dir.path());
        assert!(h.threads >= 1);
        // A plausibility floor, not a speed target: any CPU of this decade does several GFLOP/s
        // on one thread, but 50 ms of it beside the other tests on a 2-core CI machine read
        // 0.098 once (2026-12-07); a broken timer or unit is off by far more than 100×. All
        // threads at least match half of one.
        assert!(h.cpu_gflops_single > 0.01, "{}", h.cpu_gflops_single);
        assert!(h.cpu_gflops_multi > 0.5 * h.cpu_gflops_single);
        assert_eq!(h.stream_triad_gbs.len(), 3);
        assert!(h.stream_triad_gbs.iter().all(|&gbs| gbs > 0.1));
        let s = h.storage.value().unwrap();
        assert_eq!(s.bytes, 4 << 20);
        assert!(s.write_mbs > 0.0 && s.read_mbs > 0.0 && s.random_read_iops > 0.0);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "the test file is removed"
        );
    }

    #[test]
    fn an_unwritable_storage_dir_is_an_error() {
        let err = storage(Path::new("/no/such/dir"), 1 << 20, 1).unwrap_err();
        assert!(matches!(err, StorageError::Create { .. }), "{err}");
        assert!(err.to_string().contains("--storage-dir"), "{err}");
    }
}
