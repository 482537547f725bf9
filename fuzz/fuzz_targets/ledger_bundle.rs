//! Any bytes as a ledger proof bundle: parsed and verified (`pog_fuzzing::ledger_bundle`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = pog_fuzzing::ledger_bundle(data);
});
