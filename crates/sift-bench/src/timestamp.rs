//! UTC timestamps for reports and result directories, without a date crate.

use std::time::{SystemTime, UNIX_EPOCH};

/// A moment in UTC, to the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UtcTime {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
}

const SECONDS_PER_DAY: u64 = 86_400;

impl UtcTime {
    /// The current time (the Unix epoch if the clock is before it).
    pub fn now() -> UtcTime {
        let seconds = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs());
        UtcTime::from_unix_seconds(seconds)
    }

    /// The time `seconds` after 1970-01-01T00:00:00Z.
    pub fn from_unix_seconds(seconds: u64) -> UtcTime {
        let (year, month, day) = civil_from_days((seconds / SECONDS_PER_DAY) as i64);
        let in_day = (seconds % SECONDS_PER_DAY) as u32;
        UtcTime { year, month, day, hour: in_day / 3600, minute: in_day / 60 % 60, second: in_day % 60 }
    }

    /// ISO 8601 / RFC 3339 form: `2024-05-01T12:34:56Z`.
    pub fn rfc3339(&self) -> String {
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }

    /// Compact form for file names: `20240501T123456Z`.
    pub fn compact(&self) -> String {
        format!(
            "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }
}

/// Proleptic Gregorian (year, month, day) of a day count since 1970-01-01,
/// after Howard Hinnant's `civil_from_days`: shifting the year to start in
/// March puts the leap day last, so each 400-year era has a fixed shape.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    const DAYS_PER_ERA: i64 = 146_097;
    let shifted = days + 719_468;
    let era = shifted.div_euclid(DAYS_PER_ERA);
    let day_of_era = shifted.rem_euclid(DAYS_PER_ERA);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = if month_from_march < 10 { month_from_march + 3 } else { month_from_march - 9 } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_moments_format_as_expected() {
        assert_eq!(UtcTime::from_unix_seconds(0).rfc3339(), "1970-01-01T00:00:00Z");
        // 2000-02-29 (a leap day in a century year divisible by 400) 12:34:56.
        assert_eq!(UtcTime::from_unix_seconds(951_827_696).rfc3339(), "2000-02-29T12:34:56Z");
        // 2024-12-31T23:59:59Z, the last second of a leap year.
        assert_eq!(UtcTime::from_unix_seconds(1_735_689_599).compact(), "20241231T235959Z");
        assert_eq!(UtcTime::from_unix_seconds(1_735_689_600).rfc3339(), "2025-01-01T00:00:00Z");
        // 2100 is not a leap year: the day after 2100-02-28 is 2100-03-01.
        assert_eq!(UtcTime::from_unix_seconds(4_107_542_400).rfc3339(), "2100-03-01T00:00:00Z");
    }

    #[test]
    fn now_is_after_this_code_was_written() {
        assert!(UtcTime::now().compact().as_str() > "20250101T000000Z");
    }
}
