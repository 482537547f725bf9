//! Prices per GPU-hour: validated, non-negative, finite, in integer micro-dollars.
//!
//! A [`Price`] can only be made through a check ([`Price::from_micro_usd`],
//! [`Price::from_usd`], [`str::parse`], or deserialization), so every price the market holds is
//! within `0 ..= `[`Price::MAX`]. Integers make the auctions exact: sums, midpoints and
//! comparisons never round except where a rule says so.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Micro-dollars in one dollar.
pub const MICROS_PER_USD: u64 = 1_000_000;

/// The most that one GPU-hour may cost in dollars; anything above is refused as absurd.
pub const MAX_USD: u64 = 1_000_000;

/// A price per GPU-hour in integer micro-dollars, from 0 to [`Price::MAX`] ($1,000,000).
///
/// Serialized as the bare integer of micro-dollars (fields that hold one are named
/// `*_micro_usd`); deserialization applies the same ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "u64", into = "u64")]
pub struct Price(u64);

/// Why a price was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PriceError {
    /// NaN or an infinity.
    #[error("the price is not a finite number")]
    NotFinite,
    /// Below zero.
    #[error("the price is negative")]
    Negative,
    /// Above [`Price::MAX`].
    #[error("the price is above the ceiling of $1,000,000 per GPU-hour")]
    Absurd,
    /// A decimal with a non-zero digit past the sixth place (finer than a micro-dollar).
    #[error("the price {0:?} is finer than a micro-dollar (more than 6 decimal places)")]
    TooPrecise(String),
    /// Text that is not a plain decimal number of dollars such as `2.45`.
    #[error("the price {0:?} is not a decimal number of dollars such as 2.45")]
    Malformed(String),
}

impl Price {
    /// Free.
    pub const ZERO: Price = Price(0);
    /// The ceiling: $1,000,000 per GPU-hour.
    pub const MAX: Price = Price(MAX_USD * MICROS_PER_USD);

    /// A price of `micro_usd` micro-dollars per GPU-hour; refused above [`Price::MAX`].
    pub fn from_micro_usd(micro_usd: u64) -> Result<Price, PriceError> {
        if micro_usd > Price::MAX.0 {
            return Err(PriceError::Absurd);
        }
        Ok(Price(micro_usd))
    }

    /// A price of `usd` dollars per GPU-hour, rounded to the nearest micro-dollar; NaN,
    /// infinities, negative values and values above $1,000,000 are refused. `-0.0` is zero.
    pub fn from_usd(usd: f64) -> Result<Price, PriceError> {
        if !usd.is_finite() {
            return Err(PriceError::NotFinite);
        }
        if usd < 0.0 {
            return Err(PriceError::Negative);
        }
        if usd > MAX_USD as f64 {
            return Err(PriceError::Absurd);
        }
        // At most 10^12 after scaling: exact in an f64, and in range of u64.
        Price::from_micro_usd((usd * MICROS_PER_USD as f64).round() as u64)
    }

    /// The price in micro-dollars per GPU-hour.
    pub const fn micro_usd(self) -> u64 {
        self.0
    }

    /// The price halfway between two prices, rounded down to the micro-dollar; always a
    /// valid price, since it lies between two.
    pub fn midpoint(self, other: Price) -> Price {
        // Both at most 10^12: the sum cannot overflow.
        Price((self.0 + other.0) / 2)
    }
}

impl TryFrom<u64> for Price {
    type Error = PriceError;

    fn try_from(micro_usd: u64) -> Result<Price, PriceError> {
        Price::from_micro_usd(micro_usd)
    }
}

impl From<Price> for u64 {
    fn from(price: Price) -> u64 {
        price.0
    }
}

/// Dollars with at least two decimals and at most six (`2.50`, `0.000001`); what
/// [`Price::from_str`] reads back.
impl fmt::Display for Price {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (whole, frac) = (self.0 / MICROS_PER_USD, self.0 % MICROS_PER_USD);
        let digits = format!("{frac:06}");
        let kept = digits.trim_end_matches('0').len().max(2);
        write!(f, "{whole}.{}", &digits[..kept])
    }
}

/// Reads a plain decimal number of dollars (`3`, `2.45`, `0.000001`), exactly, without going
/// through floating point. Surrounding whitespace is ignored; `-0` is zero; `nan` and `inf`
/// are [`PriceError::NotFinite`]; a minus sign on anything else is [`PriceError::Negative`];
/// exponents, `+`, `$` and thousands separators are [`PriceError::Malformed`].
impl FromStr for Price {
    type Err = PriceError;

    fn from_str(text: &str) -> Result<Price, PriceError> {
        let trimmed = text.trim();
        let (negative, magnitude) = match trimmed.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, trimmed),
        };
        let lower = magnitude.to_ascii_lowercase();
        if matches!(lower.as_str(), "nan" | "inf" | "infinity") {
            return Err(PriceError::NotFinite);
        }
        match parse_magnitude(magnitude, text) {
            Ok(micro) if micro == 0 || !negative => Price::from_micro_usd(micro),
            Ok(_) | Err(PriceError::Absurd) if negative => Err(PriceError::Negative),
            other => other.and_then(Price::from_micro_usd),
        }
    }
}

/// `digits[.digits]` to micro-dollars; `Absurd` when the whole part alone is past the ceiling.
fn parse_magnitude(magnitude: &str, original: &str) -> Result<u64, PriceError> {
    let malformed = || PriceError::Malformed(original.to_string());
    let (whole, frac) = match magnitude.split_once('.') {
        Some((whole, frac)) => (whole, frac),
        None => (magnitude, ""),
    };
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(whole) || (magnitude.contains('.') && !all_digits(frac)) {
        return Err(malformed());
    }
    let significant = whole.trim_start_matches('0');
    if significant.len() > 7 {
        return Err(PriceError::Absurd);
    }
    let whole: u64 = if significant.is_empty() {
        0
    } else {
        significant.parse().map_err(|_| malformed())?
    };
    let (kept, rest) = frac.split_at(frac.len().min(6));
    if rest.bytes().any(|b| b != b'0') {
        return Err(PriceError::TooPrecise(original.to_string()));
    }
    let frac: u64 = format!("{kept:0<6}").parse().map_err(|_| malformed())?;
    Ok(whole * MICROS_PER_USD + frac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_are_checked_and_rounded_to_the_micro_dollar() {
        assert_eq!(Price::from_usd(2.45).unwrap().micro_usd(), 2_450_000);
        assert_eq!(Price::from_usd(0.1).unwrap().micro_usd(), 100_000);
        assert_eq!(Price::from_usd(0.000_000_4).unwrap(), Price::ZERO);
        assert_eq!(Price::from_usd(-0.0).unwrap(), Price::ZERO);
        assert_eq!(Price::from_usd(1_000_000.0).unwrap(), Price::MAX);
        assert_eq!(Price::from_usd(f64::NAN), Err(PriceError::NotFinite));
        assert_eq!(Price::from_usd(f64::INFINITY), Err(PriceError::NotFinite));
        assert_eq!(
            Price::from_usd(f64::NEG_INFINITY),
            Err(PriceError::NotFinite)
        );
        assert_eq!(Price::from_usd(-0.01), Err(PriceError::Negative));
        assert_eq!(Price::from_usd(1_000_000.01), Err(PriceError::Absurd));
        assert_eq!(Price::from_usd(1e300), Err(PriceError::Absurd));
    }

    #[test]
    fn integers_above_the_ceiling_are_refused() {
        assert_eq!(Price::from_micro_usd(1_000_000_000_000), Ok(Price::MAX));
        assert_eq!(
            Price::from_micro_usd(1_000_000_000_001),
            Err(PriceError::Absurd)
        );
        assert_eq!(Price::from_micro_usd(u64::MAX), Err(PriceError::Absurd));
    }

    #[test]
    fn text_is_read_exactly() {
        let micro = |s: &str| s.parse::<Price>().map(Price::micro_usd);
        assert_eq!(micro("2.45"), Ok(2_450_000));
        assert_eq!(micro(" 3 "), Ok(3_000_000));
        assert_eq!(micro("0.000001"), Ok(1));
        assert_eq!(micro("007.5"), Ok(7_500_000));
        assert_eq!(micro("1.5000000"), Ok(1_500_000));
        assert_eq!(micro("-0"), Ok(0));
        assert_eq!(micro("1000000"), Ok(1_000_000_000_000));
        assert_eq!(micro("1000000.000001"), Err(PriceError::Absurd));
        assert_eq!(micro("99999999999999999999999"), Err(PriceError::Absurd));
        assert_eq!(micro("-1"), Err(PriceError::Negative));
        assert_eq!(micro("-99999999999999999999"), Err(PriceError::Negative));
        for not_finite in ["NaN", "nan", "inf", "-inf", "Infinity"] {
            assert_eq!(
                micro(not_finite),
                Err(PriceError::NotFinite),
                "{not_finite}"
            );
        }
        assert!(matches!(micro("1.0000001"), Err(PriceError::TooPrecise(_))));
        for malformed in [
            "", "-", ".", "1.", ".5", "1e3", "+1", "$2", "1,000", "1.2.3", "--1",
        ] {
            assert!(
                matches!(micro(malformed), Err(PriceError::Malformed(_))),
                "{malformed:?}: {:?}",
                micro(malformed)
            );
        }
    }

    #[test]
    fn midpoints_round_down() {
        let p = |micro| Price::from_micro_usd(micro).unwrap();
        assert_eq!(p(1).midpoint(p(2)), p(1));
        assert_eq!(p(2).midpoint(p(1)), p(1));
        assert_eq!(p(4).midpoint(p(8)), p(6));
        assert_eq!(Price::MAX.midpoint(Price::MAX), Price::MAX);
    }

    #[test]
    fn display_is_dollars_and_reads_back() {
        for (micro, shown) in [
            (0, "0.00"),
            (1, "0.000001"),
            (2_500_000, "2.50"),
            (2_450_000, "2.45"),
            (3_141_593, "3.141593"),
            (1_000_000_000_000, "1000000.00"),
        ] {
            let price = Price::from_micro_usd(micro).unwrap();
            assert_eq!(price.to_string(), shown);
            assert_eq!(shown.parse::<Price>(), Ok(price));
        }
    }

    #[test]
    fn serde_is_the_integer_with_the_ceiling() {
        let price = Price::from_micro_usd(2_450_000).unwrap();
        assert_eq!(serde_json::to_string(&price).unwrap(), "2450000");
        assert_eq!(serde_json::from_str::<Price>("2450000").unwrap(), price);
        assert!(serde_json::from_str::<Price>("1000000000001").is_err());
        assert!(serde_json::from_str::<Price>("-1").is_err());
        assert!(serde_json::from_str::<Price>("2.5").is_err());
    }
}
