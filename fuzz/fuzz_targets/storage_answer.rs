//! Any body, correctly signed, as each answer to the validator's storage sessions, given to
//! a session in the state it arrives in (`pog_fuzzing::storage_answer`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pog_fuzzing::storage_answer(data);
});
