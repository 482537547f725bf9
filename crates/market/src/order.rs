//! Orders for GPU-hours: who wants to buy (a renter's bid) or sell (a provider's ask) how many
//! GPU-hours of which GPU class, at what price.
//!
//! Every type here is checked when it is made, by its constructor or by deserialization, so an
//! [`Order`] that exists is a valid one: a bad order is refused before anything can hold it,
//! and nothing downstream (the auctions, the [`Book`](crate::Book)) has a half-valid order to
//! half-apply.

use std::fmt;

use pog_signed::GpuUuid;
use serde::{Deserialize, Serialize};

use crate::price::Price;

/// The most GPU-hours one order may carry (about 114,000 GPU-years); more is refused as absurd.
pub const MAX_QUANTITY: u64 = 1_000_000_000;

/// The longest order id, in bytes.
pub const MAX_ID_LEN: usize = 128;

/// The longest GPU class name, in bytes.
pub const MAX_CLASS_LEN: usize = 64;

/// The most GPUs one ask may offer (as many as one agent may register at a validator).
pub const MAX_ORDER_GPUS: usize = 64;

/// Why an order or one of its parts was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OrderError {
    /// The order id is the empty string.
    #[error("the order id is empty")]
    EmptyId,
    /// The order id is longer than [`MAX_ID_LEN`] bytes.
    #[error("the order id is {0} bytes long; at most 128 are allowed")]
    IdTooLong(usize),
    /// The order id has a space, a control character or a non-ASCII character.
    #[error("the order id may hold only printable ASCII characters, without spaces")]
    IdNotPrintable,
    /// The GPU class name is empty.
    #[error("the GPU class name is empty")]
    EmptyClass,
    /// The GPU class name is longer than [`MAX_CLASS_LEN`] bytes.
    #[error("the GPU class name is {0} bytes long; at most 64 are allowed")]
    ClassTooLong(usize),
    /// The GPU class name has something other than printable ASCII and single inner spaces.
    #[error(
        "the GPU class name may hold only printable ASCII characters and single spaces between \
         words"
    )]
    ClassNotPrintable,
    /// The owner is not an Ed25519 public key written as 64 hex digits.
    #[error("the owner is not an Ed25519 public key in hex (64 hex digits)")]
    BadOwner,
    /// The order is for no GPU-hours.
    #[error("the order is for zero GPU-hours")]
    ZeroQuantity,
    /// The order is for more than [`MAX_QUANTITY`] GPU-hours.
    #[error("the order is for {0} GPU-hours; at most 1,000,000,000 are allowed")]
    QuantityTooLarge(u64),
    /// A bid names GPUs: only an ask offers GPUs, a bid rents whichever of the class trade.
    #[error("a bid names no GPUs (only an ask offers its GPUs)")]
    BidNamesGpus,
    /// The ask names more than [`MAX_ORDER_GPUS`] GPUs.
    #[error("the ask names {0} GPUs; at most 64 are allowed")]
    TooManyGpus(usize),
    /// The ask names one GPU twice.
    #[error("the ask names GPU {0} twice")]
    RepeatedGpu(GpuUuid),
    /// An ask carries a renter's access (only a bid's renter is granted access).
    #[error("an ask carries no access (only a bid names how its renter reaches the GPUs)")]
    AskGrantsAccess,
}

/// An order's id, chosen by its owner: 1 to [`MAX_ID_LEN`] printable ASCII characters, no
/// spaces. Unique among its owner's orders in a [`Book`](crate::Book) until the order
/// expires (another owner's ids are its own).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct OrderId(String);

impl OrderId {
    /// Checks and wraps an order id.
    pub fn new(id: impl Into<String>) -> Result<OrderId, OrderError> {
        let id = id.into();
        if id.is_empty() {
            return Err(OrderError::EmptyId);
        }
        if id.len() > MAX_ID_LEN {
            return Err(OrderError::IdTooLong(id.len()));
        }
        if !id.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(OrderError::IdNotPrintable);
        }
        Ok(OrderId(id))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for OrderId {
    type Error = OrderError;

    fn try_from(id: String) -> Result<OrderId, OrderError> {
        OrderId::new(id)
    }
}

impl From<OrderId> for String {
    fn from(id: OrderId) -> String {
        id.0
    }
}

impl fmt::Display for OrderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

/// A class of interchangeable GPUs that trade in one market (e.g. `H200 SXM`): 1 to
/// [`MAX_CLASS_LEN`] printable ASCII characters, words separated by single spaces. Which
/// classes exist is the [`Book`](crate::Book)'s to say.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct GpuClass(String);

impl GpuClass {
    /// Checks and wraps a class name.
    pub fn new(name: impl Into<String>) -> Result<GpuClass, OrderError> {
        let name = name.into();
        if name.is_empty() {
            return Err(OrderError::EmptyClass);
        }
        if name.len() > MAX_CLASS_LEN {
            return Err(OrderError::ClassTooLong(name.len()));
        }
        let words_ok = name
            .split(' ')
            .all(|word| !word.is_empty() && word.bytes().all(|b| b.is_ascii_graphic()));
        if !words_ok {
            return Err(OrderError::ClassNotPrintable);
        }
        Ok(GpuClass(name))
    }

    /// The class name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for GpuClass {
    type Error = OrderError;

    fn try_from(name: String) -> Result<GpuClass, OrderError> {
        GpuClass::new(name)
    }
}

impl From<GpuClass> for String {
    fn from(class: GpuClass) -> String {
        class.0
    }
}

impl fmt::Display for GpuClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

/// Which side of the market an order is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// A renter's offer to buy GPU-hours at up to its price.
    Bid,
    /// A provider's offer to sell GPU-hours at its price or more.
    Ask,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Side::Bid => "bid",
            Side::Ask => "ask",
        })
    }
}

/// A checked order: `quantity` GPU-hours of `class` on `side`, at `price` per GPU-hour (the
/// most a bidder pays, the least an asker accepts), owned by the holder of the Ed25519 key
/// `owner`. An ask names the GPUs it offers (`gpus`, see [`Order::offering`]; what backs them
/// is checked by [`crate::backing`]); a bid names none.
///
/// Made by [`Order::new`] (and [`Order::offering`]) or by deserialization, which run the same
/// checks. In JSON the price is `price_micro_usd`; `gpus` is left out when empty (so an order
/// without GPUs reads as it did before asks named them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "OrderFields")]
pub struct Order {
    id: OrderId,
    owner: String,
    side: Side,
    class: GpuClass,
    /// Open GPU-hours; the [`Book`](crate::Book) lowers it as the order fills.
    pub(crate) quantity: u64,
    #[serde(rename = "price_micro_usd")]
    price: Price,
    /// The GPUs an ask offers, in the order its owner named them; empty for a bid.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    gpus: Vec<GpuUuid>,
    /// How the renter reaches the GPUs it rents (a bid's; never an ask's): carried into each
    /// lease the bid becomes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    access: Option<crate::access::Access>,
}

/// An order as it arrives, before [`Order::new`] checks it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OrderFields {
    id: OrderId,
    owner: String,
    side: Side,
    class: GpuClass,
    quantity: u64,
    price_micro_usd: Price,
    #[serde(default)]
    gpus: Vec<GpuUuid>,
    #[serde(default)]
    access: Option<crate::access::Access>,
}

impl TryFrom<OrderFields> for Order {
    type Error = OrderError;

    fn try_from(o: OrderFields) -> Result<Order, OrderError> {
        Order::new(
            o.id,
            o.owner,
            o.side,
            o.class,
            o.quantity,
            o.price_micro_usd,
        )?
        .offering(o.gpus)?
        .granting(o.access)
    }
}

impl Order {
    /// Checks and makes an order. `owner` must be 64 hex digits (an Ed25519 public key, as
    /// pog's signed messages carry it); it is kept in lowercase, its canonical spelling.
    /// `quantity` must be 1 to [`MAX_QUANTITY`] GPU-hours. Id, class and price were checked
    /// when they were made.
    pub fn new(
        id: OrderId,
        owner: impl Into<String>,
        side: Side,
        class: GpuClass,
        quantity: u64,
        price: Price,
    ) -> Result<Order, OrderError> {
        let mut owner = owner.into();
        if owner.len() != 64 || !owner.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(OrderError::BadOwner);
        }
        owner.make_ascii_lowercase();
        if quantity == 0 {
            return Err(OrderError::ZeroQuantity);
        }
        if quantity > MAX_QUANTITY {
            return Err(OrderError::QuantityTooLarge(quantity));
        }
        Ok(Order {
            id,
            owner,
            side,
            class,
            quantity,
            price,
            gpus: Vec::new(),
            access: None,
        })
    }

    /// The same bid carrying how its renter reaches the GPUs it rents (`None`: none); an ask
    /// carries none.
    pub fn granting(mut self, access: Option<crate::access::Access>) -> Result<Order, OrderError> {
        if access.is_some() && self.side == Side::Ask {
            return Err(OrderError::AskGrantsAccess);
        }
        self.access = access;
        Ok(self)
    }

    /// How a bid's renter reaches the GPUs it rents.
    pub fn access(&self) -> Option<&crate::access::Access> {
        self.access.as_ref()
    }

    /// The same order offering `gpus` (replacing any named before): only an ask offers GPUs,
    /// at most [`MAX_ORDER_GPUS`], none twice. An empty list leaves the order without GPUs.
    /// Whether the GPUs back the ask (registered to its owner, proven, enough hours) is for
    /// [`crate::backing::check_ask`] to say.
    pub fn offering(mut self, gpus: Vec<GpuUuid>) -> Result<Order, OrderError> {
        if gpus.is_empty() {
            self.gpus = gpus;
            return Ok(self);
        }
        if self.side == Side::Bid {
            return Err(OrderError::BidNamesGpus);
        }
        if gpus.len() > MAX_ORDER_GPUS {
            return Err(OrderError::TooManyGpus(gpus.len()));
        }
        let mut seen = std::collections::HashSet::with_capacity(gpus.len());
        if let Some(twice) = gpus.iter().find(|g| !seen.insert(*g)) {
            return Err(OrderError::RepeatedGpu(twice.clone()));
        }
        self.gpus = gpus;
        Ok(self)
    }

    /// The GPUs an ask offers (none for a bid).
    pub fn gpus(&self) -> &[GpuUuid] {
        &self.gpus
    }

    /// The order's id.
    pub fn id(&self) -> &OrderId {
        &self.id
    }

    /// The owner's Ed25519 public key, 64 lowercase hex digits.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Bid or ask.
    pub fn side(&self) -> Side {
        self.side
    }

    /// The GPU class the order trades in.
    pub fn class(&self) -> &GpuClass {
        &self.class
    }

    /// GPU-hours still open: as submitted, less what has filled in a [`Book`](crate::Book).
    pub fn quantity(&self) -> u64 {
        self.quantity
    }

    /// The price per GPU-hour: a bid's most, an ask's least.
    pub fn price(&self) -> Price {
        self.price
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c";

    fn order(owner: &str, quantity: u64) -> Result<Order, OrderError> {
        Order::new(
            OrderId::new("o-1").unwrap(),
            owner,
            Side::Bid,
            GpuClass::new("H200 SXM").unwrap(),
            quantity,
            Price::from_usd(2.5).unwrap(),
        )
    }

    #[test]
    fn ids_are_checked() {
        assert_eq!(
            OrderId::new("renter-7/0001").unwrap().as_str(),
            "renter-7/0001"
        );
        assert_eq!(OrderId::new(""), Err(OrderError::EmptyId));
        assert_eq!(OrderId::new("a b"), Err(OrderError::IdNotPrintable));
        assert_eq!(OrderId::new("a\n"), Err(OrderError::IdNotPrintable));
        assert_eq!(OrderId::new("é"), Err(OrderError::IdNotPrintable));
        assert!(OrderId::new("x".repeat(MAX_ID_LEN)).is_ok());
        assert_eq!(
            OrderId::new("x".repeat(MAX_ID_LEN + 1)),
            Err(OrderError::IdTooLong(129))
        );
    }

    #[test]
    fn classes_are_checked() {
        assert_eq!(GpuClass::new("H200 SXM").unwrap().to_string(), "H200 SXM");
        assert_eq!(GpuClass::new(""), Err(OrderError::EmptyClass));
        for bad in [
            " ",
            " H200",
            "H200 ",
            "H200  SXM",
            "H200\tSXM",
            "H200\u{a0}SXM",
        ] {
            assert_eq!(
                GpuClass::new(bad),
                Err(OrderError::ClassNotPrintable),
                "{bad:?}"
            );
        }
        assert_eq!(
            GpuClass::new("x".repeat(MAX_CLASS_LEN + 1)),
            Err(OrderError::ClassTooLong(65))
        );
    }

    #[test]
    fn orders_are_checked_and_owners_canonical() {
        let upper = KEY.to_ascii_uppercase();
        assert_eq!(order(&upper, 3).unwrap().owner(), KEY);
        assert_eq!(order(&KEY[..63], 3), Err(OrderError::BadOwner));
        assert_eq!(order(&KEY.replace('3', "g"), 3), Err(OrderError::BadOwner));
        assert_eq!(order("", 3), Err(OrderError::BadOwner));
        assert_eq!(order(KEY, 0), Err(OrderError::ZeroQuantity));
        assert!(order(KEY, MAX_QUANTITY).is_ok());
        assert_eq!(
            order(KEY, MAX_QUANTITY + 1),
            Err(OrderError::QuantityTooLarge(MAX_QUANTITY + 1))
        );
    }

    #[test]
    fn json_runs_the_same_checks() {
        let o = order(KEY, 3).unwrap();
        let json = serde_json::to_value(&o).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "id": "o-1", "owner": KEY, "side": "bid", "class": "H200 SXM",
                "quantity": 3, "price_micro_usd": 2_500_000,
            })
        );
        assert_eq!(serde_json::from_value::<Order>(json.clone()).unwrap(), o);
        let with = |field: &str, value: serde_json::Value| {
            let mut j = json.clone();
            j[field] = value;
            serde_json::from_value::<Order>(j)
        };
        assert!(with("quantity", 0.into()).is_err());
        assert!(with("class", "".into()).is_err());
        assert!(with("id", "".into()).is_err());
        assert!(with("owner", "abc".into()).is_err());
        assert!(with("side", "buy".into()).is_err());
        assert!(with("price_micro_usd", (-1).into()).is_err());
        assert!(with("price_micro_usd", 1_000_000_000_001u64.into()).is_err());
        assert!(with("extra", 1.into()).is_err());
        // A bid names no GPUs.
        assert_eq!(
            with("gpus", serde_json::json!(["GPU-1"]))
                .unwrap_err()
                .to_string(),
            "a bid names no GPUs (only an ask offers its GPUs)"
        );
        assert!(with("gpus", serde_json::json!([])).is_ok());
    }

    #[test]
    fn asks_name_their_gpus_once_each() {
        let gpu = |u: &str| GpuUuid::new(u).unwrap();
        let ask = Order::new(
            OrderId::new("a-1").unwrap(),
            KEY,
            Side::Ask,
            GpuClass::new("H200 SXM").unwrap(),
            3,
            Price::from_usd(2.5).unwrap(),
        )
        .unwrap();
        let offered = ask
            .clone()
            .offering(vec![gpu("GPU-1"), gpu("GPU-2")])
            .unwrap();
        assert_eq!(offered.gpus(), [gpu("GPU-1"), gpu("GPU-2")]);
        let json = serde_json::to_value(&offered).unwrap();
        assert_eq!(json["gpus"], serde_json::json!(["GPU-1", "GPU-2"]));
        assert_eq!(serde_json::from_value::<Order>(json).unwrap(), offered);
        // Without GPUs the field is left out, as before asks named them.
        assert!(serde_json::to_value(&ask).unwrap().get("gpus").is_none());
        assert_eq!(
            ask.clone().offering(vec![gpu("GPU-1"), gpu("GPU-1")]),
            Err(OrderError::RepeatedGpu(gpu("GPU-1")))
        );
        let many: Vec<GpuUuid> = (0..=MAX_ORDER_GPUS)
            .map(|i| gpu(&format!("GPU-{i}")))
            .collect();
        assert_eq!(
            ask.clone().offering(many),
            Err(OrderError::TooManyGpus(MAX_ORDER_GPUS + 1))
        );
        let mut json = serde_json::to_value(&ask).unwrap();
        json["gpus"] = serde_json::json!(["GPU 1"]);
        assert!(
            serde_json::from_value::<Order>(json).is_err(),
            "not a GPU UUID"
        );
        assert_eq!(
            order(KEY, 1).unwrap().offering(vec![gpu("GPU-1")]),
            Err(OrderError::BidNamesGpus)
        );
    }
}
