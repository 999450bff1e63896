//! Small Parquet files -> Arrow record batches: the merge driver's read of many small tables.
//!
//! A batch that touches a thousand tables holds a thousand small Parquet files (or their spans in
//! a pack). Reading one with pyarrow costs about half a millisecond of fixed work in Arrow C++,
//! whatever its rows; the `parquet` crate reads the same file in under half that. `read_files`
//! takes the bytes of many files and the columns wanted from each, reads them all without the GIL
//! (on `threads` threads, each a share of the files), and hands each back as one record batch
//! through the Arrow PyCapsule interface.
//!
//! It reads only: whether a file's columns and types are the manifest's is checked by its caller
//! (`mysql_cdc.merge.compiled_read`) exactly as for pyarrow's reading, which stays the reference.

use std::collections::HashSet;

use arrow_array::{RecordBatch, RecordBatchReader, StructArray};
use bytes::Bytes;
use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use parquet::file::metadata::ParquetStatisticsPolicy;
use parquet::arrow::ProjectionMask;
use pyo3::buffer::PyBuffer;
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::rows::DecodedRows;

create_exception!(
    mysql_cdc_native,
    ParquetError,
    PyValueError,
    "A Parquet file the compiled reader cannot read; args are (index of the file, message)."
);

/// One file: its bytes and the names of the columns to read, in the file's order.
type FileRequest = (Bytes, Vec<String>);

/// Read every file whole, its columns `columns[i]`, on `threads` threads (at least one).
#[pyfunction]
pub fn read_files(py: Python<'_>, files: Vec<PyBuffer<u8>>, columns: Vec<Vec<String>>, threads: usize) -> PyResult<Vec<DecodedRows>> {
    if files.len() != columns.len() {
        return Err(PyValueError::new_err(format!("{} files but {} column lists", files.len(), columns.len())));
    }
    // the bytes are copied once while the GIL is held: a buffer's memory may only be read under it
    let requests: Vec<FileRequest> = files
        .iter()
        .zip(columns)
        .map(|(buffer, names)| Ok((Bytes::from(buffer.to_vec(py)?), names)))
        .collect::<PyResult<_>>()?;
    let read = py.allow_threads(|| read_shares(&requests, threads.max(1)));
    read.map(|batches| batches.into_iter().map(|b| DecodedRows::new(StructArray::from(b))).collect())
        .map_err(|(index, message)| ParquetError::new_err((index, message)))
}

/// The files read in order; `threads` interleaved shares (file i in share i % threads) so every
/// thread gets files of every size.
fn read_shares(requests: &[FileRequest], threads: usize) -> Result<Vec<RecordBatch>, (usize, String)> {
    if threads == 1 || requests.len() < 2 {
        return requests.iter().enumerate().map(|(i, r)| read_file(r).map_err(|e| (i, e))).collect();
    }
    let shares: Vec<Vec<Result<RecordBatch, (usize, String)>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || {
                    (t..requests.len()).step_by(threads).map(|i| read_file(&requests[i]).map_err(|e| (i, e))).collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a Parquet reading thread panicked")).collect()
    });
    let mut ordered: Vec<Option<RecordBatch>> = vec![None; requests.len()];
    for (t, share) in shares.into_iter().enumerate() {
        for (k, batch) in share.into_iter().enumerate() {
            ordered[t + k * threads] = Some(batch?);
        }
    }
    Ok(ordered.into_iter().map(|b| b.expect("every file has been read")).collect())
}

/// One file's rows, every row group, as one record batch of the requested columns: a name is a
/// top-level column (all of it) or the path of one field in a struct (`_before.id`: that field
/// alone), as pyarrow's `columns` takes them. A requested column the file lacks is left for the
/// caller's check to name.
fn read_file((bytes, names): &FileRequest) -> Result<RecordBatch, String> {
    // The file is read whole: its columns' statistics (min/max, encodings, sizes) would only prune
    // row groups or pages, and decoding them is a share of a small file's footer parse
    let options = ArrowReaderOptions::new()
        .with_column_stats_policy(ParquetStatisticsPolicy::SkipAll)
        .with_encoding_stats_policy(ParquetStatisticsPolicy::SkipAll)
        .with_size_stats_policy(ParquetStatisticsPolicy::SkipAll);
    let builder = ParquetRecordBatchReaderBuilder::try_new_with_options(bytes.clone(), options).map_err(|e| e.to_string())?;
    let wanted: HashSet<&str> = names.iter().map(String::as_str).collect();
    let leaves: Vec<usize> = builder
        .parquet_schema()
        .columns()
        .iter()
        .enumerate()
        .filter(|(_, leaf)| {
            let path = leaf.path().parts();
            wanted.contains(path[0].as_str()) || wanted.contains(path.join(".").as_str())
        })
        .map(|(i, _)| i)
        .collect();
    let mask = ProjectionMask::leaves(builder.parquet_schema(), leaves);
    // one batch for the whole file: the reader's batches run across row groups, so a batch as
    // large as the file is all of it at once (these are small tables' files)
    let rows = builder.metadata().file_metadata().num_rows().max(1) as usize;
    let reader = builder.with_projection(mask).with_batch_size(rows).build().map_err(|e| e.to_string())?;
    let schema = reader.schema();
    let mut batches = reader.collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())?;
    match batches.len() {
        0 => Ok(RecordBatch::new_empty(schema)),
        1 => Ok(batches.remove(0)),
        n => Err(format!("{n} batches where the footer's {rows} rows make one")),
    }
}
