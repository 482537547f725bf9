//! `Reading<T>`: one fact as a source reported it, or why it could not be read.
//!
//! Every field the device layer collects is a `Reading`, so that one failing NVML call, a
//! missing sysfs file or a hung `nvidia-smi` costs that one field (with its reason) and never
//! the whole report.

use serde::{Deserialize, Serialize};

/// A value from one source, or the reason it is unavailable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reading<T> {
    /// The source reported this value.
    Value(T),
    /// The source could not be read; the reason.
    Unavailable(String),
}

impl<T> Reading<T> {
    /// An unavailable reading with its reason.
    pub fn unavailable(reason: impl Into<String>) -> Self {
        Reading::Unavailable(reason.into())
    }

    /// The value, if there is one.
    pub fn value(&self) -> Option<&T> {
        match self {
            Reading::Value(v) => Some(v),
            Reading::Unavailable(_) => None,
        }
    }

    /// Converts the value, keeping the reason of an unavailable reading.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Reading<U> {
        match self {
            Reading::Value(v) => Reading::Value(f(v)),
            Reading::Unavailable(why) => Reading::Unavailable(why),
        }
    }

    /// Chains a second fallible step onto a value.
    pub fn and_then<U>(self, f: impl FnOnce(T) -> Reading<U>) -> Reading<U> {
        match self {
            Reading::Value(v) => f(v),
            Reading::Unavailable(why) => Reading::Unavailable(why),
        }
    }

    /// Borrowing view, for comparisons without moving.
    pub fn as_ref(&self) -> Reading<&T> {
        match self {
            Reading::Value(v) => Reading::Value(v),
            Reading::Unavailable(why) => Reading::Unavailable(why.clone()),
        }
    }
}

impl<T, E: std::fmt::Display> From<Result<T, E>> for Reading<T> {
    fn from(result: Result<T, E>) -> Self {
        match result {
            Ok(v) => Reading::Value(v),
            Err(e) => Reading::Unavailable(e.to_string()),
        }
    }
}

impl<T: std::fmt::Display> std::fmt::Display for Reading<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reading::Value(v) => v.fmt(f),
            Reading::Unavailable(why) => write!(f, "unavailable ({why})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serializes_value_and_reason_distinctly() {
        let ok: Reading<u32> = Reading::Value(7);
        let gone: Reading<u32> = Reading::unavailable("NVML: Not Supported");
        assert_eq!(serde_json::to_string(&ok).unwrap(), r#"{"value":7}"#);
        assert_eq!(
            serde_json::to_string(&gone).unwrap(),
            r#"{"unavailable":"NVML: Not Supported"}"#
        );
        let back: Reading<u32> = serde_json::from_str(r#"{"unavailable":"x"}"#).unwrap();
        assert_eq!(back.value(), None);
        assert_eq!(gone.to_string(), "unavailable (NVML: Not Supported)");
    }

    #[test]
    fn seeds_are_exact_hex_strings() {
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct Seeded {
            #[serde(with = "crate::hex_u64")]
            seed: u64,
        }
        let big = Seeded { seed: u64::MAX - 1 };
        let json = serde_json::to_string(&big).unwrap();
        assert_eq!(json, r#"{"seed":"0xfffffffffffffffe"}"#);
        assert_eq!(serde_json::from_str::<Seeded>(&json).unwrap(), big);
        assert!(serde_json::from_str::<Seeded>(r#"{"seed":"0xzz"}"#).is_err());
    }
}
