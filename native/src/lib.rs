//! mysql-cdc's compiled row decoder.
//!
//! One narrow job: bytes in, Arrow arrays out, with no Python object per value. The bytes are
//! binlog rows events with their table map (capture), or a `SELECT`'s row packets (a snapshot
//! copy, `result_rows`), or small Parquet files the merge driver reads (`parquet_files`: the
//! `parquet` crate's reader). Beside them, the binlog dump's packets cut into events
//! (`event_frames`). Everything else (the connection, the dump request, positions, what an event
//! that is not rows means, transactions, DDL) stays in Python with mysql-replication, and the
//! library's framing with the pure-Python decoder (`mysql_cdc.capture.types`) stays the reference
//! this one is tested against.
//!
//! The decoders' only caller is `mysql_cdc.capture.native`, which decides, per table, the Arrow
//! type of every column (the `ColumnPlan`s) from the same rules the reference path uses; the
//! Parquet reader's is `mysql_cdc.merge.compiled_read`, with pyarrow's reading as its reference.

mod builders;
mod event_frames;
mod json_text;
mod packets;
mod parquet_files;
mod plan;
mod result_rows;
mod rows;
mod table_map;
mod text_values;

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

create_exception!(
    mysql_cdc_native,
    DecodeError,
    PyValueError,
    "A rows event the compiled decoder cannot turn into the planned Arrow values; args are \
     (reason, column index or -1, message)."
);

#[pymodule]
fn mysql_cdc_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<table_map::TableMap>()?;
    m.add_class::<rows::RowsDecoder>()?;
    m.add_class::<rows::DecodedRows>()?;
    m.add_class::<result_rows::ResultRowsDecoder>()?;
    m.add_class::<event_frames::EventFrames>()?;
    m.add("DecodeError", m.py().get_type::<DecodeError>())?;
    m.add_function(wrap_pyfunction!(parquet_files::read_files, m)?)?;
    m.add("ParquetError", m.py().get_type::<parquet_files::ParquetError>())?;
    Ok(())
}
