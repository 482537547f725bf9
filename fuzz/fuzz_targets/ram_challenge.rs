//! Any body, correctly signed, as a proof of RAM's challenge, held to the plan for an agent's
//! claim, and the keys and sizes derived from it (`pog_fuzzing::ram_challenge`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pog_fuzzing::ram_challenge(data);
});
