//! Any body, correctly signed, as a memory challenge, and the keys and sizes derived from it
//! (`pog_fuzzing::memory_challenge`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pog_fuzzing::memory_challenge(data);
});
