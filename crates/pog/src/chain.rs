//! The chain anchor's flags as several commands share them: the registry a command or the
//! validator anchors in, checked before anything runs. The anchoring itself, the validator's
//! schedule and the checkpoints kept beside the ledger are `pog_anchor`'s
//! ([`pog_anchor::service`]).

use anyhow::Result;
use pog_anchor::{PublisherKey, Registry, RpcUrl};
use std::path::Path;

/// The anchoring configuration of a validator or a command, checked before anything runs.
pub struct ChainTarget {
    /// The RPC URL.
    pub rpc: RpcUrl,
    /// The registry.
    pub registry: Registry,
}

impl ChainTarget {
    /// Parses and checks the RPC URL, the address and (when given) the key file.
    pub fn new(rpc: &str, contract: &str, key_file: Option<&Path>) -> Result<ChainTarget> {
        let rpc = RpcUrl::parse(rpc)?;
        let address = pog_anchor::parse_address(contract)?;
        let registry = match key_file {
            Some(path) => Registry::publisher(&rpc, address, &PublisherKey::from_file(path)?)?,
            None => Registry::reader(&rpc, address)?,
        };
        Ok(ChainTarget { rpc, registry })
    }
}
