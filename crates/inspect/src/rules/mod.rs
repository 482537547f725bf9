//! The cross-checks. Each module owns a family of rules and adds its findings; every rule id
//! is a constant in its module and is listed in docs/inspect.md.

pub mod environment;
pub mod health;
pub mod sources;
pub mod spec;
pub mod uniqueness;

use crate::join::GpuView;
use pog_facts::Inventory;
use pog_spec::SpecDb;

/// What every rule may look at.
pub struct Context<'a> {
    /// Everything the sources reported.
    pub inv: &'a Inventory,
    /// The sources' records joined per GPU ([`crate::join::join`]).
    pub views: Vec<GpuView<'a>>,
    /// The datasheets to check the GPUs against.
    pub db: &'a SpecDb,
}
