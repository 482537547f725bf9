//! Any bytes at the message decoder: it must return an error or a verified message, never
//! panic, for every message kind the services accept.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pog_proof::wire::{self, kind};

fuzz_target!(|data: &[u8]| {
    let _ = wire::decode::<wire::Register>(data, kind::REGISTER);
    let _ = wire::decode::<wire::ChallengeMessage>(data, kind::CHALLENGE);
    let _ = wire::decode::<wire::Commitment>(data, kind::COMMITMENT);
    let _ = wire::decode::<wire::OpenRequest>(data, kind::OPEN);
    let _ = wire::decode::<wire::Openings>(data, kind::OPENINGS);
});
