//! Any bytes as a message envelope of every kind: the size bound, the envelope parser and the
//! checks up to the signature (`pog_fuzzing::envelope`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pog_fuzzing::envelope(data);
});
