//! What the validator holds of each agent's proof of storage between rounds (the data set
//! sent, being built or kept), taken out for one proof at a time; and a storage session's
//! refusal in the validator's words. The round itself is [`crate::storage`]'s.

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
    /// Its data set, between proofs.
    Held(Held),
    /// A proof of this host is running: another round skips it.
    InFlight,
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

/// An agent's entry taken out for one proof; what is left in `back` is put back when it is
/// dropped (nothing: the entry is removed).
pub(crate) struct Taken<'a> {
    datasets: &'a Datasets,
    agent: String,
    pub(crate) back: Option<Held>,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        let mut map = self.datasets.0.locked();
        match self.back.take() {
            Some(held) => map.insert(self.agent.clone(), Slot::Held(held)),
            None => map.remove(&self.agent),
        };
    }
}

impl Datasets {
    /// `agent`'s entry for one proof; `None` while another proof of it runs.
    pub(crate) fn take(&self, agent: &str) -> Option<Taken<'_>> {
        let mut map = self.0.locked();
        let back = match map.insert(agent.to_string(), Slot::InFlight) {
            Some(Slot::InFlight) => return None,
            Some(Slot::Held(held)) => Some(held),
            None => None,
        };
        Some(Taken {
            datasets: self,
            agent: agent.to_string(),
            back,
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
        RoundError::Expired {
            expires_at_ms,
            now_ms,
        } => format!("it expired at {expires_at_ms} ms; the answer came at {now_ms} ms"),
    }
}
