//! Any body, correctly signed, as each message the agent's `/v1/storage/*` take, checked
//! before any work (`pog_fuzzing::storage_request`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pog_fuzzing::storage_request(data);
});
