//! The proof of memory on a real GPU (ignored elsewhere; `scripts/gpu-run.sh` runs them with
//! `--ignored`): the kernels against the pure reference (`pog_proof::memory::arx`) bit for
//! bit, with every residency, then the rates and the cheats at the claimed model's full size.

use pog_device::gpu::{DatasetSpec, Gpu, Key, Residency, WalkSpec};
use pog_proof::memory::arx;

fn small_dataset() -> DatasetSpec {
    DatasetSpec {
        key: Key([0x0123_4567, 1, 2, 3, 4, 5, 6, 0xdead_beef]),
        items: 10_240,
        rounds: 24,
    }
}

fn small_walk() -> WalkSpec {
    WalkSpec {
        key: Key([9, 8, 7, 6, 5, 4, 3, 2]),
        walkers: 4096,
        steps: 4,
        span: 16,
        walkers_per_leaf: 64,
    }
}

/// The CPU reference's outputs for every walker of the small walk.
fn reference_outputs(d: &DatasetSpec, w: &WalkSpec) -> Vec<u8> {
    let data: Vec<[u32; 32]> = (0..d.items)
        .map(|i| arx::item(&d.key.0, i, d.rounds))
        .collect();
    (0..w.walkers)
        .flat_map(|walker| {
            arx::walk(&w.key.0, walker, (w.steps, w.span), d.items, |i| {
                data[i as usize]
            })
        })
        .collect()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_kernels_compute_what_the_reference_does_with_every_residency() {
    let gpu = Gpu::open(0).expect("a CUDA GPU");
    let d = small_dataset();
    let w = small_walk();
    let mut built = gpu.build_dataset(d).unwrap();
    let items = gpu.dataset_items(&built, 10_000, 7).unwrap();
    for (n, chunk) in items.chunks(128).enumerate() {
        let words: Vec<u8> = arx::item(&d.key.0, 10_000 + n as u64, d.rounds)
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        assert_eq!(chunk, &words[..], "item {}", 10_000 + n);
    }
    let expected = reference_outputs(&d, &w);
    let honest = gpu.walk(&mut built, w).unwrap();
    assert_eq!(gpu.walk_outputs(&honest, 0, w.walkers).unwrap(), expected);
    let tree = pog_merkle::Tree::build::<pog_merkle::Blake3>(
        expected
            .chunks(64 * 16)
            .map(<pog_merkle::Blake3 as pog_merkle::TreeHasher>::leaf)
            .collect(),
    );
    assert_eq!(honest.root, tree.root());
    let opened = gpu.open_walk(&honest, &[0, 17, 63]).unwrap();
    for o in &opened {
        assert_eq!(Some(o.proof.clone()), tree.inclusion_proof(o.leaf));
    }
    for residency in [
        Residency::Recompute { resident: 4000 },
        Residency::HostMemory { resident: 4000 },
        Residency::Recompute { resident: 0 },
    ] {
        let mut built = gpu.build_dataset_with(d, residency).unwrap();
        let walked = gpu.walk(&mut built, w).unwrap();
        assert_eq!(walked.root, honest.root, "{residency:?}");
    }
    println!("memory proof kernels match the reference with every residency");
}

/// The model the full-size tests plan for: `POG_MEMORY_MODEL`, a model or a name as NVML
/// reports it (`scripts/gpu-run.sh` sets it from nvidia-smi), else the H200 SXM.
fn claimed_model() -> &'static pog_spec::GpuSpec {
    let db = pog_spec::SpecDb::embedded();
    let model = std::env::var("POG_MEMORY_MODEL").unwrap_or_else(|_| "H200 SXM".into());
    db.by_model(&model)
        .or_else(|| db.by_name(&model))
        .unwrap_or_else(|| panic!("{model:?} is no model or name of the spec database"))
}

/// The full-size rates and the capacity cheats, as JSON lines for the run's report.
#[test]
#[ignore = "needs a CUDA GPU with the claimed model's memory"]
fn full_size_rates_and_capacity_cheats() {
    let spec = claimed_model();
    let model = &spec.model;
    let plan = pog_proof::memory::plan(spec, pog_proof::memory::WALK_SECONDS, None).unwrap();
    let gpu = Gpu::open(0).expect("a CUDA GPU");
    let d = DatasetSpec {
        key: Key([1, 2, 3, 4, 5, 6, 7, 8]),
        items: plan.items,
        rounds: plan.item_rounds,
    };
    let w = WalkSpec {
        key: Key([8, 7, 6, 5, 4, 3, 2, 1]),
        walkers: plan.walkers,
        steps: plan.steps,
        span: plan.span,
        walkers_per_leaf: plan.walkers_per_leaf,
    };
    gpu.check_memory_proof_fits(&d, &w).unwrap();
    let run = |residency: Residency| {
        let mut built = gpu.build_dataset_with(d, residency).unwrap();
        gpu.reserve_walk(&mut built, w.walkers, w.walkers_per_leaf)
            .unwrap();
        let build_ms = built.build_ms;
        let walked = gpu.walk(&mut built, w).unwrap();
        (build_ms, walked.timings, walked.root)
    };
    let honest: Vec<_> = (0..3).map(|_| run(Residency::Device)).collect();
    let (build_ms, t, root) = honest[honest.len() - 1];
    let reads = (w.walkers * u64::from(w.steps) * u64::from(w.span)) as f64;
    let walk_gbs = reads * 128.0 / (t.walk_ms * 1e6);
    let commit_ms = t.walk_ms + t.hash_ms + t.tree_ms;
    let commit_gbs = reads * 128.0 / (commit_ms * 1e6);
    // What one item costs to produce against what one read costs in the walk.
    let generate_ns = build_ms * 1e6 / d.items as f64;
    let read_ns = t.walk_ms * 1e6 / reads;
    println!(
        "{{\"what\":\"honest\",\"model\":\"{model}\",\"items\":{},\"walkers\":{},\"build_ms\":{build_ms:.1},\"walk_ms\":[{}],\"hash_ms\":{:.1},\"tree_ms\":{:.1},\"wall_ms\":{:.1},\"walk_gbs\":{walk_gbs:.1},\"commit_gbs\":{commit_gbs:.1},\"expected_ms\":{:.1},\"generate_over_read\":{:.1}}}",
        d.items,
        w.walkers,
        honest.iter().map(|h| format!("{:.1}", h.1.walk_ms)).collect::<Vec<_>>().join(","),
        t.hash_ms,
        t.tree_ms,
        t.wall_ms,
        plan.expected_ms,
        generate_ns / read_ns
    );
    // An 80 GB card's room: the rest recomputed, or read from host memory over PCIe.
    let resident = (80u64 << 30) / 128;
    for (name, residency) in [
        ("recompute", Residency::Recompute { resident }),
        ("host-memory", Residency::HostMemory { resident }),
    ] {
        let (_, c, cheat_root) = run(residency);
        assert_eq!(
            cheat_root, root,
            "a cheat computes the same outputs, only slower"
        );
        let cheat_commit = c.walk_ms + c.hash_ms + c.tree_ms;
        println!(
            "{{\"what\":\"{name}\",\"resident_gib\":80,\"walk_ms\":{:.1},\"commit_ms\":{cheat_commit:.1},\"over_honest\":{:.2},\"over_bound\":{:.2}}}",
            c.walk_ms,
            cheat_commit / commit_ms,
            cheat_commit / plan.expected_ms
        );
    }
}

/// Why the walk reads blocks: its rate by block size (span) over a small data set and over the
/// full one, about 256 GB of reads each (JSON lines).
#[test]
#[ignore = "needs a CUDA GPU with the claimed model's memory"]
fn walk_rate_by_span_and_data_set_size() {
    let spec = claimed_model();
    let plan = pog_proof::memory::plan(spec, pog_proof::memory::WALK_SECONDS, None).unwrap();
    let gpu = Gpu::open(0).expect("a CUDA GPU");
    for items in [(8u64 << 30) / 128, plan.items] {
        let d = DatasetSpec {
            key: Key([3; 8]),
            items,
            rounds: 1,
        };
        for span in [1u32, 4, 16] {
            let steps = 64 / span;
            let walkers = ((256u64 << 30) / (128 * 64)).div_ceil(64) * 64;
            let w = WalkSpec {
                key: Key([4; 8]),
                walkers,
                steps,
                span,
                walkers_per_leaf: 64,
            };
            let walked = gpu.walk(&mut gpu.build_dataset(d).unwrap(), w).unwrap();
            let bytes = (walkers * 64 * 128) as f64;
            println!(
                "{{\"what\":\"walk-rate\",\"dataset_gib\":{:.1},\"span\":{span},\"walk_ms\":{:.1},\"walk_gbs\":{:.0}}}",
                (items * 128) as f64 / (1u64 << 30) as f64,
                walked.timings.walk_ms,
                bytes / (walked.timings.walk_ms * 1e6)
            );
        }
    }
}
