//! Writesets ordered in parts (docs/design/group-writeset-parts.md): the origin's side
//! ([`Upload`]: cut the writeset, keep a window of parts in flight, then send its end) and
//! every member's side ([`Assembly`]: gather the parts of other members' writesets until
//! their end takes a seqno).

use crate::state::OpenUpload;
use crate::types::MemberId;
use std::collections::BTreeMap;

/// Parts of one writeset ordered but not yet applied by its origin, at most: enough to keep
/// the leader's link busy, few enough that small writesets interleave and memory stays at a
/// few parts.
pub const WINDOW_PARTS: usize = 8;

/// Times an upload starts over after a leader change lost or refused one of its parts, at
/// most, before its writeset fails with `SubmitError::Retry`.
pub const RESTARTS: u32 = 3;

/// One of this member's writesets ordered in parts.
#[derive(Debug)]
pub struct Upload {
    /// The writeset's request number; its end is ordered under it.
    pub request: u64,
    /// The whole writeset: the origin delivers it from here, so it keeps one copy.
    data: Vec<u8>,
    /// Bytes handed out as parts.
    sent: usize,
    /// Parts handed out.
    parts: u32,
    /// Requests of parts handed out and not yet applied here, with the Raft term each was
    /// sent in.
    in_flight: BTreeMap<u64, u64>,
    /// The end went out (under `request`): from then on only its outcome is awaited.
    pub end_sent: bool,
    /// When to send the end again if it has not been applied (a lost forward).
    pub end_resend_ms: u64,
    /// Times it started over (`restart`).
    restarts: u32,
}

/// What an upload sends next.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    Part { part: u32, data: Vec<u8> },
    End { parts: u32, data: Vec<u8> },
}

impl Upload {
    pub fn new(request: u64, data: Vec<u8>) -> Self {
        Self {
            request,
            data,
            sent: 0,
            parts: 0,
            in_flight: BTreeMap::new(),
            end_sent: false,
            end_resend_ms: 0,
            restarts: 0,
        }
    }

    /// Starts over from part 0 if its end has not gone out and it has restarts left; returns
    /// the part requests that were on their way, which count for nothing from now on. A new
    /// part 0 replaces the upload every member holds open, and parts of the first try can
    /// only be ordered before it (they were in the log of the leader that orders it, or are
    /// lost), so its applied parts are refused or ignored.
    pub fn restart(&mut self) -> Option<Vec<u64>> {
        if self.end_sent || self.restarts >= RESTARTS {
            return None;
        }
        self.restarts += 1;
        self.sent = 0;
        self.parts = 0;
        Some(std::mem::take(&mut self.in_flight).into_keys().collect())
    }

    /// The next part while the window has room, then (every part applied) the end: the last
    /// `part_bytes` or fewer. `None` while the window is full or the parts are on their way.
    /// `term`: the Raft term the part is sent in.
    pub fn next(&mut self, part_bytes: usize, part_request: u64, term: u64) -> Option<Next> {
        if self.end_sent {
            return None;
        }
        let rest = self.data.len() - self.sent;
        if rest > part_bytes {
            if self.in_flight.len() >= WINDOW_PARTS {
                return None;
            }
            let data = self.data[self.sent..self.sent + part_bytes].to_vec();
            let part = self.parts;
            self.sent += part_bytes;
            self.parts += 1;
            self.in_flight.insert(part_request, term);
            return Some(Next::Part { part, data });
        }
        if !self.in_flight.is_empty() {
            return None;
        }
        self.end_sent = true;
        Some(Next::End { parts: self.parts, data: self.data[self.sent..].to_vec() })
    }

    /// Whether `next` has something to send.
    pub fn has_room(&self, part_bytes: usize) -> bool {
        let parts_left = self.data.len() - self.sent > part_bytes;
        !self.end_sent && if parts_left { self.in_flight.len() < WINDOW_PARTS } else { self.in_flight.is_empty() }
    }

    /// The end again, to resend it as it was.
    pub fn end(&self) -> Next {
        Next::End { parts: self.parts, data: self.data[self.sent..].to_vec() }
    }

    /// A part of ours was applied; whether it was one of this upload's.
    pub fn part_applied(&mut self, part_request: u64) -> bool {
        self.in_flight.remove(&part_request).is_some()
    }

    /// Whether a part still on its way was sent before `term`: once the first entry of
    /// `term` is applied, such a part was dropped with an earlier leader's log.
    pub fn lost_before(&self, term: u64) -> bool {
        self.in_flight.values().any(|&sent_in| sent_in < term)
    }

    pub fn owns(&self, request: u64) -> bool {
        self.request == request || self.in_flight.contains_key(&request)
    }

    /// Part requests still on their way.
    pub fn in_flight(&self) -> impl Iterator<Item = u64> + '_ {
        self.in_flight.keys().copied()
    }

    pub fn into_data(self) -> Vec<u8> {
        self.data
    }
}

/// Parts of other members' writesets (and of this member's earlier lives), gathered in
/// order until their end is applied. Mirrors the applied state's open uploads.
#[derive(Debug, Default)]
pub struct Assembly {
    buffers: BTreeMap<MemberId, (u64, Vec<u8>)>,
}

impl Assembly {
    /// An applied part: the first one starts a buffer, an accepted one extends it.
    pub fn add(&mut self, origin: MemberId, upload: u64, part_is_first: bool, data: Vec<u8>) {
        if part_is_first {
            self.buffers.insert(origin, (upload, data));
        } else if let Some((open, buffer)) = self.buffers.get_mut(&origin) {
            if *open == upload {
                crate::codec::extend_in_small_steps(buffer, &data);
            }
        }
    }

    /// The whole writeset `upload` of `origin`: its parts (`bytes` of them) then `tail`.
    /// `None` if they are not all here, which a correct log never leaves.
    pub fn finish(&mut self, origin: MemberId, upload: u64, bytes: u64, tail: Vec<u8>) -> Option<Vec<u8>> {
        let (open, mut buffer) = self.buffers.remove(&origin)?;
        if open != upload || buffer.len() as u64 != bytes {
            return None;
        }
        buffer.reserve_exact(tail.len());
        buffer.extend_from_slice(&tail);
        crate::codec::trim_slack(&mut buffer);
        Some(buffer)
    }

    /// Drops the buffers of uploads the applied state no longer holds open.
    pub fn retain(&mut self, open: &BTreeMap<MemberId, OpenUpload>) {
        self.buffers.retain(|origin, (upload, _)| open.get(origin).is_some_and(|u| u.upload == *upload));
    }

    pub fn clear(&mut self) {
        self.buffers.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upload_keeps_its_window_and_sends_its_end_once_every_part_is_applied() {
        let data: Vec<u8> = (0..10u8).collect();
        let mut upload = Upload::new(100, data);
        let mut requests = 200..;
        let mut parts = Vec::new();
        // Parts of 1 byte: a window's worth, then nothing until one is applied.
        for _ in 0..WINDOW_PARTS {
            let request = requests.next().unwrap();
            let Some(Next::Part { part, data }) = upload.next(1, request, 1) else { panic!("a part") };
            parts.push((request, part, data));
        }
        assert_eq!(upload.next(1, 999, 1), None);
        assert_eq!(parts[3], (203, 3, vec![3]));
        assert!(upload.owns(203) && upload.owns(100) && !upload.owns(999));
        for (request, _, _) in &parts {
            assert!(upload.part_applied(*request));
        }
        assert!(!upload.part_applied(200), "applied once");
        let Some(Next::Part { part: 8, data }) = upload.next(1, 300, 1) else { panic!("part 8") };
        assert_eq!(data, vec![8]);
        // The last byte is the end, but not before part 8 is applied.
        assert_eq!(upload.next(1, 301, 1), None);
        upload.part_applied(300);
        assert_eq!(upload.next(1, 302, 1), Some(Next::End { parts: 9, data: vec![9] }));
        assert!(upload.end_sent);
        assert_eq!(upload.next(1, 303, 1), None);
        assert_eq!(upload.end(), Next::End { parts: 9, data: vec![9] });
        assert_eq!(upload.into_data(), (0..10u8).collect::<Vec<u8>>());
    }

    #[test]
    fn an_upload_starts_over_from_its_first_part_a_few_times_and_never_after_its_end() {
        let mut upload = Upload::new(100, (0..4u8).collect());
        assert!(matches!(upload.next(1, 200, 1), Some(Next::Part { part: 0, .. })));
        assert!(matches!(upload.next(1, 201, 2), Some(Next::Part { part: 1, .. })));
        assert!(upload.lost_before(2) && !upload.lost_before(1), "a part sent in term 1 is lost by term 2");
        assert_eq!(upload.restart(), Some(vec![200, 201]));
        assert!(!upload.owns(200) && !upload.part_applied(201), "the first try's parts count for nothing");
        assert_eq!(upload.next(1, 202, 1), Some(Next::Part { part: 0, data: vec![0] }));
        for _ in 1..RESTARTS {
            assert!(upload.restart().is_some());
        }
        assert_eq!(upload.restart(), None, "out of restarts");
        let mut ended = Upload::new(100, vec![1]);
        assert!(matches!(ended.next(1, 300, 1), Some(Next::End { parts: 0, .. })));
        assert_eq!(ended.restart(), None);
    }

    #[test]
    fn assembly_follows_the_open_uploads() {
        let (a, b) = (MemberId(1), MemberId(2));
        let mut assembly = Assembly::default();
        assembly.add(a, 7, true, b"he".to_vec());
        assembly.add(a, 7, false, b"ll".to_vec());
        assembly.add(a, 6, false, b"xx".to_vec());
        assembly.add(b, 9, true, b"zz".to_vec());
        assert_eq!(assembly.finish(a, 7, 4, b"o".to_vec()), Some(b"hello".to_vec()));
        assert_eq!(assembly.finish(a, 7, 4, b"o".to_vec()), None, "taken");
        // b's upload was dropped by the state (b left the view).
        assembly.retain(&BTreeMap::new());
        assert_eq!(assembly.finish(b, 9, 2, Vec::new()), None);
        // A first part starts over: what an abandoned upload left goes.
        assembly.add(a, 8, true, b"ab".to_vec());
        assembly.add(a, 10, true, b"c".to_vec());
        assert_eq!(assembly.finish(a, 10, 1, b"d".to_vec()), Some(b"cd".to_vec()));
    }
}
