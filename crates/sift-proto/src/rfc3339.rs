//! RFC 3339 times to and from nanoseconds since the Unix epoch, exactly.
//!
//! A stream subscription may start at a time (`time:2026-11-24T18:00:00Z`),
//! and people type and read such times, so the protocol crate needs one date
//! format in both directions. It is written here rather than taken from a
//! date library because the need is narrow (one format, UTC output, the
//! proleptic Gregorian calendar, no time zone database) and because the
//! codec must stay small and dependency-light enough to fuzz and to trust:
//! the whole conversion is integer arithmetic on a handful of fields, and
//! every value a `u64` of nanoseconds can hold formats and parses back to
//! itself.
//!
//! Accepted input: `YYYY-MM-DDThh:mm:ss`, optionally `.` and 1 to 9 digits
//! of fractional seconds, then `Z` or a `+hh:mm` / `-hh:mm` offset. The `T`
//! and `Z` may be lower case and the `T` may be a space, as RFC 3339 §5.6
//! allows. A leap second (`:60`) is accepted and counts as the first instant
//! of the next minute, since Unix time has no place for it. Output is always
//! UTC with `Z`, with the fraction only when it is not zero, cut after its
//! last significant digit.

use std::fmt::Write as _;

/// Nanoseconds in a second.
const NANOS_PER_SECOND: u64 = 1_000_000_000;

/// Seconds in a day (Unix time has no leap seconds).
const SECONDS_PER_DAY: i64 = 86_400;

/// Seconds in an hour.
const SECONDS_PER_HOUR: i64 = 3_600;

/// Seconds in a minute.
const SECONDS_PER_MINUTE: i64 = 60;

/// Most digits of fractional seconds: a nanosecond is the finest unit kept.
const FRACTION_DIGITS_MAX: usize = 9;

/// Bytes of `YYYY-MM-DDThh:mm:ss`, the part every time has.
const DATE_TIME_BYTES: usize = 19;

/// Bytes of a numeric offset, `+hh:mm`.
const OFFSET_BYTES: usize = 6;

/// Days between 0000-03-01 and 1970-01-01 in the proleptic Gregorian
/// calendar: the shift between the era arithmetic below and the Unix epoch.
const EPOCH_SHIFT_DAYS: i64 = 719_468;

/// Days in a 400-year Gregorian era.
const DAYS_PER_ERA: i64 = 146_097;

/// Years in a Gregorian era.
const YEARS_PER_ERA: i64 = 400;

/// Byte positions of the separators in `YYYY-MM-DDThh:mm:ss`.
const DATE_DASHES: [usize; 2] = [4, 7];
/// Position of the date/time separator (`T`).
const DATE_TIME_SEPARATOR: usize = 10;
/// Positions of the colons of the time of day.
const TIME_COLONS: [usize; 2] = [13, 16];

/// The fields of a calendar date and time of day, as written.
struct Civil {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
}

/// Parses an RFC 3339 time (`2026-11-24T18:00:00Z`; fractional seconds and
/// `+hh:mm` offsets allowed) into nanoseconds since the Unix epoch.
///
/// Errors name the input and what is wrong with it, for a command line to
/// print as is. Times before 1970 and after the last instant a `u64` of
/// nanoseconds holds (in 2554) are refused rather than wrapped.
pub fn parse_rfc3339_ns(text: &str) -> Result<u64, String> {
    let bad = |why: &str| format!("time {text:?}: {why} (expected RFC 3339, like 2026-11-24T18:00:00Z)");
    let bytes = text.as_bytes();
    let civil = parse_civil(bytes).map_err(|why| bad(&why))?;
    let (fraction_ns, zone) = parse_fraction(&bytes[DATE_TIME_BYTES..]).map_err(|why| bad(&why))?;
    let offset_s = parse_offset(zone).map_err(|why| bad(&why))?;
    let seconds = days_from_civil(civil.year, civil.month, civil.day) * SECONDS_PER_DAY
        + i64::from(civil.hour) * SECONDS_PER_HOUR
        + i64::from(civil.minute) * SECONDS_PER_MINUTE
        + i64::from(civil.second)
        - offset_s;
    let seconds = u64::try_from(seconds).map_err(|_| bad("before 1970-01-01T00:00:00Z"))?;
    seconds.checked_mul(NANOS_PER_SECOND).and_then(|nanos| nanos.checked_add(fraction_ns)).ok_or_else(|| {
        bad(&format!("after {}, the last time 64 bits of nanoseconds hold", format_rfc3339_ns(u64::MAX)))
    })
}

/// Formats nanoseconds since the Unix epoch as RFC 3339 in UTC:
/// `2026-11-24T18:00:00Z`, or `2026-11-24T18:00:00.25Z` when there is a
/// fraction of a second. [`parse_rfc3339_ns`] reads it back exactly.
pub fn format_rfc3339_ns(nanos: u64) -> String {
    // About 1.8e10 seconds at most: an i64 holds them with room to spare.
    let seconds = i64::try_from(nanos / NANOS_PER_SECOND).unwrap_or(i64::MAX);
    let fraction = nanos % NANOS_PER_SECOND;
    let (year, month, day) = civil_from_days(seconds.div_euclid(SECONDS_PER_DAY));
    let second_of_day = seconds.rem_euclid(SECONDS_PER_DAY);
    let hour = second_of_day / SECONDS_PER_HOUR;
    let minute = second_of_day % SECONDS_PER_HOUR / SECONDS_PER_MINUTE;
    let second = second_of_day % SECONDS_PER_MINUTE;
    let mut text = format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}");
    if fraction != 0 {
        let digits = format!("{fraction:09}");
        // Writing to a String cannot fail.
        let _ = write!(text, ".{}", digits.trim_end_matches('0'));
    }
    text.push('Z');
    text
}

/// The date and time of day at the front of `bytes`, checked field by field
/// (ranges, and the day against its month in its year).
fn parse_civil(bytes: &[u8]) -> Result<Civil, String> {
    if bytes.len() <= DATE_TIME_BYTES {
        return Err("too short for a date, a time and a zone".into());
    }
    if DATE_DASHES.iter().any(|&at| bytes[at] != b'-') {
        return Err("the date must be YYYY-MM-DD".into());
    }
    if !matches!(bytes[DATE_TIME_SEPARATOR], b'T' | b't' | b' ') {
        return Err("the date and the time must be separated by T".into());
    }
    if TIME_COLONS.iter().any(|&at| bytes[at] != b':') {
        return Err("the time must be hh:mm:ss".into());
    }
    let civil = Civil {
        year: i64::from(digits(bytes, 0..4, "year")?),
        month: digits(bytes, 5..7, "month")?,
        day: digits(bytes, 8..10, "day")?,
        hour: digits(bytes, 11..13, "hour")?,
        minute: digits(bytes, 14..16, "minute")?,
        second: digits(bytes, 17..19, "second")?,
    };
    if !(1..=12).contains(&civil.month) || civil.day == 0 || civil.day > days_in_month(civil.year, civil.month) {
        return Err(format!("there is no day {:02} in {:04}-{:02}", civil.day, civil.year, civil.month));
    }
    if civil.hour > 23 || civil.minute > 59 || civil.second > 60 {
        return Err("no such time of day".into());
    }
    Ok(civil)
}

/// The fractional seconds (as nanoseconds) at the front of `rest`, if any,
/// and what follows them: the zone.
fn parse_fraction(rest: &[u8]) -> Result<(u64, &[u8]), String> {
    let Some(after_dot) = rest.strip_prefix(b".") else {
        return Ok((0, rest));
    };
    let count = after_dot.iter().take_while(|byte| byte.is_ascii_digit()).count();
    if count == 0 || count > FRACTION_DIGITS_MAX {
        return Err(format!("fractional seconds need 1 to {FRACTION_DIGITS_MAX} digits, found {count}"));
    }
    let value = after_dot[..count].iter().fold(0u64, |value, digit| value * 10 + u64::from(digit - b'0'));
    let scale = 10u64.pow((FRACTION_DIGITS_MAX - count) as u32);
    Ok((value * scale, &after_dot[count..]))
}

/// The zone's offset from UTC in seconds: `Z` is 0, `+01:30` is 5 400.
fn parse_offset(zone: &[u8]) -> Result<i64, String> {
    if matches!(zone, b"Z" | b"z") {
        return Ok(0);
    }
    let sign = match zone.first() {
        Some(b'+') => 1,
        Some(b'-') => -1,
        _ => return Err("the zone must be Z or +hh:mm".into()),
    };
    if zone.len() != OFFSET_BYTES || zone[3] != b':' {
        return Err("the zone must be Z or +hh:mm".into());
    }
    let hours = digits(zone, 1..3, "offset hours")?;
    let minutes = digits(zone, 4..6, "offset minutes")?;
    if hours > 23 || minutes > 59 {
        return Err("no such offset".into());
    }
    Ok(sign * (i64::from(hours) * SECONDS_PER_HOUR + i64::from(minutes) * SECONDS_PER_MINUTE))
}

/// The decimal number in `bytes[range]`, which must be all ASCII digits.
/// Works on bytes, so that no input can split a character.
fn digits(bytes: &[u8], range: std::ops::Range<usize>, what: &str) -> Result<u32, String> {
    let part = &bytes[range];
    if !part.iter().all(u8::is_ascii_digit) {
        return Err(format!("the {what} {:?} is not a number", String::from_utf8_lossy(part)));
    }
    Ok(part.iter().fold(0, |value, digit| value * 10 + u32::from(digit - b'0')))
}

/// True for a Gregorian leap year.
fn is_leap_year(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

/// Days in `month` (1-12) of `year`.
fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap_year(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to `year-month-day` (proleptic Gregorian), after
/// Howard Hinnant's `days_from_civil`: years are counted from March, so that
/// the leap day falls at the end of the year, in 400-year eras.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(YEARS_PER_ERA);
    let year_of_era = year - era * YEARS_PER_ERA;
    let month_from_march = i64::from((month + 9) % 12);
    let day_of_year = (153 * month_from_march + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * DAYS_PER_ERA + day_of_era - EPOCH_SHIFT_DAYS
}

/// The date `days` after 1970-01-01: the inverse of [`days_from_civil`].
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let days = days + EPOCH_SHIFT_DAYS;
    let era = days.div_euclid(DAYS_PER_ERA);
    let day_of_era = days - era * DAYS_PER_ERA;
    let year_of_era = (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 { month_from_march + 3 } else { month_from_march - 9 };
    let year = year_of_era + era * YEARS_PER_ERA + i64::from(month <= 2);
    // Both are small by construction (1-12 and 1-31).
    (year, u32::try_from(month).unwrap_or(1), u32::try_from(day).unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants_convert_exactly() {
        assert_eq!(parse_rfc3339_ns("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(parse_rfc3339_ns("2000-03-01T00:00:00Z"), Ok(951_868_800_000_000_000));
        assert_eq!(parse_rfc3339_ns("2024-02-29T12:00:00.5Z"), Ok(1_709_208_000_500_000_000));
        assert_eq!(parse_rfc3339_ns("2024-02-29T13:30:00+01:30"), parse_rfc3339_ns("2024-02-29T12:00:00Z"));
        assert_eq!(format_rfc3339_ns(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339_ns(u64::MAX), "2554-07-21T23:34:33.709551615Z");
    }

    #[test]
    fn days_and_dates_are_inverse() {
        for days in [-1, 0, 59, 60, 365, 10_957, 11_016, 200_000] {
            let (year, month, day) = civil_from_days(days);
            assert_eq!(days_from_civil(year, month, day), days, "{year}-{month}-{day}");
        }
    }
}
