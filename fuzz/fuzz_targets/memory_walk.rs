//! Any body, correctly signed, as a walk, and a walker recomputed from its key
//! (`pog_fuzzing::memory_walk`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pog_fuzzing::memory_walk(data);
});
