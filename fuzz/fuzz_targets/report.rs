//! Any bytes as the body of an agent's signed inspection and benchmark reports, taken by a
//! validator's `POST /v1/reports` logic (`pog_fuzzing::report`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pog_fuzzing::report(data);
});
