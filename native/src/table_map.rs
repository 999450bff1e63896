//! A table map event: the binlog type and metadata of every column, as rows events need them.

use mysql_common::binlog::consts::BinlogVersion;
use mysql_common::binlog::events::{FormatDescriptionEvent, TableMapEvent};
use mysql_common::binlog::BinlogCtx;
use mysql_common::constants::ColumnType;
use mysql_common::io::ParseBuf;
use mysql_common::proto::MyDeserialize;
use pyo3::prelude::*;

use crate::DecodeError;

/// How one column's values are laid out in a rows event.
pub struct ColumnLayout {
    /// the real type (a STRING column's metadata says whether it is CHAR, ENUM or SET)
    pub column_type: ColumnType,
    pub meta: Vec<u8>,
}

#[pyclass(frozen, module = "mysql_cdc_native")]
pub struct TableMap {
    pub columns: Vec<ColumnLayout>,
}

/// The post-header lengths of binlog format v4, which MySQL 5.6+ and MariaDB 10+ both write:
/// a 6-byte table id, and (for v2 rows events) the extra-data block.
pub fn format_v4() -> FormatDescriptionEvent<'static> {
    FormatDescriptionEvent::new(BinlogVersion::Version4)
}

#[pymethods]
impl TableMap {
    /// `body`: the event without its 19-byte header and without its checksum.
    #[new]
    fn new(body: &[u8]) -> PyResult<Self> {
        let fde = format_v4();
        let ctx = BinlogCtx::new(body.len() + 19, &fde);
        let event = TableMapEvent::deserialize(ctx, &mut ParseBuf(body))
            .map_err(|e| DecodeError::new_err(("table_map", -1, format!("unreadable table map event: {e}"))))?;
        let count = event.columns_count() as usize;
        let mut columns = Vec::with_capacity(count);
        for i in 0..count {
            let column_type = match event.get_column_type(i) {
                Ok(Some(t)) => t,
                Ok(None) => {
                    return Err(DecodeError::new_err(("table_map", i as i64, "the table map lists fewer types than columns".to_string())))
                }
                Err(e) => return Err(DecodeError::new_err(("table_map", i as i64, format!("column type: {e}")))),
            };
            // every column has metadata bytes (possibly none); None means the metadata block is
            // shorter than the types say: a table map we must not guess about
            let meta = event.get_column_metadata(i).ok_or_else(|| {
                DecodeError::new_err(("table_map", i as i64, "the table map's metadata block ends early".to_string()))
            })?;
            columns.push(ColumnLayout { column_type, meta: meta.to_vec() });
        }
        Ok(TableMap { columns })
    }

    #[getter]
    fn column_count(&self) -> usize {
        self.columns.len()
    }

    /// The binlog type code of each column (after the STRING -> ENUM/SET/CHAR resolution).
    #[getter]
    fn column_types(&self) -> Vec<u8> {
        self.columns.iter().map(|c| c.column_type as u8).collect()
    }
}
