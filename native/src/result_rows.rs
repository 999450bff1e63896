//! A `SELECT`'s row packets (the text protocol) -> Arrow columns: what a snapshot copy reads.
//!
//! PyMySQL sends the query and reads the column definitions; from the first row on, the caller
//! hands the connection's bytes over as they arrive (`feed`), in pieces of any size. The decoder
//! cuts them into packets (a payload of 0xFFFFFF bytes continues in the next packet), checks each
//! packet's sequence number, and parses every row's length-encoded values straight into the
//! column builders, until a batch is full (`batch_rows` rows or `batch_bytes` bytes of rows: the
//! rest waits for the caller to take the batch). The result set ends with an EOF packet (0xFE, shorter than 9 bytes: a row
//! whose first value is 2^24 bytes or longer also starts with 0xFE, then an 8-byte length) or an
//! ERR packet (0xFF), kept whole for the caller to raise as PyMySQL would.

use arrow_array::{ArrayRef, StructArray};
use arrow_schema::Field;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::builders::ColumnBuilder;
use crate::packets::Packets;
use crate::plan::ColumnPlan;
use crate::rows::DecodedRows;
use crate::DecodeError;

const NULL: u8 = 0xFB;

/// (reason, column index or -1, message), as `RowsDecoder` reports them
type RowsError = (&'static str, i64, String);

fn protocol(message: impl Into<String>) -> RowsError {
    ("protocol", -1, message.into())
}

enum End {
    /// the EOF packet's status flags
    Rows { status: u16 },
    /// the ERR packet, whole
    Error(Vec<u8>),
}

#[pyclass(module = "mysql_cdc_native")]
pub struct ResultRowsDecoder {
    names: Vec<String>,
    plans: Vec<ColumnPlan>,
    packets: Packets,
    rows: RowBatch,
}

/// The rows parsed since the last take, and how the result set ended.
struct RowBatch {
    builders: Vec<ColumnBuilder>,
    count: usize,
    /// row bytes parsed since the last take
    bytes: usize,
    batch_rows: usize,
    batch_bytes: usize,
    end: Option<End>,
}

/// One length-encoded value of a row: `None` for NULL.
fn value<'a>(row: &mut &'a [u8]) -> Result<Option<&'a [u8]>, RowsError> {
    let short = || protocol("a row packet ends inside a value");
    let (&first, rest) = row.split_first().ok_or_else(short)?;
    let (length, rest) = match first {
        NULL => {
            *row = rest;
            return Ok(None);
        }
        0xFC | 0xFD | 0xFE => {
            let width = match first {
                0xFC => 2,
                0xFD => 3,
                _ => 8,
            };
            let bytes = rest.get(..width).ok_or_else(short)?;
            let length = bytes.iter().rev().fold(0u64, |acc, b| (acc << 8) | *b as u64);
            (length as usize, &rest[width..])
        }
        0xFF => return Err(protocol("a row value starts with 0xFF")),
        small => (small as usize, rest),
    };
    let text = rest.get(..length).ok_or_else(short)?;
    *row = &rest[length..];
    Ok(Some(text))
}

impl RowBatch {
    fn row(&mut self, mut payload: &[u8]) -> Result<(), RowsError> {
        for (i, builder) in self.builders.iter_mut().enumerate() {
            match value(&mut payload)? {
                None => builder.append_null(),
                Some(text) => builder.append_text(text).map_err(|(reason, message)| (reason, i as i64, message))?,
            }
        }
        if !payload.is_empty() {
            return Err(protocol(format!("a row packet holds more than its {} values", self.builders.len())));
        }
        self.count += 1;
        Ok(())
    }

    /// A whole payload: a row, or the end of the result set.
    fn payload(&mut self, payload: &[u8]) -> Result<(), RowsError> {
        match payload.first() {
            Some(0xFE) if payload.len() < 9 => {
                let status = payload.get(3..5).map_or(0, |s| u16::from_le_bytes([s[0], s[1]]));
                self.end = Some(End::Rows { status });
                Ok(())
            }
            Some(0xFF) => {
                self.end = Some(End::Error(payload.to_vec()));
                Ok(())
            }
            _ => {
                self.bytes += payload.len();
                self.row(payload)
            }
        }
    }

    fn is_full(&self) -> bool {
        self.count >= self.batch_rows || self.bytes >= self.batch_bytes
    }

}

impl ResultRowsDecoder {
    fn feed_bytes(&mut self, data: &[u8]) -> Result<(), RowsError> {
        self.packets.extend(data);
        while self.rows.end.is_none() && !self.rows.is_full() {
            match self.packets.next_payload().map_err(protocol)? {
                Some(payload) => self.rows.payload(payload)?,
                None => return Ok(()),
            }
        }
        match self.packets.unread() {
            unread if unread > 0 && self.rows.end.is_some() => {
                Err(protocol(format!("{unread} bytes after the end of the result set")))
            }
            _ => Ok(()),
        }
    }
}

#[pymethods]
impl ResultRowsDecoder {
    /// `columns`: one `(name, kind, number, names)` per selected column, in order; `seq`: the
    /// sequence number of the first row packet; a batch is full at `batch_rows` rows or
    /// `batch_bytes` bytes of rows.
    #[new]
    fn new(columns: &Bound<'_, PyList>, seq: u8, batch_rows: usize, batch_bytes: usize) -> PyResult<Self> {
        let (mut names, mut plans) = (Vec::new(), Vec::new());
        for column in columns.iter() {
            let column = column.downcast::<PyTuple>()?;
            names.push(column.get_item(0)?.extract::<String>()?);
            plans.push(ColumnPlan::from_python(&column.get_slice(1, 4).into_any())?);
        }
        let builders = plans.iter().map(|p| ColumnBuilder::new(p.clone(), false)).collect();
        let rows = RowBatch { builders, count: 0, bytes: 0, batch_rows, batch_bytes, end: None };
        Ok(ResultRowsDecoder { names, plans, packets: Packets::new(seq), rows })
    }

    /// Parse `data`, the next bytes the connection received (and what an earlier call left when
    /// its batch was full), until the batch is full or the bytes run out. Runs without the GIL.
    fn feed(&mut self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        py.allow_threads(|| self.feed_bytes(data))
            .map_err(|(reason, column, message)| DecodeError::new_err((reason, column, message)))
    }

    /// Whether the batch is full: take it, then `feed(b"")` to go on with the bytes kept.
    #[getter]
    fn full(&self) -> bool {
        self.rows.is_full()
    }

    /// Whether the result set's last packet has been parsed.
    #[getter]
    fn done(&self) -> bool {
        self.rows.end.is_some()
    }

    /// The ERR packet that ended the result set, whole, or None.
    #[getter]
    fn error<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        match &self.rows.end {
            Some(End::Error(packet)) => Some(PyBytes::new(py, packet)),
            _ => None,
        }
    }

    /// The EOF packet's status flags (0 before the end, or after an error).
    #[getter]
    fn status(&self) -> u16 {
        match self.rows.end {
            Some(End::Rows { status }) => status,
            _ => 0,
        }
    }

    /// The sequence number the connection's next packet would carry.
    #[getter]
    fn seq(&self) -> u8 {
        self.packets.seq
    }

    /// Rows parsed and not taken yet.
    #[getter]
    fn rows(&self) -> usize {
        self.rows.count
    }

    /// The rows parsed so far, as a struct array of the columns; starts afresh.
    fn take(&mut self) -> DecodedRows {
        let fields: Vec<Field> = self.names.iter().zip(&self.plans).map(|(n, p)| Field::new(n, p.data_type(), true)).collect();
        let arrays: Vec<ArrayRef> = self.rows.builders.iter_mut().map(ColumnBuilder::finish).collect();
        (self.rows.count, self.rows.bytes) = (0, 0);
        DecodedRows::new(StructArray::new(fields.into(), arrays, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packets::packet;
    use arrow_array::Array;

    fn decoder(plans: Vec<ColumnPlan>) -> ResultRowsDecoder {
        let names = (0..plans.len()).map(|i| format!("c{i}")).collect();
        let builders = plans.iter().map(|p| ColumnBuilder::new(p.clone(), false)).collect();
        let rows = RowBatch { builders, count: 0, bytes: 0, batch_rows: usize::MAX, batch_bytes: usize::MAX, end: None };
        ResultRowsDecoder { names, plans, packets: Packets::new(3), rows }
    }

    #[test]
    fn rows_split_anywhere_between_feeds_are_read_whole() {
        let mut stream = packet(3, b"\x0212\xfb");
        stream.extend(packet(4, b"\x02-7\x03abc"));
        stream.extend(packet(5, b"\xfe\x00\x00\x22\x00"));
        for cut in 0..stream.len() {
            let mut d = decoder(vec![ColumnPlan::Int64, ColumnPlan::Text]);
            d.feed_bytes(&stream[..cut]).unwrap();
            d.feed_bytes(&stream[cut..]).unwrap();
            assert_eq!(d.rows.count, 2, "cut at {cut}");
            assert!(matches!(d.rows.end, Some(End::Rows { status: 0x22 })));
            assert_eq!(d.packets.seq, 6);
        }
    }

    #[test]
    fn a_full_batch_keeps_the_rest_for_the_next_feed() {
        let mut stream = Vec::new();
        for (seq, row) in [(3, b"\x011"), (4, b"\x012"), (5, b"\x013")] {
            stream.extend(packet(seq, row));
        }
        stream.extend(packet(6, b"\xfe\x00\x00\x02\x00"));
        let mut d = decoder(vec![ColumnPlan::Int64]);
        d.rows.batch_rows = 2;
        d.feed_bytes(&stream).unwrap();
        assert_eq!((d.rows.count, d.rows.is_full(), d.rows.end.is_some()), (2, true, false));
        d.take();
        d.feed_bytes(b"").unwrap();
        assert_eq!((d.rows.count, d.rows.end.is_some()), (1, true));
    }

    #[test]
    fn a_payload_over_several_packets_is_one_row() {
        use crate::packets::MAX_PAYLOAD;
        let mut row = vec![0xFE];
        row.extend((MAX_PAYLOAD as u64 + 10).to_le_bytes());
        row.resize(9 + MAX_PAYLOAD + 10, b'y');
        let mut stream = packet(3, &row[..MAX_PAYLOAD]);
        stream.extend(packet(4, &row[MAX_PAYLOAD..]));
        stream.extend(packet(5, b"\xfe\x00\x00\x02\x00"));
        let mut d = decoder(vec![ColumnPlan::Binary]);
        d.feed_bytes(&stream).unwrap();
        assert_eq!((d.rows.count, d.rows.end.is_some()), (1, true));
        let rows = d.take();
        assert_eq!(rows.array.as_ref().map(|a| a.len()), Some(1));
    }

    #[test]
    fn a_value_of_a_long_length_is_not_mistaken_for_the_end() {
        let mut row = vec![0xFC, 0x2C, 0x01];
        row.extend(std::iter::repeat(b'x').take(300));
        let mut d = decoder(vec![ColumnPlan::Text]);
        d.feed_bytes(&packet(3, &row)).unwrap();
        assert_eq!((d.rows.count, d.rows.end.is_none()), (1, true));
    }

    #[test]
    fn an_error_packet_ends_the_rows_and_out_of_order_packets_stop() {
        let mut d = decoder(vec![ColumnPlan::Int64]);
        d.feed_bytes(&packet(3, b"\xff\x7a\x04#HY000boom")).unwrap();
        assert!(matches!(&d.rows.end, Some(End::Error(p)) if p.len() == 13));
        let mut d = decoder(vec![ColumnPlan::Int64]);
        assert_eq!(d.feed_bytes(&packet(9, b"\x011")).unwrap_err().0, "protocol");
    }
}
