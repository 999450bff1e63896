//! MySQL binary JSON -> the text the reference path writes.
//!
//! The reference (`mysql_cdc.capture.types._json_text`) runs mysql-replication's decoded document
//! through `json.dumps(..., ensure_ascii=False)`, so the text here follows Python's rules to the
//! byte: `", "` and `": "` separators, keys in stored order, floats as `repr(float)`, and only
//! the characters Python escapes escaped. Opaque scalars (a DECIMAL, DATE, TIME or DATETIME cast
//! to JSON) follow what mysql-replication makes of them.

use mysql_common::binlog::jsonb::{ComplexValue, OpaqueValue, StorageFormat, Value};
use mysql_common::constants::ColumnType;
use std::fmt::Write;

pub fn write_document(value: &Value<'_>, out: &mut String) -> Result<(), String> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::I16(x) => write!(out, "{x}").unwrap(),
        Value::U16(x) => write!(out, "{x}").unwrap(),
        Value::I32(x) => write!(out, "{x}").unwrap(),
        Value::U32(x) => write!(out, "{x}").unwrap(),
        Value::I64(x) => write!(out, "{x}").unwrap(),
        Value::U64(x) => write!(out, "{x}").unwrap(),
        Value::F64(x) => write_float(*x, out),
        Value::String(s) => write_string(utf8(s.str_raw())?, out),
        Value::SmallArray(a) => write_array(a, out)?,
        Value::LargeArray(a) => write_array(a, out)?,
        Value::SmallObject(o) => write_object(o, out)?,
        Value::LargeObject(o) => write_object(o, out)?,
        Value::Opaque(o) => write_opaque(o, out)?,
    }
    Ok(())
}

fn utf8(bytes: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(bytes).map_err(|e| format!("a JSON string that is not UTF-8: {e}"))
}

fn write_array<T: StorageFormat>(
    array: &ComplexValue<'_, T, mysql_common::binlog::jsonb::Array>,
    out: &mut String,
) -> Result<(), String> {
    out.push('[');
    for (i, item) in array.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_document(&item.map_err(|e| format!("bad JSON array element: {e}"))?, out)?;
    }
    out.push(']');
    Ok(())
}

fn write_object<T: StorageFormat>(
    object: &ComplexValue<'_, T, mysql_common::binlog::jsonb::Object>,
    out: &mut String,
) -> Result<(), String> {
    out.push('{');
    for (i, entry) in object.iter().enumerate() {
        let (key, value) = entry.map_err(|e| format!("bad JSON object member: {e}"))?;
        if i > 0 {
            out.push_str(", ");
        }
        write_string(utf8(key.value_raw())?, out);
        out.push_str(": ");
        write_document(&value, out)?;
    }
    out.push('}');
    Ok(())
}

/// A JSON string as Python's `json.dumps(ensure_ascii=False)` writes it: `"` and `\` escaped,
/// the control characters below 0x20 escaped (the usual five by name), everything else as is.
pub fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => write!(out, "\\u{:04x}", c as u32).unwrap(),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `repr(float)`: the shortest digits that round-trip (Rust's `{:e}` finds the same ones), in
/// fixed notation for decimal exponents -4..16 and scientific (`1.5e+16`, `1e-05`) otherwise.
pub fn write_float(x: f64, out: &mut String) {
    if x.is_nan() {
        out.push_str("NaN");
        return;
    }
    if x.is_infinite() {
        out.push_str(if x > 0.0 { "Infinity" } else { "-Infinity" });
        return;
    }
    let sci = format!("{:e}", x.abs());
    let (mantissa, exponent) = sci.split_once('e').expect("{:e} always has an exponent");
    let exponent: i32 = exponent.parse().expect("{:e} exponent is an integer");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if x.is_sign_negative() {
        out.push('-');
    }
    if (-4..16).contains(&exponent) {
        if exponent < 0 {
            out.push_str("0.");
            for _ in 0..(-exponent - 1) {
                out.push('0');
            }
            out.push_str(&digits);
        } else {
            let int_len = exponent as usize + 1;
            if digits.len() <= int_len {
                out.push_str(&digits);
                for _ in digits.len()..int_len {
                    out.push('0');
                }
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let sign = if exponent < 0 { '-' } else { '+' };
        write!(out, "e{sign}{:02}", exponent.abs()).unwrap();
    }
}

/// mysql-replication's reading of opaque scalars, which the reference then writes: a DECIMAL
/// becomes a float, a TIME a time of day, a DATE or DATETIME a datetime (each as `str()` gives
/// it), anything else its bytes as text.
fn write_opaque(opaque: &OpaqueValue<'_>, out: &mut String) -> Result<(), String> {
    let data = opaque.data_raw();
    match opaque.value_type() {
        ColumnType::MYSQL_TYPE_NEWDECIMAL | ColumnType::MYSQL_TYPE_DECIMAL => {
            if data.len() < 2 {
                return Err("a JSON DECIMAL shorter than its header".into());
            }
            let (precision, scale) = (data[0] as usize, data[1] as usize);
            let decimal = mysql_common::binlog::decimal::Decimal::read_bin(&data[2..], precision, scale, false)
                .map_err(|e| format!("bad JSON DECIMAL: {e}"))?;
            let value: f64 = decimal.to_string().parse().map_err(|e| format!("bad JSON DECIMAL: {e}"))?;
            write_float(value, out);
        }
        ColumnType::MYSQL_TYPE_TIME | ColumnType::MYSQL_TYPE_TIME2 => {
            let mut v = packed_i64(data)?;
            if v < 0 {
                v = -v; // mysql-replication drops the sign of a JSON TIME (reference behaviour)
            }
            let int_part = v >> 24;
            let (h, m, s, frac) = ((int_part >> 12) % (1 << 10), (int_part >> 6) % (1 << 6), int_part % (1 << 6), v % (1 << 24));
            let mut text = format!("{h:02}:{m:02}:{s:02}");
            if frac != 0 {
                write!(text, ".{frac:06}").unwrap();
            }
            write_string(&text, out);
        }
        ColumnType::MYSQL_TYPE_DATE | ColumnType::MYSQL_TYPE_DATETIME | ColumnType::MYSQL_TYPE_DATETIME2 => {
            let mut v = packed_i64(data)?;
            if v == 0 {
                write_string("0000-00-00 00:00:00", out);
                return Ok(());
            }
            if v < 0 {
                v = -v;
            }
            let int_part = v >> 24;
            let ymd = int_part >> 17;
            let ym = ymd >> 5;
            let hms = int_part % (1 << 17);
            let (year, month, day) = (ym / 13, ym % 13, ymd % (1 << 5));
            let (hour, minute, second, frac) = (hms >> 12, (hms >> 6) % (1 << 6), hms % (1 << 6), v % (1 << 24));
            let mut text = format!("{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}:{second:02}");
            if frac != 0 {
                write!(text, ".{frac:06}").unwrap();
            }
            write_string(&text, out);
        }
        _ => write_string(&String::from_utf8_lossy(data).replace('\u{fffd}', ""), out),
    }
    Ok(())
}

fn packed_i64(data: &[u8]) -> Result<i64, String> {
    let bytes: [u8; 8] = data.get(..8).and_then(|b| b.try_into().ok()).ok_or("a JSON temporal value shorter than 8 bytes")?;
    Ok(i64::from_le_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repr(x: f64) -> String {
        let mut s = String::new();
        write_float(x, &mut s);
        s
    }

    #[test]
    fn floats_print_like_python_repr() {
        // each expected text is what CPython's repr() prints for that float
        assert_eq!(repr(2.5), "2.5");
        assert_eq!(repr(1.0), "1.0");
        assert_eq!(repr(-0.0), "-0.0");
        assert_eq!(repr(0.1), "0.1");
        assert_eq!(repr(1e16), "1e+16");
        assert_eq!(repr(1.5e16), "1.5e+16");
        assert_eq!(repr(1e15), "1000000000000000.0");
        assert_eq!(repr(123456789.125), "123456789.125");
        assert_eq!(repr(0.0001), "0.0001");
        assert_eq!(repr(0.00001), "1e-05");
        assert_eq!(repr(-1.25e-300), "-1.25e-300");
        assert_eq!(repr(f64::MAX), "1.7976931348623157e+308");
    }

    #[test]
    fn strings_escape_like_json_dumps() {
        let mut s = String::new();
        write_string("a\"b\\c\n\u{1}\u{7f}é😀", &mut s);
        assert_eq!(s, "\"a\\\"b\\\\c\\n\\u0001\u{7f}é😀\"");
    }
}
