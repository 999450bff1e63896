//! What Arrow value each column becomes: decided in Python (`mysql_cdc.capture.native`) from the
//! same rules as the reference path, so the two decoders cannot disagree about types.

use std::sync::Arc;

use arrow_schema::{DataType, TimeUnit};
use pyo3::prelude::*;

use crate::DecodeError;

#[derive(Clone, Debug)]
pub enum ColumnPlan {
    Int8,
    Int16,
    Int32,
    Int64,
    /// BIGINT UNSIGNED as decimal(20,0): Spark has no unsigned types and 2^64-1 must survive
    UInt64Decimal,
    Decimal { precision: u8, scale: i8 },
    /// DECIMAL wider than 38 digits: its exact text
    DecimalText,
    Float32,
    Float64,
    Year,
    Date,
    /// DATETIME: naive wall clock
    DateTime,
    /// TIMESTAMP: a UTC instant
    Timestamp,
    /// TIME: a signed duration
    Time,
    Text,
    Binary,
    /// BINARY(n): the binlog drops the trailing 0x00 pad bytes the stored value has
    FixedBinary(usize),
    /// ENUM: the index into these names (mysql-replication's list, index 0 included)
    Enum(Vec<String>),
    /// SET: bit i is names[i]; joined with ',' in declared order
    Set(Vec<String>),
    Bit,
    Json,
}

impl ColumnPlan {
    /// `(kind, number, names)` as `mysql_cdc.capture.native` sends it.
    pub fn from_python(spec: &Bound<'_, PyAny>) -> PyResult<Self> {
        let (kind, number, names): (String, i64, Vec<String>) = spec.extract()?;
        Ok(match kind.as_str() {
            "int8" => ColumnPlan::Int8,
            "int16" => ColumnPlan::Int16,
            "int32" => ColumnPlan::Int32,
            "int64" => ColumnPlan::Int64,
            "uint64_decimal" => ColumnPlan::UInt64Decimal,
            "decimal" => ColumnPlan::Decimal { precision: (number / 100) as u8, scale: (number % 100) as i8 },
            "decimal_text" => ColumnPlan::DecimalText,
            "float32" => ColumnPlan::Float32,
            "float64" => ColumnPlan::Float64,
            "year" => ColumnPlan::Year,
            "date" => ColumnPlan::Date,
            "datetime" => ColumnPlan::DateTime,
            "timestamp" => ColumnPlan::Timestamp,
            "time" => ColumnPlan::Time,
            "text" => ColumnPlan::Text,
            "binary" => ColumnPlan::Binary,
            "fixed_binary" => ColumnPlan::FixedBinary(number as usize),
            "enum" => ColumnPlan::Enum(names),
            "set" => ColumnPlan::Set(names),
            "bit" => ColumnPlan::Bit,
            "json" => ColumnPlan::Json,
            other => return Err(DecodeError::new_err(("plan", -1, format!("unknown column plan {other:?}")))),
        })
    }

    pub fn data_type(&self) -> DataType {
        match self {
            ColumnPlan::Int8 => DataType::Int8,
            ColumnPlan::Int16 | ColumnPlan::Year => DataType::Int16,
            ColumnPlan::Int32 => DataType::Int32,
            ColumnPlan::Int64 => DataType::Int64,
            ColumnPlan::UInt64Decimal => DataType::Decimal128(20, 0),
            ColumnPlan::Decimal { precision, scale } => DataType::Decimal128(*precision, *scale),
            ColumnPlan::Float32 => DataType::Float32,
            ColumnPlan::Float64 => DataType::Float64,
            ColumnPlan::Date => DataType::Date32,
            ColumnPlan::DateTime => DataType::Timestamp(TimeUnit::Microsecond, None),
            ColumnPlan::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, Some(Arc::from("UTC"))),
            ColumnPlan::Time => DataType::Duration(TimeUnit::Microsecond),
            ColumnPlan::DecimalText | ColumnPlan::Text | ColumnPlan::Enum(_) | ColumnPlan::Set(_) | ColumnPlan::Json => {
                DataType::Utf8
            }
            ColumnPlan::Binary | ColumnPlan::FixedBinary(_) | ColumnPlan::Bit => DataType::Binary,
        }
    }
}
