//! Any bytes as the body of the market's signed submit, cancel, clear and withdraw requests
//! (`pog_fuzzing::market`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pog_fuzzing::market(data);
});
