//! Figures rounded for people: the services' log fields. A ratio like `0.00019104579999999999`
//! tells an operator nothing its first digits do not. Signed records and their JSON bodies keep
//! every bit (they must round-trip exactly); only what is shown is rounded.

/// Significant digits of a figure in a log line.
pub const LOG_DIGITS: u32 = 4;

/// `x` rounded to `digits` significant digits (at least 1), as the nearest `f64`, so that it
/// prints short (`17.590000000000003` → `17.59`). Zero, NaN and infinities come back as they
/// are.
pub fn significant(x: f64, digits: u32) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let magnitude = x.abs().log10().floor() as i32;
    // Decimal places to keep: negative above the digits kept (round to tens, hundreds, …).
    let places = digits.max(1) as i32 - 1 - magnitude;
    let rounded = if places >= 0 {
        // Dividing by an exact power of ten gives the f64 nearest the decimal, which prints
        // as that decimal.
        let scale = 10f64.powi(places);
        (x * scale).round() / scale
    } else {
        let scale = 10f64.powi(-places);
        (x / scale).round() * scale
    };
    // Beyond f64's range of exact powers of ten the scaling itself is inexact: keep `x`.
    if rounded.is_finite() {
        rounded
    } else {
        x
    }
}

/// `x` rounded to [`LOG_DIGITS`] significant digits, for a log field.
pub fn for_log(x: f64) -> f64 {
    significant(x, LOG_DIGITS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_print_short() {
        assert_eq!(
            for_log(0.000_191_045_799_999_999_99).to_string(),
            "0.000191"
        );
        assert_eq!(for_log(17.590_000_000_000_003).to_string(), "17.59");
        assert_eq!(for_log(0.280_853_222_222_222_2).to_string(), "0.2809");
        assert_eq!(for_log(0.000_488_281_25).to_string(), "0.0004883");
        assert_eq!(for_log(-2.5).to_string(), "-2.5");
        assert_eq!(for_log(123_456.0).to_string(), "123500");
        assert_eq!(significant(9.999_9, 2).to_string(), "10");
        assert_eq!(significant(1.234, 0).to_string(), "1");
        assert!((for_log(1.234_56e300) / 1.235e300 - 1.0).abs() < 1e-12);
        assert_eq!(for_log(5e-324), 5e-324);
    }

    #[test]
    fn zero_and_non_finite_come_back_unchanged() {
        assert_eq!(for_log(0.0), 0.0);
        assert!(for_log(f64::NAN).is_nan());
        assert_eq!(for_log(f64::INFINITY), f64::INFINITY);
        assert_eq!(for_log(f64::NEG_INFINITY), f64::NEG_INFINITY);
    }
}
