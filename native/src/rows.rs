//! Rows events -> Arrow columns, accumulated across events until the caller takes them.
//!
//! A `RowsDecoder` belongs to one table's writer. Each `push` decodes one rows event:
//! - a write's rows and a delete's rows go to the row columns, with no before image;
//! - an update's after image goes to the row columns and its before image to the before columns.
//!
//! `take` hands everything decoded so far to pyarrow (the Arrow C data interface, no copy) as one
//! struct array: the row columns, then the before columns, then whether each row has a before
//! image.

use std::ffi::CString;
use std::sync::Arc;

use arrow_array::builder::BooleanBuilder;
use arrow_array::{Array, ArrayRef, StructArray};
use arrow_data::ffi::FFI_ArrowArray;
use arrow_schema::ffi::FFI_ArrowSchema;
use arrow_schema::{DataType, Field};
use mysql_common::io::ParseBuf;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyList, PyTuple};

use crate::builders::ColumnBuilder;
use crate::plan::ColumnPlan;
use crate::table_map::TableMap;
use crate::DecodeError;

/// (reason, column index or -1, message): what the Python wrapper turns into a CaptureError
type RowsError = (&'static str, i64, String);

#[pyclass(module = "mysql_cdc_native")]
pub struct RowsDecoder {
    names: Vec<String>,
    plans: Vec<ColumnPlan>,
    unsigned: Vec<bool>,
    rows: Vec<ColumnBuilder>,
    before: Vec<ColumnBuilder>,
    has_before: BooleanBuilder,
    count: usize,
}

impl RowsDecoder {
    fn builders(&self) -> Vec<ColumnBuilder> {
        self.plans.iter().zip(&self.unsigned).map(|(p, u)| ColumnBuilder::new(p.clone(), *u)).collect()
    }

    fn decode<'a>(&mut self, table: &'a TableMap, event_type: u8, body: &'a [u8]) -> Result<usize, RowsError> {
        if table.columns.len() != self.plans.len() {
            return Err(("shape", -1, format!("the table map has {} columns, the plan {}", table.columns.len(), self.plans.len())));
        }
        let event = RowsEventLayout::read(event_type, body, table.columns.len())?;
        let (before_columns, after_columns) = (event.before_columns, event.after_columns);
        // a MINIMAL or NOBLOB image leaves columns out: what they hold is unknown, so refused;
        // the after image is checked first, as the reference path reads it first
        let n = table.columns.len();
        for present in [after_columns, before_columns].into_iter().flatten() {
            if let Some(missing) = (0..n).find(|&i| present[i / 8] & (1 << (i % 8)) == 0) {
                return Err(("partial_image", missing as i64, "the row image leaves this column out".into()));
            }
        }
        let mut buf = ParseBuf(event.rows);
        let mut decoded = 0;
        while !buf.is_empty() {
            match (before_columns, after_columns) {
                (Some(before), Some(after)) => {
                    // an update: the before image, then the after image
                    self.read_image(table, before, &mut buf, true)?;
                    self.read_image(table, after, &mut buf, false)?;
                    self.has_before.append_value(true);
                }
                (Some(only), None) | (None, Some(only)) => {
                    self.read_image(table, only, &mut buf, false)?;
                    self.before.iter_mut().for_each(ColumnBuilder::append_null);
                    self.has_before.append_value(false);
                }
                (None, None) => return Err(("event", -1, "a rows event with no column bitmap".into())),
            }
            decoded += 1;
        }
        self.count += decoded;
        Ok(decoded)
    }

    /// One row image: its NULL bitmap, then each non-NULL value in column order.
    fn read_image<'a>(&mut self, table: &'a TableMap, present: &[u8], buf: &mut ParseBuf<'a>, before: bool) -> Result<(), RowsError> {
        let n = table.columns.len();
        debug_assert!((0..n).all(|i| present[i / 8] & (1 << (i % 8)) != 0), "checked in decode");
        let nulls = buf.checked_eat(n.div_ceil(8)).ok_or(("event", -1, "the rows event ends inside a NULL bitmap".to_string()))?;
        let builders = if before { &mut self.before } else { &mut self.rows };
        for (i, (builder, layout)) in builders.iter_mut().zip(&table.columns).enumerate() {
            if nulls[i / 8] & (1 << (i % 8)) != 0 {
                builder.append_null();
            } else {
                builder.append_from(layout, buf).map_err(|(reason, message)| (reason, i as i64, message))?;
            }
        }
        Ok(())
    }
}

/// The parts of a rows event around its rows. MySQL writes v2 events (types 30-32, with an
/// extra-data block), MariaDB v1 (23-25); both start with a 6-byte table id and 2 flag bytes.
struct RowsEventLayout<'a> {
    before_columns: Option<&'a [u8]>,
    after_columns: Option<&'a [u8]>,
    rows: &'a [u8],
}

impl<'a> RowsEventLayout<'a> {
    fn read(event_type: u8, body: &'a [u8], columns: usize) -> Result<Self, RowsError> {
        let (update, delete, v2) = match event_type {
            23 => (false, false, false),
            24 => (true, false, false),
            25 => (false, true, false),
            30 => (false, false, true),
            31 => (true, false, true),
            32 => (false, true, true),
            other => return Err(("event", -1, format!("event type {other} is not a rows event"))),
        };
        let short = || ("event", -1, "the rows event ends inside its header".to_string());
        let mut buf = ParseBuf(body);
        buf.checked_eat(8).ok_or_else(short)?; // table id (6) and flags (2)
        if v2 {
            // the extra-data length counts its own 2 bytes
            let extra = buf.checked_eat_u16_le().ok_or_else(short)? as usize;
            buf.checked_eat(extra.saturating_sub(2)).ok_or_else(short)?;
        }
        let width = buf.checked_eat_lenenc_int().ok_or_else(short)? as usize;
        if width != columns {
            return Err(("shape", -1, format!("the rows event has {width} columns, its table map {columns}")));
        }
        let bitmap = width.div_ceil(8);
        let first = buf.checked_eat(bitmap).ok_or_else(short)?;
        let second = if update { Some(buf.checked_eat(bitmap).ok_or_else(short)?) } else { None };
        let (before_columns, after_columns) = match (update, delete) {
            (true, _) => (Some(first), second),
            (false, true) => (Some(first), None),
            (false, false) => (None, Some(first)),
        };
        Ok(RowsEventLayout { before_columns, after_columns, rows: buf.eat_all() })
    }
}

#[pymethods]
impl RowsDecoder {
    /// `columns`: one `(name, kind, number, names, unsigned)` per column, in table order.
    #[new]
    fn new(columns: &Bound<'_, PyList>) -> PyResult<Self> {
        let (mut names, mut plans, mut unsigned) = (Vec::new(), Vec::new(), Vec::new());
        for column in columns.iter() {
            let column = column.downcast::<PyTuple>()?;
            names.push(column.get_item(0)?.extract::<String>()?);
            plans.push(ColumnPlan::from_python(&column.get_slice(1, 4).into_any())?);
            unsigned.push(column.get_item(4)?.extract::<bool>()?);
        }
        let mut decoder = RowsDecoder {
            names,
            plans,
            unsigned,
            rows: Vec::new(),
            before: Vec::new(),
            has_before: BooleanBuilder::new(),
            count: 0,
        };
        decoder.rows = decoder.builders();
        decoder.before = decoder.builders();
        Ok(decoder)
    }

    /// Decode one rows event (`body`: without its header and checksum) of `table`; returns its
    /// row count. Runs without the GIL, so parallel readers decode at once.
    fn push(&mut self, py: Python<'_>, table: &Bound<'_, TableMap>, event_type: u8, body: &[u8]) -> PyResult<usize> {
        let table = table.get();
        py.allow_threads(|| self.decode(table, event_type, body))
            .map_err(|(reason, column, message)| DecodeError::new_err((reason, column, message)))
    }

    /// Rows decoded and not taken yet.
    #[getter]
    fn rows(&self) -> usize {
        self.count
    }

    /// Everything decoded so far, as a `DecodedRows` for `pyarrow.array()`; starts afresh.
    fn take(&mut self) -> DecodedRows {
        let mut fields = Vec::with_capacity(self.names.len() * 2 + 1);
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(fields.capacity());
        for (prefix, builders) in [("", &mut self.rows), ("before.", &mut self.before)] {
            for ((name, plan), builder) in self.names.iter().zip(&self.plans).zip(builders.iter_mut()) {
                fields.push(Field::new(format!("{prefix}{name}"), plan.data_type(), true));
                arrays.push(builder.finish());
            }
        }
        fields.push(Field::new("has_before", DataType::Boolean, false));
        arrays.push(Arc::new(self.has_before.finish()));
        self.count = 0;
        DecodedRows::new(StructArray::new(fields.into(), arrays, None))
    }
}

/// Decoded columns on their way to pyarrow, through the Arrow PyCapsule interface.
#[pyclass(module = "mysql_cdc_native")]
pub struct DecodedRows {
    pub(crate) array: Option<StructArray>,
}

impl DecodedRows {
    pub fn new(array: StructArray) -> Self {
        DecodedRows { array: Some(array) }
    }
}

#[pymethods]
impl DecodedRows {
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &mut self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let _ = requested_schema; // the planned types are the only ones offered
        let array = self.array.take().ok_or_else(|| DecodeError::new_err(("export", -1, "these rows were already exported".to_string())))?;
        let data = array.into_data();
        let schema = FFI_ArrowSchema::try_from(data.data_type())
            .map_err(|e| DecodeError::new_err(("export", -1, format!("Arrow schema export: {e}"))))?;
        let schema = PyCapsule::new(py, schema, Some(CString::new("arrow_schema").unwrap()))?;
        let array = PyCapsule::new(py, FFI_ArrowArray::new(&data), Some(CString::new("arrow_array").unwrap()))?;
        PyTuple::new(py, [schema.into_any(), array.into_any()])
    }

    fn __len__(&self) -> usize {
        self.array.as_ref().map_or(0, |a| a.len())
    }
}
