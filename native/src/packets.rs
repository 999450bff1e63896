//! MySQL protocol packets cut from a connection's bytes, which arrive in pieces of any size: how
//! the copy's row reader (`result_rows`) and the binlog framer (`event_frames`) read a connection
//! PyMySQL opened.
//!
//! A packet is a 3-byte payload length, a 1-byte sequence number and the payload. A payload of
//! 0xFFFFFF bytes goes on in the next packet (and one of exactly that size ends with an empty
//! packet); `next_payload` hands it over once whole.

pub const MAX_PAYLOAD: usize = 0xFF_FFFF;

pub struct Packets {
    /// bytes received; those before `at` are read
    pending: Vec<u8>,
    at: usize,
    /// a payload over several packets, gathered until its last packet
    long_payload: Vec<u8>,
    /// `long_payload` was handed over whole: cleared by the next call
    long_taken: bool,
    /// the sequence number the next packet must carry
    pub seq: u8,
}

impl Packets {
    pub fn new(seq: u8) -> Self {
        Packets { pending: Vec::new(), at: 0, long_payload: Vec::new(), long_taken: false, seq }
    }

    /// Add the next bytes the connection received.
    pub fn extend(&mut self, data: &[u8]) {
        if self.at > 0 {
            self.pending.drain(..self.at);
            self.at = 0;
        }
        self.pending.extend_from_slice(data);
    }

    /// The next whole payload, or None while the bytes so far end inside a packet; an error names
    /// a packet out of sequence.
    pub fn next_payload(&mut self) -> Result<Option<&[u8]>, String> {
        if self.long_taken {
            self.long_payload.clear();
            self.long_taken = false;
        }
        loop {
            let at = self.at;
            let Some(header) = self.pending.get(at..at + 4) else { return Ok(None) };
            let length = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
            if self.pending.len() < at + 4 + length {
                return Ok(None);
            }
            if header[3] != self.seq {
                return Err(format!("packet sequence number {} where {} was due", header[3], self.seq));
            }
            self.seq = self.seq.wrapping_add(1);
            self.at = at + 4 + length;
            let body = &self.pending[at + 4..self.at];
            if length < MAX_PAYLOAD && self.long_payload.is_empty() {
                return Ok(Some(body));
            }
            self.long_payload.extend_from_slice(body);
            if length < MAX_PAYLOAD {
                self.long_taken = true;
                return Ok(Some(&self.long_payload));
            }
        }
    }

    /// Bytes received and not read yet.
    pub fn unread(&self) -> usize {
        self.pending.len() - self.at
    }
}

/// One packet's bytes, as a server sends it (for tests).
#[cfg(test)]
pub fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let mut bytes = (payload.len() as u32).to_le_bytes()[..3].to_vec();
    bytes.push(seq);
    bytes.extend_from_slice(payload);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payloads(packets: &mut Packets) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(p) = packets.next_payload().unwrap() {
            out.push(p.to_vec());
        }
        out
    }

    #[test]
    fn payloads_split_anywhere_are_read_whole_and_in_sequence() {
        let mut stream = packet(7, b"one");
        stream.extend(packet(8, b""));
        stream.extend(packet(9, b"three"));
        for cut in 0..=stream.len() {
            let mut p = Packets::new(7);
            p.extend(&stream[..cut]);
            let mut got = payloads(&mut p);
            p.extend(&stream[cut..]);
            got.extend(payloads(&mut p));
            assert_eq!(got, vec![b"one".to_vec(), vec![], b"three".to_vec()], "cut at {cut}");
            assert_eq!((p.seq, p.unread()), (10, 0));
        }
    }

    #[test]
    fn a_long_payload_is_one_and_the_next_starts_afresh() {
        let long = vec![b'x'; MAX_PAYLOAD + 5];
        let mut stream = packet(0, &long[..MAX_PAYLOAD]);
        stream.extend(packet(1, &long[MAX_PAYLOAD..]));
        stream.extend(packet(2, b"after"));
        let exact = vec![b'y'; MAX_PAYLOAD];
        stream.extend(packet(3, &exact));
        stream.extend(packet(4, b""));
        let mut p = Packets::new(0);
        p.extend(&stream);
        assert_eq!(payloads(&mut p), vec![long, b"after".to_vec(), exact]);
    }

    #[test]
    fn a_packet_out_of_sequence_is_an_error() {
        let mut p = Packets::new(3);
        p.extend(&packet(4, b"x"));
        assert_eq!(p.next_payload().unwrap_err(), "packet sequence number 4 where 3 was due");
    }
}
