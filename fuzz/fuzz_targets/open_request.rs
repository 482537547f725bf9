//! Any body, correctly signed, as an open request, opened by a prover
//! (`pog_fuzzing::open_request`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pog_fuzzing::open_request(data);
});
