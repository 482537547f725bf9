//! Any body, correctly signed, as a commitment, taken by a validator session
//! (`pog_fuzzing::commitment`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pog_fuzzing::commitment(data);
});
