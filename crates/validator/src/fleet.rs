//! Several validators on one database as one fleet: shared slots and a fair split of the work.
//!
//! - **Shared slots.** Slot `s` starts at `s × every` ms since the Unix epoch on each
//!   validator's clock ([`slot_at`], [`next_slot_start`]): every validator derives the same
//!   schedule with nothing exchanged, so every GPU of the fleet is challenged at the same
//!   instant (within the validators' clock skew), and one device behind two identities served
//!   by two validators must do both identities' work inside one time bound.
//! - **One validator a GPU a slot.** At a slot's start each validator says it is alive
//!   ([`crate::registry::Registry::heartbeat`]) and takes the GPUs that rank it first among
//!   the live validators by rendezvous hashing ([`assigned_to`]); its claim is a row per GPU
//!   and slot that no other validator can take ([`crate::registry::Registry::claim`]). Between
//!   slots it says so again every [`heartbeat_every_ms`] (a tenth of the slot, 250 ms to 5 s),
//!   so that a validator that stops is dropped from the live set [`live_horizon_ms`] after
//!   its last heartbeat (four heartbeats, at least a second), whatever the slot's length: its
//!   GPUs rank another validator first from the next slot that starts after that.
//! - **A dead validator's slot is the fleet's fault.** A claim its validator never finished
//!   (no record of the GPU since the claim, the lease run out) is settled by whichever
//!   validator sweeps first: one [`MissedRound`](pog_records::MissedRound) of cause
//!   [`Fleet`](pog_records::MissedCause::Fleet), which the GPU's uptime does not count (its id is derived from the slot and the GPU, so a second
//!   sweeper cannot store another).
//!
//! How an agent could predict its challenges: the slot's start is public, but each
//! challenge's nonce is drawn from the validator's operating-system randomness when it is
//! sent, so nothing can be computed before it arrives.

use sha2::{Digest, Sha256};

/// How often a validator says it is alive, for slots of `every_ms`: a tenth of the slot,
/// from 250 ms to 5 s.
pub fn heartbeat_every_ms(every_ms: u64) -> u64 {
    (every_ms / 10).clamp(250, 5_000)
}

/// How long a validator stays in the live set after its last heartbeat, for slots of
/// `every_ms`: four heartbeats, at least a second (a heartbeat late by a busy moment or a
/// slow database does not drop a live validator).
pub fn live_horizon_ms(every_ms: u64) -> u64 {
    (4 * heartbeat_every_ms(every_ms)).max(1_000)
}

/// The slot that `now_ms` falls in, for slots of `every_ms`.
pub fn slot_at(now_ms: u64, every_ms: u64) -> u64 {
    now_ms / every_ms.max(1)
}

/// When the slot after `now_ms` starts, ms since the Unix epoch.
pub fn next_slot_start(now_ms: u64, every_ms: u64) -> u64 {
    (slot_at(now_ms, every_ms) + 1).saturating_mul(every_ms.max(1))
}

/// The validators seen within [`live_horizon_ms`] of `now_ms` (with when each was last
/// seen), for slots of `every_ms`, sorted: the live set every validator computes alike from
/// the same rows.
pub fn live(seen: &[(String, u64)], now_ms: u64, every_ms: u64) -> Vec<String> {
    let horizon = live_horizon_ms(every_ms);
    let mut live: Vec<String> = seen
        .iter()
        .filter(|(_, at)| now_ms.saturating_sub(*at) <= horizon)
        .map(|(key, _)| key.clone())
        .collect();
    live.sort();
    live.dedup();
    live
}

/// The validator among `live` that GPU `uuid` ranks first (rendezvous hashing: each pair's
/// SHA-256, highest wins), `None` when none is live. Adding or removing a validator moves
/// only the GPUs that rank it first.
pub fn assigned_to<'a>(uuid: &str, live: &'a [String]) -> Option<&'a String> {
    live.iter().max_by_key(|validator| {
        let mut h = Sha256::new();
        h.update(b"pog-fleet assign v1");
        h.update((uuid.len() as u64).to_le_bytes());
        h.update(uuid.as_bytes());
        h.update(validator.as_bytes());
        <[u8; 32]>::from(h.finalize())
    })
}

/// The record id of the fleet's missed slot of a GPU: one per slot and GPU, whoever sweeps.
pub fn fleet_missed_id(slot: u64, uuid: &str) -> String {
    let digest = Sha256::digest(format!("{slot}\n{uuid}").as_bytes());
    format!("fleet-missed-{slot}-{}", hex::encode(&digest[..8]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_the_same_for_every_validator_and_start_on_their_boundaries() {
        assert_eq!(slot_at(59_999, 60_000), 0);
        assert_eq!(slot_at(60_000, 60_000), 1);
        assert_eq!(next_slot_start(60_000, 60_000), 120_000);
        assert_eq!(next_slot_start(119_999, 60_000), 120_000);
        assert_eq!(slot_at(5, 0), 5, "a zero slot length is taken as 1 ms");
    }

    #[test]
    fn the_live_set_drops_a_silent_validator_four_heartbeats_after_its_last() {
        // Slots of a minute: a heartbeat every 5 s, dropped after 20 s of silence.
        let seen = vec![
            ("b".to_string(), 100_000),
            ("a".to_string(), 90_000),
            ("c".to_string(), 70_000),
        ];
        assert_eq!(live(&seen, 110_000, 60_000), vec!["a", "b"]);
        assert_eq!(live(&seen, 90_000, 60_000), vec!["a", "b", "c"]);
        // However long the slot, a heartbeat every 5 s at most; however short, a second.
        assert_eq!(heartbeat_every_ms(600_000), 5_000);
        assert_eq!(live_horizon_ms(600_000), 20_000);
        assert_eq!(heartbeat_every_ms(10_000), 1_000);
        assert_eq!(live_horizon_ms(1_000), 1_000);
        assert_eq!(heartbeat_every_ms(0), 250);
    }

    #[test]
    fn each_gpu_goes_to_one_validator_and_a_departure_moves_only_its_own() {
        let three: Vec<String> = ["v1", "v2", "v3"].map(String::from).to_vec();
        let two: Vec<String> = ["v1", "v3"].map(String::from).to_vec();
        let mut counts = std::collections::HashMap::new();
        for i in 0..3000 {
            let uuid = format!("GPU-{i}");
            let first = assigned_to(&uuid, &three).unwrap();
            *counts.entry(first.clone()).or_insert(0) += 1;
            let after = assigned_to(&uuid, &two).unwrap();
            if first != "v2" {
                assert_eq!(first, after, "{uuid} moved though its validator stayed");
            }
        }
        // About a third each.
        assert!(
            counts.values().all(|&n| (850..1150).contains(&n)),
            "{counts:?}"
        );
        assert_eq!(assigned_to("GPU-1", &[]), None);
    }

    #[test]
    fn a_missed_slot_has_one_id_per_slot_and_gpu() {
        assert_eq!(fleet_missed_id(7, "GPU-a"), fleet_missed_id(7, "GPU-a"));
        assert_ne!(fleet_missed_id(7, "GPU-a"), fleet_missed_id(8, "GPU-a"));
        assert_ne!(fleet_missed_id(7, "GPU-a"), fleet_missed_id(7, "GPU-b"));
    }
}
