//! Dates and times as the text protocol renders them, to the numbers Arrow stores.
//!
//! The server renders them in one form: `YYYY-MM-DD`, `YYYY-MM-DD hh:mm:ss[.f]` and
//! `[-]h:mm:ss[.f]` (up to 6 fractional digits, hours up to 838). Anything else is refused
//! (`bad_value`). A date outside the calendar (a zero date, a zero month or day, 30 February
//! stored under ALLOW_INVALID_DATES) is a `zero_date`, as in the reference path, whose Python
//! `datetime` refuses the same values.

use crate::builders::{civil_days, ValueError, US_PER_DAY, US_PER_SECOND};

fn bad_text(kind: &str, text: &[u8]) -> ValueError {
    ("bad_value", format!("{kind} text {:?}", String::from_utf8_lossy(text)))
}

fn not_a_date(text: &[u8]) -> ValueError {
    ("zero_date", String::from_utf8_lossy(text).into_owned())
}

/// The decimal number of an all-digit slice (`None` for an empty one or any other byte).
fn digits(bytes: &[u8]) -> Option<i64> {
    if bytes.is_empty() || bytes.len() > 9 {
        return None;
    }
    bytes.iter().try_fold(0i64, |acc, b| b.is_ascii_digit().then(|| acc * 10 + (b - b'0') as i64))
}

/// Microseconds of an optional `.f{1,6}` suffix (the rest of `text` after the seconds).
fn fraction(rest: &[u8]) -> Option<i64> {
    match rest {
        [] => Some(0),
        [b'.', f @ ..] if (1..=6).contains(&f.len()) => Some(digits(f)? * 10i64.pow(6 - f.len() as u32)),
        _ => None,
    }
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        _ => 31,
    }
}

/// `YYYY-MM-DD` at the start of `text`: days since 1970-01-01.
fn date_part(text: &[u8], whole: &[u8]) -> Result<i64, ValueError> {
    let parse = |range: std::ops::Range<usize>| text.get(range).and_then(digits);
    let (year, month, day) = match (parse(0..4), parse(5..7), parse(8..10)) {
        (Some(y), Some(m), Some(d)) if text[4] == b'-' && text[7] == b'-' => (y, m, d),
        _ => return Err(bad_text("DATE", whole)),
    };
    if year < 1 || !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err(not_a_date(whole));
    }
    civil_days(year, month as u32, day as u32).map_err(|_| not_a_date(whole))
}

/// A DATE: days since 1970-01-01.
pub fn date(text: &[u8]) -> Result<i64, ValueError> {
    if text.len() != 10 {
        return Err(bad_text("DATE", text));
    }
    date_part(text, text)
}

/// A DATETIME or a TIMESTAMP (read in a UTC session): microseconds since 1970-01-01 00:00:00.
pub fn datetime(text: &[u8]) -> Result<i64, ValueError> {
    if text.len() < 19 || text[10] != b' ' || text[13] != b':' || text[16] != b':' {
        return Err(bad_text("DATETIME", text));
    }
    let days = date_part(&text[..10], text)?;
    let parse = |range: std::ops::Range<usize>| digits(&text[range]);
    let (hour, minute, second, micros) = match (parse(11..13), parse(14..16), parse(17..19), fraction(&text[19..])) {
        (Some(h), Some(m), Some(s), Some(us)) => (h, m, s, us),
        _ => return Err(bad_text("DATETIME", text)),
    };
    if hour > 23 || minute > 59 || second > 59 {
        return Err(not_a_date(text));
    }
    Ok(days * US_PER_DAY + ((hour * 60 + minute) * 60 + second) * US_PER_SECOND + micros)
}

/// A TIME: signed microseconds (the sign covers the fraction too: `-00:00:01.5` is -1.5 s).
pub fn time(text: &[u8]) -> Result<i64, ValueError> {
    let (negative, body) = match text.strip_prefix(b"-") {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let mut parts = body.splitn(3, |b| *b == b':');
    let (hours, minutes, rest) = match (parts.next(), parts.next(), parts.next()) {
        (Some(h), Some(m), Some(rest)) if (1..=3).contains(&h.len()) && m.len() == 2 && rest.len() >= 2 => (h, m, rest),
        _ => return Err(bad_text("TIME", text)),
    };
    let magnitude = match (digits(hours), digits(minutes), digits(&rest[..2]), fraction(&rest[2..])) {
        (Some(h), Some(m), Some(s), Some(us)) if m < 60 && s < 60 => ((h * 60 + m) * 60 + s) * US_PER_SECOND + us,
        _ => return Err(bad_text("TIME", text)),
    };
    Ok(if negative { -magnitude } else { magnitude })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_times_read_as_the_calendar_says() {
        assert_eq!(date(b"1970-01-01").unwrap(), 0);
        assert_eq!(date(b"9999-12-31").unwrap(), 2_932_896);
        assert_eq!(date(b"2024-02-29").unwrap(), 19_782);
        assert_eq!(datetime(b"1970-01-02 00:00:01.5").unwrap(), US_PER_DAY + 1_500_000);
        assert_eq!(datetime(b"1969-12-31 23:59:59.999999").unwrap(), -1);
        assert_eq!(time(b"-838:59:59.000000").unwrap(), -(838 * 3600 + 59 * 60 + 59) * US_PER_SECOND);
        assert_eq!(time(b"-00:00:01.5").unwrap(), -1_500_000);
        assert_eq!(time(b"12:00:00").unwrap(), 12 * 3600 * US_PER_SECOND);
    }

    #[test]
    fn values_outside_the_calendar_are_zero_dates() {
        for text in [&b"0000-00-00"[..], b"2024-00-10", b"2024-01-00", b"2023-02-29", b"0000-01-01"] {
            assert_eq!(date(text).unwrap_err().0, "zero_date", "{}", String::from_utf8_lossy(text));
        }
        assert_eq!(datetime(b"0000-00-00 00:00:00").unwrap_err().0, "zero_date");
        assert_eq!(date(b"2024-1-10").unwrap_err().0, "bad_value");
        assert_eq!(datetime(b"2024-01-10T00:00:00").unwrap_err().0, "bad_value");
        assert_eq!(time(b"1:2:3").unwrap_err().0, "bad_value");
        assert_eq!(time(b"10:00:00.1234567").unwrap_err().0, "bad_value");
    }
}
