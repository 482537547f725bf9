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
    pub inv: &'a Inventory,
    pub views: Vec<GpuView<'a>>,
    pub db: &'a SpecDb,
}
