//! Value parsers that several commands' flags share.

use std::time::Duration;

/// A time bound: up to a day, in milliseconds.
pub(super) fn parse_milliseconds(s: &str) -> Result<f64, String> {
    let ms: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of milliseconds"))?;
    if !(ms > 0.0 && ms <= 86_400_000.0) {
        return Err(format!("{ms} ms is outside 0-86400000 ms"));
    }
    Ok(ms)
}

/// A short period: 0.1 s to an hour, in seconds.
pub(super) fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    if !(0.1..=3600.0).contains(&secs) {
        return Err(format!("{secs} s is outside 0.1-3600 s"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A size in bytes: a whole number, optionally followed by K, M, G or T (powers of 1024,
/// with or without "iB" or "B"), e.g. 4096, 256M, 2TiB; one that overflows 64 bits is refused.
pub(super) fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not a size in bytes (e.g. 4096, 256M, 2T)"))?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => return Err(format!("{s:?}: the unit must be K, M, G or T")),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("{s:?} overflows 64 bits of bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_their_units_and_overflow_is_refused() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("256M"), Ok(256 << 20));
        assert_eq!(parse_bytes("2TiB"), Ok(2 << 40));
        assert_eq!(parse_bytes("3 g"), Ok(3 << 30));
        assert!(parse_bytes("").is_err());
        assert!(parse_bytes("12X").is_err());
        assert!(parse_bytes("-1").is_err());
        assert!(parse_bytes("99999999999T")
            .unwrap_err()
            .contains("overflows"));
        assert!(parse_bytes("18446744073709551616").is_err());
    }
}
