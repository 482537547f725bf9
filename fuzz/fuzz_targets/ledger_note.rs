//! Any bytes as a ledger signed note: as a checkpoint, as a witness's add-checkpoint request and
//! as a verifier key (`pog_fuzzing::ledger_note`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pog_fuzzing::ledger_note(data);
});
