//! Any bytes as an agent's openings frame, read as the validator reads one
//! (`pog_fuzzing::openings_frame`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pog_fuzzing::openings_frame(data);
});
