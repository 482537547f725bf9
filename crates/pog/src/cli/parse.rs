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
