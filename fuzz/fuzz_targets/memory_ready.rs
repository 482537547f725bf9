//! Any body, correctly signed, as a memory-ready answer
//! (`pog_fuzzing::memory_ready`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pog_fuzzing::memory_ready(data);
});
