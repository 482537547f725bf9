//! Any body, correctly signed, as a challenge, and the seeds derived from it
//! (`pog_fuzzing::challenge`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pog_fuzzing::challenge(data);
});
