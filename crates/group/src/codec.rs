//! Little-endian body encoding for records; every read is bounds-checked.

use std::fmt;

/// A record body that does not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed record body: {}", self.0)
    }
}

impl std::error::Error for DecodeError {}

/// Buffers below this size grow as vectors do (doubling); from it, in small steps.
const SMALL_STEPS_FROM: usize = 1 << 20;
/// A big buffer grows by this fraction of its length (or what the data needs, or
/// `SMALL_STEPS_FROM`, if more): its spare room stays under 0.4 %.
const STEP_DIVISOR: usize = 256;

/// Appends `data`; a buffer of `SMALL_STEPS_FROM` or more grows by a 256th of its length (at
/// least what `data` needs, at least 1 MiB) rather than doubling: a big writeset gathered
/// piece by piece would otherwise hold up to twice its size, and by eighths up to 1.125
/// times (45 MB of a 0.36 GB writeset at its peak, 2026-11-27). Big blocks grow in place
/// (the allocator remaps them), so the extra steps cost no copies: gathering 380 MB in
/// 64 KiB pieces took 0.16 s by eighths and by 256ths alike.
pub fn extend_in_small_steps(buffer: &mut Vec<u8>, data: &[u8]) {
    if buffer.len() >= SMALL_STEPS_FROM && buffer.capacity() - buffer.len() < data.len() {
        buffer.reserve_exact(data.len().max(buffer.len() / STEP_DIVISOR).max(SMALL_STEPS_FROM));
    }
    buffer.extend_from_slice(data);
}

/// Spare room past which `trim_slack` gives it back.
const SLACK_BYTES: usize = 1 << 20;

/// Gives back a finished buffer's spare room beyond `SLACK_BYTES` (what growing in steps
/// left, or what the writeset's keys took), held as long as the writeset otherwise. Big
/// blocks shrink in place.
pub fn trim_slack(buffer: &mut Vec<u8>) {
    if buffer.capacity() - buffer.len() > SLACK_BYTES {
        buffer.shrink_to_fit();
    }
}

#[derive(Default)]
pub struct Writer {
    pub bytes: Vec<u8>,
}

impl Writer {
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.bytes.push(v);
        self
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.bytes.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.bytes.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.u8(u8::from(v))
    }
    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.u32(u32::try_from(v.len()).expect("bounded by the record limit"));
        self.bytes.extend_from_slice(v);
        self
    }
    pub fn str(&mut self, v: &str) -> &mut Self {
        self.bytes(v.as_bytes())
    }
    /// Bytes of a length both sides know (no length prefix).
    pub fn fixed(&mut self, v: &[u8]) -> &mut Self {
        self.bytes.extend_from_slice(v);
        self
    }
    /// Writes a collection length; its items follow.
    pub fn len(&mut self, n: usize) -> &mut Self {
        self.u32(u32::try_from(n).expect("bounded by the record limit"))
    }
}

#[derive(Clone)]
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.rest.len() < n {
            return Err(DecodeError("truncated"));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    pub fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError("bad boolean")),
        }
    }
    pub fn bytes(&mut self) -> Result<Vec<u8>, DecodeError> {
        Ok(self.bytes_in_place()?.to_vec())
    }
    /// A length-prefixed byte string, borrowed from the record.
    pub fn bytes_in_place(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    /// Bytes of a length both sides know, borrowed from the record.
    pub fn fixed(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        self.take(n)
    }
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    pub fn str(&mut self) -> Result<String, DecodeError> {
        String::from_utf8(self.bytes()?).map_err(|_| DecodeError("string is not UTF-8"))
    }
    /// Reads a collection length, refusing one that cannot fit in the remaining bytes
    /// (each item takes at least `min_item_bytes`), so a forged length never allocates.
    pub fn len(&mut self, min_item_bytes: usize) -> Result<usize, DecodeError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_item_bytes.max(1)) > self.rest.len() {
            return Err(DecodeError("collection length exceeds the record"));
        }
        Ok(n)
    }
    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.rest.len()
    }
    /// Every byte was consumed (a field added later may be absent from older records).
    pub fn at_end(&self) -> bool {
        self.rest.is_empty()
    }
    /// Fails unless every byte was consumed.
    pub fn finish(self) -> Result<(), DecodeError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(DecodeError("trailing bytes"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_big_buffer_extended_piece_by_piece_grows_in_small_steps_not_by_doubling() {
        let mut buffer = Vec::new();
        let piece = vec![7u8; 64 << 10];
        for _ in 0..1600 {
            extend_in_small_steps(&mut buffer, &piece);
        }
        assert_eq!(buffer.len(), 100 << 20);
        let step = (buffer.len() / STEP_DIVISOR).max(SMALL_STEPS_FROM);
        assert!(buffer.capacity() <= buffer.len() + step, "{}", buffer.capacity());
        assert!(buffer.iter().all(|&b| b == 7));
        // Small ones grow as vectors do: few reallocations, little room.
        let mut small = Vec::new();
        for _ in 0..100 {
            extend_in_small_steps(&mut small, b"row");
        }
        assert!(small.capacity() < 2 * small.len(), "{}", small.capacity());
        // Finished, the big one keeps at most `SLACK_BYTES` of room; the small one its little.
        buffer.reserve_exact(3 * SLACK_BYTES);
        trim_slack(&mut buffer);
        assert_eq!(buffer.capacity(), buffer.len());
        let room = small.capacity();
        trim_slack(&mut small);
        assert_eq!(small.capacity(), room);
    }

    #[test]
    fn round_trip_and_bounds() {
        let mut w = Writer::default();
        w.u8(1).u32(2).u64(3).bool(true).str("node").bytes(&[9, 9]).fixed(&[7; 3]);
        let mut r = Reader::new(&w.bytes);
        assert_eq!(r.u8().unwrap(), 1);
        assert_eq!(r.u32().unwrap(), 2);
        assert_eq!(r.u64().unwrap(), 3);
        assert!(r.bool().unwrap());
        assert_eq!(r.str().unwrap(), "node");
        assert_eq!(r.bytes().unwrap(), vec![9, 9]);
        assert_eq!(r.array::<3>().unwrap(), [7; 3]);
        r.finish().unwrap();
        assert!(Reader::new(&[1, 2]).array::<3>().is_err());
        assert!(Reader::new(&[5, 0, 0, 0, 1]).bytes().is_err());
        assert!(Reader::new(&[255, 255, 255, 255]).len(1).is_err());
    }
}
