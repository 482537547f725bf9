//! Any body, correctly signed, as an open request, checked and answered as the agent's
//! `/v1/open` does: the leaves opened by a prover, their paths merged into one multiproof
//! (`pog_fuzzing::open_request`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pog_fuzzing::open_request(data);
});
