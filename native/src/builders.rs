//! One Arrow builder per column: binlog value bytes in, the planned Arrow value out.
//!
//! Values are read with mysql_common's binlog value reader (`BinlogValue`), except:
//! - DATE, which it does not read (3 bytes: day, month, year packed);
//! - MEDIUMINT, whose signed value it does not sign-extend (-8388608 comes back as 8388608; the
//!   type tests found it);
//! - TIME(1..4), whose negative values with a fraction it misreads (MySQL's packed form keeps the
//!   fraction of a negative time as a borrow from the whole seconds);
//! - JSON, whose empty value mysql-replication reads as the document `null` (the reference, so
//!   this does too).

use std::sync::Arc;

use arrow_array::builder::{
    BinaryBuilder, Date32Builder, Decimal128Builder, DurationMicrosecondBuilder, Float32Builder, Float64Builder,
    Int16Builder, Int32Builder, Int64Builder, Int8Builder, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow_array::ArrayRef;
use mysql_common::binlog::jsonb;
use mysql_common::binlog::value::BinlogValue;
use mysql_common::constants::ColumnType;
use mysql_common::io::ParseBuf;
use mysql_common::proto::MyDeserialize;
use mysql_common::value::Value;

use crate::json_text;
use crate::text_values;
use crate::plan::ColumnPlan;
use crate::table_map::ColumnLayout;

/// Why a value could not be decoded: (reason, message); the reason is what the Python wrapper
/// maps to the same error the reference path raises.
pub type ValueError = (&'static str, String);

fn bad(message: impl Into<String>) -> ValueError {
    ("bad_value", message.into())
}

pub const US_PER_SECOND: i64 = 1_000_000;
pub const US_PER_DAY: i64 = 86_400 * US_PER_SECOND;

enum Builder {
    Int8(Int8Builder),
    Int16(Int16Builder),
    Int32(Int32Builder),
    Int64(Int64Builder),
    Decimal(Decimal128Builder),
    Float32(Float32Builder),
    Float64(Float64Builder),
    Date(Date32Builder),
    Timestamp(TimestampMicrosecondBuilder),
    Duration(DurationMicrosecondBuilder),
    Utf8(StringBuilder),
    Binary(BinaryBuilder),
}

pub struct ColumnBuilder {
    plan: ColumnPlan,
    unsigned: bool,
    builder: Builder,
    text: String, // scratch for JSON text, reused across rows
}

impl ColumnBuilder {
    pub fn new(plan: ColumnPlan, unsigned: bool) -> Self {
        let builder = match &plan {
            ColumnPlan::Int8 => Builder::Int8(Int8Builder::new()),
            ColumnPlan::Int16 | ColumnPlan::Year => Builder::Int16(Int16Builder::new()),
            ColumnPlan::Int32 => Builder::Int32(Int32Builder::new()),
            ColumnPlan::Int64 => Builder::Int64(Int64Builder::new()),
            ColumnPlan::UInt64Decimal | ColumnPlan::Decimal { .. } => {
                Builder::Decimal(Decimal128Builder::new().with_data_type(plan.data_type()))
            }
            ColumnPlan::Float32 => Builder::Float32(Float32Builder::new()),
            ColumnPlan::Float64 => Builder::Float64(Float64Builder::new()),
            ColumnPlan::Date => Builder::Date(Date32Builder::new()),
            ColumnPlan::DateTime => Builder::Timestamp(TimestampMicrosecondBuilder::new()),
            ColumnPlan::Timestamp => {
                Builder::Timestamp(TimestampMicrosecondBuilder::new().with_timezone(Arc::from("UTC")))
            }
            ColumnPlan::Time => Builder::Duration(DurationMicrosecondBuilder::new()),
            ColumnPlan::DecimalText | ColumnPlan::Text | ColumnPlan::Enum(_) | ColumnPlan::Set(_) | ColumnPlan::Json => {
                Builder::Utf8(StringBuilder::new())
            }
            ColumnPlan::Binary | ColumnPlan::FixedBinary(_) | ColumnPlan::Bit => Builder::Binary(BinaryBuilder::new()),
        };
        ColumnBuilder { plan, unsigned, builder, text: String::new() }
    }

    pub fn append_null(&mut self) {
        match &mut self.builder {
            Builder::Int8(b) => b.append_null(),
            Builder::Int16(b) => b.append_null(),
            Builder::Int32(b) => b.append_null(),
            Builder::Int64(b) => b.append_null(),
            Builder::Decimal(b) => b.append_null(),
            Builder::Float32(b) => b.append_null(),
            Builder::Float64(b) => b.append_null(),
            Builder::Date(b) => b.append_null(),
            Builder::Timestamp(b) => b.append_null(),
            Builder::Duration(b) => b.append_null(),
            Builder::Utf8(b) => b.append_null(),
            Builder::Binary(b) => b.append_null(),
        }
    }

    pub fn finish(&mut self) -> ArrayRef {
        match &mut self.builder {
            Builder::Int8(b) => Arc::new(b.finish()),
            Builder::Int16(b) => Arc::new(b.finish()),
            Builder::Int32(b) => Arc::new(b.finish()),
            Builder::Int64(b) => Arc::new(b.finish()),
            Builder::Decimal(b) => Arc::new(b.finish().with_data_type(self.plan.data_type())),
            Builder::Float32(b) => Arc::new(b.finish()),
            Builder::Float64(b) => Arc::new(b.finish()),
            Builder::Date(b) => Arc::new(b.finish()),
            Builder::Timestamp(b) => Arc::new(b.finish().with_data_type(self.plan.data_type())),
            Builder::Duration(b) => Arc::new(b.finish()),
            Builder::Utf8(b) => Arc::new(b.finish()),
            Builder::Binary(b) => Arc::new(b.finish()),
        }
    }

    /// Read one non-NULL value of `layout` from `buf` and append it.
    pub fn append_from<'a>(&mut self, layout: &'a ColumnLayout, buf: &mut ParseBuf<'a>) -> Result<(), ValueError> {
        match layout.column_type {
            ColumnType::MYSQL_TYPE_DATE | ColumnType::MYSQL_TYPE_NEWDATE => {
                let raw = buf.checked_eat(3).ok_or_else(truncated)?;
                let packed = u32::from_le_bytes([raw[0], raw[1], raw[2], 0]);
                let (year, month, day) = (packed >> 9, (packed >> 5) & 15, packed & 31);
                let days = civil_days(year as i64, month, day)?;
                match &mut self.builder {
                    Builder::Date(b) => b.append_value(days as i32),
                    _ => return Err(self.mismatch(layout)),
                }
                return Ok(());
            }
            ColumnType::MYSQL_TYPE_TIME2 => {
                let micros = time2_micros(buf, *layout.meta.first().unwrap_or(&0))?;
                match &mut self.builder {
                    Builder::Duration(b) => b.append_value(micros),
                    _ => return Err(self.mismatch(layout)),
                }
                return Ok(());
            }
            ColumnType::MYSQL_TYPE_INT24 => {
                let raw = buf.checked_eat(3).ok_or_else(truncated)?;
                let unsigned = u32::from_le_bytes([raw[0], raw[1], raw[2], 0]);
                // shifting the 24 bits to the top and back fills the sign in
                let value = if self.unsigned { unsigned as i32 } else { ((unsigned << 8) as i32) >> 8 };
                match &mut self.builder {
                    Builder::Int32(b) => b.append_value(value),
                    _ => return Err(self.mismatch(layout)),
                }
                return Ok(());
            }
            ColumnType::MYSQL_TYPE_JSON => {
                let width = *layout.meta.first().unwrap_or(&4) as usize;
                let raw = buf.checked_eat(width).ok_or_else(truncated)?;
                let mut length = [0u8; 8];
                length[..width].copy_from_slice(raw);
                let length = u64::from_le_bytes(length) as usize;
                let document = buf.checked_eat(length).ok_or_else(truncated)?;
                self.text.clear();
                if document.is_empty() {
                    self.text.push_str("null");
                } else {
                    let value = jsonb::Value::deserialize((), &mut ParseBuf(document))
                        .map_err(|e| bad(format!("unreadable binary JSON: {e}")))?;
                    json_text::write_document(&value, &mut self.text).map_err(bad)?;
                }
                match &mut self.builder {
                    Builder::Utf8(b) => b.append_value(&self.text),
                    _ => return Err(self.mismatch(layout)),
                }
                return Ok(());
            }
            _ => {}
        }
        let value = BinlogValue::deserialize((layout.column_type, &layout.meta, self.unsigned, false), buf)
            .map_err(|e| bad(format!("unreadable {:?} value: {e}", layout.column_type)))?;
        match value {
            BinlogValue::Value(v) => self.append_value(v, layout),
            _ => Err(self.mismatch(layout)),
        }
    }

    /// Parse one non-NULL value of the text protocol (what a `SELECT` returns) and append it.
    /// The text is the server's own rendering; values the reference path (PyMySQL's converters)
    /// cannot represent are refused the same way: a date or time outside the calendar is a
    /// `zero_date`, never a NULL.
    pub fn append_text(&mut self, text: &[u8]) -> Result<(), ValueError> {
        let plan = &self.plan;
        match &mut self.builder {
            Builder::Int8(b) => b.append_value(parse_ascii(text)?),
            Builder::Int16(b) => b.append_value(parse_ascii(text)?),
            Builder::Int32(b) => b.append_value(parse_ascii(text)?),
            Builder::Int64(b) => b.append_value(parse_ascii(text)?),
            Builder::Decimal(b) => {
                let scale = match plan {
                    ColumnPlan::Decimal { scale, .. } => *scale as usize,
                    _ => 0,
                };
                b.append_value(scaled_decimal(text, scale)?)
            }
            // a FLOAT is selected as CAST(col AS DOUBLE): its exact widening, narrowed back here
            Builder::Float32(b) => b.append_value(parse_ascii::<f64>(text)? as f32),
            Builder::Float64(b) => b.append_value(parse_ascii(text)?),
            Builder::Date(b) => b.append_value(text_values::date(text)? as i32),
            Builder::Timestamp(b) => b.append_value(text_values::datetime(text)?),
            Builder::Duration(b) => b.append_value(text_values::time(text)?),
            Builder::Utf8(b) => match plan {
                ColumnPlan::DecimalText => b.append_value(decimal_text(text)?),
                _ => b.append_value(std::str::from_utf8(text).map_err(|e| bad(format!("text that is not UTF-8: {e}")))?),
            },
            Builder::Binary(b) => b.append_value(text),
        }
        Ok(())
    }

    fn mismatch(&self, layout: &ColumnLayout) -> ValueError {
        ("plan_mismatch", format!("a {:?} column cannot become {:?}", layout.column_type, self.plan))
    }

    fn append_value(&mut self, value: Value, layout: &ColumnLayout) -> Result<(), ValueError> {
        let plan = &self.plan;
        match (&mut self.builder, value) {
            (Builder::Int8(b), v) => b.append_value(integer(v, layout)?.try_into().map_err(|_| bad("out of TINYINT range"))?),
            (Builder::Int16(b), Value::Bytes(year)) if matches!(plan, ColumnPlan::Year) => {
                b.append_value(parse_ascii(&year)?)
            }
            (Builder::Int16(b), v) => b.append_value(integer(v, layout)?.try_into().map_err(|_| bad("out of SMALLINT range"))?),
            (Builder::Int32(b), v) => b.append_value(integer(v, layout)?.try_into().map_err(|_| bad("out of INT range"))?),
            (Builder::Int64(b), v) => b.append_value(integer(v, layout)?.try_into().map_err(|_| bad("out of BIGINT range"))?),
            (Builder::Decimal(b), Value::Bytes(text)) => {
                let scale = match plan {
                    ColumnPlan::Decimal { scale, .. } => *scale as usize,
                    _ => 0,
                };
                b.append_value(scaled_decimal(&text, scale)?)
            }
            (Builder::Decimal(b), v) => b.append_value(integer(v, layout)?),
            (Builder::Float32(b), Value::Float(x)) => b.append_value(x),
            (Builder::Float64(b), Value::Double(x)) => b.append_value(x),
            (Builder::Timestamp(b), Value::Date(y, mo, d, h, mi, s, us)) => {
                let days = civil_days(y as i64, mo as u32, d as u32)?;
                b.append_value(days * US_PER_DAY + ((h as i64 * 60 + mi as i64) * 60 + s as i64) * US_PER_SECOND + us as i64)
            }
            (Builder::Timestamp(b), Value::Bytes(text)) => b.append_value(epoch_micros(&text)?), // TIMESTAMP2: "sec[.usec]"
            (Builder::Timestamp(b), Value::Int(seconds)) => b.append_value(seconds * US_PER_SECOND), // old TIMESTAMP
            (Builder::Duration(b), Value::Time(negative, days, h, m, s, us)) => {
                let magnitude = (((days as i64 * 24 + h as i64) * 60 + m as i64) * 60 + s as i64) * US_PER_SECOND + us as i64;
                b.append_value(if negative { -magnitude } else { magnitude })
            }
            (Builder::Utf8(b), Value::Bytes(bytes)) => match plan {
                ColumnPlan::DecimalText => b.append_value(decimal_text(&bytes)?),
                ColumnPlan::Set(names) => {
                    self.text.clear();
                    for (bit, name) in names.iter().enumerate() {
                        if bytes.get(bit / 8).is_some_and(|byte| byte & (1 << (bit % 8)) != 0) {
                            if !self.text.is_empty() {
                                self.text.push(',');
                            }
                            self.text.push_str(name);
                        }
                    }
                    b.append_value(&self.text)
                }
                _ => b.append_value(std::str::from_utf8(&bytes).map_err(|e| bad(format!("text that is not UTF-8: {e}")))?),
            },
            (Builder::Utf8(b), Value::Int(index)) => match plan {
                ColumnPlan::Enum(names) => b.append_value(
                    names.get(index as usize).ok_or_else(|| bad(format!("ENUM index {index} past its {} values", names.len())))?,
                ),
                _ => return Err(self.mismatch(layout)),
            },
            (Builder::Binary(b), Value::Bytes(mut bytes)) => {
                if let ColumnPlan::FixedBinary(width) = plan {
                    if bytes.len() < *width {
                        bytes.resize(*width, 0);
                    }
                }
                b.append_value(bytes)
            }
            _ => return Err(self.mismatch(layout)),
        }
        Ok(())
    }
}

fn truncated() -> ValueError {
    bad("the rows event ends inside a value")
}

fn big_endian(bytes: &[u8]) -> i64 {
    bytes.iter().fold(0i64, |acc, b| (acc << 8) | *b as i64)
}

/// A TIME2 value of `fsp` fractional digits as signed microseconds, the way MySQL's
/// `my_time_packed_from_binary` reads it: the whole part is offset by 2^23, and a negative time's
/// 1- or 2-byte fraction is stored as a borrow from the next whole second.
fn time2_micros(buf: &mut ParseBuf<'_>, fsp: u8) -> Result<i64, ValueError> {
    const INT_OFFSET: i64 = 0x80_0000;
    let mut eat = |n: usize| buf.checked_eat(n).map(big_endian).ok_or_else(truncated);
    let packed = match fsp {
        0 => (eat(3)? - INT_OFFSET) << 24,
        1..=4 => {
            let (width, scale) = if fsp <= 2 { (1, 10_000) } else { (2, 100) };
            let mut whole = eat(3)? - INT_OFFSET;
            let mut fraction = eat(width)?;
            if whole < 0 && fraction != 0 {
                whole += 1;
                fraction -= 1 << (8 * width);
            }
            (whole << 24) + fraction * scale
        }
        5 | 6 => eat(6)? - 0x8000_0000_0000,
        other => return Err(bad(format!("TIME with {other} fractional digits"))),
    };
    let magnitude = packed.abs();
    let hms = magnitude >> 24;
    let (hours, minutes, seconds) = ((hms >> 12) % (1 << 10), (hms >> 6) % (1 << 6), hms % (1 << 6));
    let micros = ((hours * 60 + minutes) * 60 + seconds) * US_PER_SECOND + magnitude % (1 << 24);
    Ok(if packed < 0 { -micros } else { micros })
}

fn integer(value: Value, layout: &ColumnLayout) -> Result<i128, ValueError> {
    match value {
        Value::Int(x) => Ok(x as i128),
        Value::UInt(x) => Ok(x as i128),
        other => Err(bad(format!("{:?} column read as {other:?}", layout.column_type))),
    }
}

fn parse_ascii<T: std::str::FromStr>(bytes: &[u8]) -> Result<T, ValueError> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(format!("not a number: {:?}", String::from_utf8_lossy(bytes))))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil). A
/// zero date or one with a zero month or day has no such day: the reference path refuses it
/// too, since writing NULL would change the row.
pub fn civil_days(year: i64, month: u32, day: u32) -> Result<i64, ValueError> {
    if year == 0 && month == 0 && day == 0 || month == 0 || day == 0 || month > 12 {
        return Err(("zero_date", format!("{year:04}-{month:02}-{day:02}")));
    }
    let y = if month <= 2 { year - 1 } else { year };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = month as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Ok(era * 146_097 + doe - 719_468)
}

fn epoch_micros(text: &[u8]) -> Result<i64, ValueError> {
    let text = std::str::from_utf8(text).map_err(|_| bad("TIMESTAMP text is not ASCII"))?;
    let (seconds, fraction) = text.split_once('.').unwrap_or((text, "0"));
    let seconds: i64 = seconds.parse().map_err(|_| bad(format!("bad TIMESTAMP {text:?}")))?;
    let fraction: i64 = fraction.parse().map_err(|_| bad(format!("bad TIMESTAMP {text:?}")))?;
    Ok(seconds * US_PER_SECOND + fraction)
}

/// mysql_common's decimal text ("-12.50") as the unscaled integer of a decimal128 with `scale`.
fn scaled_decimal(text: &[u8], scale: usize) -> Result<i128, ValueError> {
    let text = std::str::from_utf8(text).map_err(|_| bad("DECIMAL text is not ASCII"))?;
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if fraction.len() > scale {
        return Err(bad(format!("DECIMAL {text} has more than {scale} decimals")));
    }
    let mut unscaled: i128 = 0;
    for c in whole.chars().chain(fraction.chars()).chain(std::iter::repeat('0').take(scale - fraction.len())) {
        let digit = c.to_digit(10).ok_or_else(|| bad(format!("bad DECIMAL {text:?}")))?;
        unscaled = unscaled.checked_mul(10).and_then(|u| u.checked_add(digit as i128)).ok_or_else(|| bad("DECIMAL overflow"))?;
    }
    Ok(if negative { -unscaled } else { unscaled })
}

/// A DECIMAL wider than 38 digits as the reference writes it (`format(Decimal, "f")`): no
/// leading zeros before the point (one "0" for a zero whole part), every decimal kept.
fn decimal_text(text: &[u8]) -> Result<String, ValueError> {
    let text = std::str::from_utf8(text).map_err(|_| bad("DECIMAL text is not ASCII"))?;
    let (sign, digits) = match text.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", text),
    };
    let (whole, fraction) = match digits.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (digits, None),
    };
    let whole = whole.trim_start_matches('0');
    let whole = if whole.is_empty() { "0" } else { whole };
    Ok(match fraction {
        Some(f) if !f.is_empty() => format!("{sign}{whole}.{f}"),
        _ => format!("{sign}{whole}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_days_match_the_calendar() {
        assert_eq!(civil_days(1970, 1, 1).unwrap(), 0);
        assert_eq!(civil_days(2000, 3, 1).unwrap(), 11_017);
        assert_eq!(civil_days(1000, 1, 1).unwrap(), -354_285);
        assert_eq!(civil_days(9999, 12, 31).unwrap(), 2_932_896);
        assert_eq!(civil_days(2024, 0, 10).unwrap_err().0, "zero_date");
    }

    #[test]
    fn decimals_keep_every_digit() {
        assert_eq!(scaled_decimal(b"-12345678.90", 2).unwrap(), -1_234_567_890);
        assert_eq!(scaled_decimal(b"0.01", 2).unwrap(), 1);
        assert_eq!(scaled_decimal(b"7", 0).unwrap(), 7);
        assert_eq!(decimal_text(b"-000012.500").unwrap(), "-12.500");
        assert_eq!(decimal_text(b"0.000").unwrap(), "0.000");
        assert_eq!(decimal_text(b"15").unwrap(), "15");
    }
}
