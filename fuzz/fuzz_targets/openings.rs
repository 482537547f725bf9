//! Any leaves and hashes, correctly framed and signed, as openings checked by a validator
//! session (`pog_fuzzing::openings`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pog_fuzzing::openings(data);
});
