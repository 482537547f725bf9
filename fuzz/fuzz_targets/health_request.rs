//! Any body, correctly signed, as a health request (`pog_fuzzing::health_request`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pog_fuzzing::health_request(data);
});
