//! What the validator holds of each agent's proof of storage between rounds (the data set
//! sent, being built or kept, and the host's own pace that bounds its rounds), taken out for
//! one proof at a time; and a storage session's refusal in the validator's words. The round
//! itself is [`crate::storage`]'s.

use pog_merkle::Hash;
use pog_net::locked::Locked;
use pog_proof::storage::session::{DatasetSession, RoundError};
use pog_proof::storage::StorageDataset;
use pog_signed::Envelope;
use std::collections::HashMap;
use std::sync::Mutex;

/// What the validator holds of each agent's data set, by agent key.
#[derive(Default)]
pub(crate) struct Datasets(Mutex<HashMap<String, Slot>>);

/// One agent's entry.
enum Slot {
    /// Its data set and its pace, between proofs.
    Idle(Box<Idle>),
    /// A proof of this host is running: another round skips it.
    InFlight,
}

/// What the validator holds of an agent between proofs.
struct Idle {
    held: Option<Held>,
    /// The host's pace: the fastest step of its accepted rounds on the validator's clock, µs,
    /// which bounds its later rounds (`DeviceClass::host_read_us`). It outlives the data set
    /// and the claim: a rebuild (on the schedule, after the agent refused a round, or for a
    /// new claim) does not reset it; the class's floor and read clamp it.
    pace: Option<f64>,
}

/// One agent's data set, as the validator holds it.
pub(crate) enum Held {
    /// Sent and being built: polled each round until its expiry.
    Building {
        session: Box<DatasetSession>,
        envelope: Envelope,
    },
    /// Audited (since then, the validator's clock): walked each round until its rebuild.
    Kept {
        dataset: StorageDataset,
        root: Hash,
        since_ms: u64,
    },
}

/// An agent's entry taken out for one proof; what is left in `back` and `pace` is put back
/// when it is dropped (neither: the entry is removed).
pub(crate) struct Taken<'a> {
    datasets: &'a Datasets,
    agent: String,
    pub(crate) back: Option<Held>,
    pub(crate) pace: Option<f64>,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        let mut map = self.datasets.0.locked();
        match (self.back.take(), self.pace.take()) {
            (None, None) => map.remove(&self.agent),
            (held, pace) => map.insert(
                self.agent.clone(),
                Slot::Idle(Box::new(Idle { held, pace })),
            ),
        };
    }
}

impl Datasets {
    /// `agent`'s entry for one proof (nothing held: a fresh validator's, or a host never
    /// proven); `None` while another proof of it runs.
    pub(crate) fn take(&self, agent: &str) -> Option<Taken<'_>> {
        let mut map = self.0.locked();
        let (back, pace) = match map.insert(agent.to_string(), Slot::InFlight) {
            Some(Slot::InFlight) => return None,
            Some(Slot::Idle(idle)) => (idle.held, idle.pace),
            None => (None, None),
        };
        Some(Taken {
            datasets: self,
            agent: agent.to_string(),
            back,
            pace,
        })
    }
}

/// A storage session's refusal in the validator's words (no value the agent chose).
pub(crate) fn round_summary(e: &RoundError) -> String {
    match e {
        RoundError::WrongId { expected, .. } => {
            format!("an answer for another round or data set than {expected}")
        }
        RoundError::WrongSigner { expected, .. } => {
            format!("signed by another key than the agent's, expected the agent {expected}")
        }
        RoundError::OutOfOrder(what) => format!("{what} arrived out of order"),
        RoundError::NotTakenUp(why) => {
            format!("the agent builds another data set, not taken up: {why}")
        }
        RoundError::Expired {
            expires_at_ms,
            now_ms,
        } => format!("it expired at {expires_at_ms} ms; the answer came at {now_ms} ms"),
    }
}
