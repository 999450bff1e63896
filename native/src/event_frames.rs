//! The binlog dump's packets -> binlog events: how capture frames the stream.
//!
//! mysql-replication connects, registers as a replica, asks for the dump and reads its first
//! event; from then on the caller hands the connection's bytes over as they arrive (`feed`), in
//! pieces of any size. The framer cuts them into packets (a payload of 0xFFFFFF bytes continues in
//! the next packet), checks each packet's sequence number, and returns every whole event with the
//! header fields capture reads for each one: its type, timestamp, end position and size. What an
//! event holds is left to the caller (the compiled row decoder for rows events, the library for
//! everything it does not read itself). The dump ends with an EOF packet (0xFE, shorter than 9
//! bytes: a non-blocking dump at the binlog's end) or an ERR packet (0xFF), kept whole for the
//! caller to raise as PyMySQL would.
//!
//! Why this is compiled: a one-row transaction is four or five events, and framing each through
//! PyMySQL's packet reader and the library's event wrapper cost about two thirds of the time an
//! extract of such transactions took.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::packets::Packets;
use crate::DecodeError;

/// the common header of every event: timestamp (4), type (1), server id (4), size (4), end
/// position (4), flags (2)
const HEADER_SIZE: usize = 19;

fn protocol(message: String) -> PyErr {
    DecodeError::new_err(("protocol", -1i64, message))
}

enum End {
    Dump,
    /// the ERR packet, whole
    Error(Vec<u8>),
}

#[pyclass(module = "mysql_cdc_native")]
pub struct EventFrames {
    packets: Packets,
    end: Option<End>,
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// One whole payload: an event (after its 0x00 marker), appended to `events`, or the end of the
/// dump.
fn payload<'py>(py: Python<'py>, payload: &[u8], events: &Bound<'py, PyList>) -> PyResult<Option<End>> {
    match payload.first() {
        Some(0x00) => {
            let event = &payload[1..];
            if event.len() < HEADER_SIZE {
                return Err(protocol(format!("an event of {} bytes, shorter than its header", event.len())));
            }
            let size = u32_at(event, 9);
            let log_pos = u32_at(event, 13);
            // the size the header states is what positions are computed from: a packet that
            // disagrees with it would move every position after it
            if size as usize != event.len() {
                return Err(protocol(format!(
                    "the event ending at {log_pos} says it is {size} bytes, its packet holds {}",
                    event.len()
                )));
            }
            let frame = (event[4], u32_at(event, 0), log_pos, size, PyBytes::new(py, event));
            events.append(PyTuple::new(py, frame.into_pyobject(py)?)?)?;
            Ok(None)
        }
        Some(0xFE) if payload.len() < 9 => Ok(Some(End::Dump)),
        Some(0xFF) => Ok(Some(End::Error(payload.to_vec()))),
        Some(other) => Err(protocol(format!("a packet starting with {other:#04x} where a binlog event was due"))),
        None => Err(protocol("an empty packet where a binlog event was due".to_string())),
    }
}

#[pymethods]
impl EventFrames {
    /// `seq`: the sequence number of the next packet (the connection's, after the library's read)
    #[new]
    fn new(seq: u8) -> Self {
        EventFrames { packets: Packets::new(seq), end: None }
    }

    /// The events completed by `data`: a list of `(type, timestamp, log_pos, size, event)`,
    /// `event` the bytes the server sent for it (header, body and checksum, if any).
    fn feed<'py>(&mut self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyList>> {
        let events = PyList::empty(py);
        self.packets.extend(data);
        while self.end.is_none() {
            match self.packets.next_payload().map_err(protocol)? {
                Some(whole) => self.end = payload(py, whole, &events)?,
                None => break,
            }
        }
        match self.packets.unread() {
            unread if unread > 0 && self.end.is_some() => Err(protocol(format!("{unread} bytes after the end of the dump"))),
            _ => Ok(events),
        }
    }

    /// The dump ended (an EOF packet, or an ERR packet: see `error`).
    #[getter]
    fn done(&self) -> bool {
        self.end.is_some()
    }

    /// The ERR packet that ended the dump, whole, or None.
    #[getter]
    fn error<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        match &self.end {
            Some(End::Error(packet)) => Some(PyBytes::new(py, packet)),
            _ => None,
        }
    }

    /// The sequence number of the next packet.
    #[getter]
    fn seq(&self) -> u8 {
        self.packets.seq
    }
}
