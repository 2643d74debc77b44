//! A joiner certifies from the same index as its donor: the certification state installed
//! from a donor's stream (after its trip through the wire format) equals the donor's.

use super::Invariant;
use crate::types::Seqno;
use std::collections::BTreeMap;

#[derive(Default)]
pub struct JoinerIndex {
    /// (joiner, at) -> the digest of the donor's index in the stream.
    sent: BTreeMap<(usize, Seqno), u64>,
}

impl Invariant for JoinerIndex {
    fn name(&self) -> &'static str {
        "a joiner certifies from its donor's index"
    }

    fn transfer_sent(&mut self, node: usize, at: Seqno, donor_digest: u64) {
        self.sent.insert((node, at), donor_digest);
    }

    fn on_fork(&mut self, boundary: Seqno) {
        self.sent.retain(|&(_, at), _| at <= boundary);
    }

    fn index_installed(&mut self, node: usize, at: Seqno, digest: u64) -> Result<(), String> {
        match self.sent.remove(&(node, at)) {
            Some(donor) if donor == digest => Ok(()),
            Some(donor) => {
                Err(format!("node {} installed index {digest:x} at seqno {at}, its donor sent {donor:x}", node + 1))
            }
            None => Err(format!("node {} installed an index at seqno {at} that no donor sent", node + 1)),
        }
    }
}
