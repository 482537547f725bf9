//! Ways an agent can misbehave, for the attack tests: each is something a dishonest provider
//! would try, and the validator must refuse. Compiled only with the `test-doubles` feature,
//! which the crate's own tests enable and no release build does: nothing here is reachable
//! from the `pog` binary.

use pog_net::locked::Locked;
use pog_proof::prover::{Behaviour, CpuProver, Prover};
use pog_proof::Challenge;
use pog_signed::Identity;
use std::sync::{Arc, Mutex};

/// One misbehaviour of a dishonest agent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cheat {
    /// Answers every challenge with the commitment and leaves of its first one.
    ReplayFirst,
    /// Computes the answer for another GPU's UUID (one GPU answering for two).
    AnswerAs(&'static str),
    /// Computes the answer as if the GPU sat at another PCI address.
    AnswerAtBus(&'static str),
    /// Sleeps this long before committing (a slower GPU).
    DelayMs(u64),
    /// One real GPU behind all the UUIDs it registered: each challenge holds that one device
    /// for this long before committing, so challenges that arrive together wait in turn.
    OneDevice(u64),
    /// Signs its answers with a key other than the one it registered with.
    ForeignKey,
    /// Answers with wrong values (every element junk, every Merkle opening valid) except in
    /// every `n`th challenge, which it computes honestly: a cheater hoping its good rounds
    /// hide its bad ones.
    HonestEvery(u32),
}

/// A cheat with the state it needs.
pub(crate) struct Cheating {
    cheat: Cheat,
    /// The key of [`Cheat::ForeignKey`].
    foreign: Identity,
    /// The first computed challenge, for [`Cheat::ReplayFirst`].
    first: Mutex<Option<Arc<dyn Prover>>>,
    /// Challenges answered so far, for [`Cheat::HonestEvery`].
    answered: std::sync::atomic::AtomicU32,
    /// The single device of [`Cheat::OneDevice`] (shared with other agents by
    /// [`Agent::sharing_device`]).
    one_device: Arc<tokio::sync::Mutex<()>>,
}

impl Cheating {
    /// The identity answers are signed with.
    pub(crate) fn signer<'a>(&'a self, honest: &'a Identity) -> &'a Identity {
        if self.cheat == Cheat::ForeignKey {
            &self.foreign
        } else {
            honest
        }
    }

    /// An answer to give instead of computing `asked`: a stored one ([`Cheat::ReplayFirst`])
    /// or a wrong one ([`Cheat::HonestEvery`]).
    pub(crate) fn substitute(&self, asked: &Challenge) -> Option<Arc<dyn Prover>> {
        match self.cheat {
            Cheat::ReplayFirst => self.first.locked().clone(),
            Cheat::HonestEvery(n) => {
                let count = 1 + self
                    .answered
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                (!count.is_multiple_of(n.max(1))).then(|| {
                    Arc::new(CpuProver::compute(asked, Behaviour::Junk(1.0))) as Arc<dyn Prover>
                })
            }
            _ => None,
        }
    }

    /// The challenge to compute in place of the one asked.
    pub(crate) fn target(&self, asked: &Challenge) -> Challenge {
        let mut target = asked.clone();
        match self.cheat {
            Cheat::AnswerAs(uuid) => {
                if let Ok(uuid) = pog_signed::GpuUuid::new(uuid) {
                    target.to.gpu_uuid = uuid;
                }
            }
            Cheat::AnswerAtBus(bus) => target.to.gpu_bus_id = bus.to_string(),
            _ => {}
        }
        target
    }

    /// Remembers a computed answer (for replaying it later).
    pub(crate) fn computed(&self, prover: &Arc<dyn Prover>) {
        if self.cheat == Cheat::ReplayFirst {
            self.first.locked().get_or_insert_with(|| prover.clone());
        }
    }

    /// Waits as a slower (or shared) device would before committing.
    pub(crate) async fn before_commit(&self) {
        match self.cheat {
            Cheat::DelayMs(ms) => tokio::time::sleep(std::time::Duration::from_millis(ms)).await,
            Cheat::OneDevice(ms) => {
                let _device = self.one_device.lock().await;
                tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
            }
            _ => {}
        }
    }
}

impl Cheating {
    /// A cheat, answered with the foreign key [`Cheat::SignAs`] uses and a device of its own.
    pub(crate) fn new(cheat: Cheat) -> Cheating {
        Cheating {
            cheat,
            foreign: Identity::from_seed([0xf0; 32]),
            first: Mutex::new(None),
            answered: std::sync::atomic::AtomicU32::new(0),
            one_device: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    /// Makes [`Cheat::OneDevice`] this device, shared with other agents'.
    pub(crate) fn share_device(&mut self, device: Arc<tokio::sync::Mutex<()>>) {
        self.one_device = device;
    }
}
