//! Any body, correctly signed, as a health summary (`pog_fuzzing::health_summary`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pog_fuzzing::health_summary(data);
});
