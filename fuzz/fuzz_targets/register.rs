//! Any body, correctly signed, as a registration (`pog_fuzzing::register`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pog_fuzzing::register(data);
});
