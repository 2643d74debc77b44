//! Corrupted copies of valid encodings, for the tests that feed every decoder a peer can reach
//! (record, hello, message with its Raft part, ordered ops, snapshot state; the provider's
//! writesets, control messages and state-transfer frames): whatever a broken or hostile peer
//! sends must come back as an error or a value, never a panic or a huge allocation.
use crate::rng::Rng;

/// `count` corruptions of `samples` (none empty), from `seed`: a flipped bit, a cut, two
/// overwritten bytes, inserted bytes, a length-like field set to its maximum, or random bytes.
pub fn corruptions(samples: &[Vec<u8>], count: usize, seed: u64) -> impl Iterator<Item = Vec<u8>> + '_ {
    assert!(samples.iter().all(|s| !s.is_empty()), "corrupting needs bytes to start from");
    let mut rng = Rng::new(seed);
    (0..count).map(move |_| {
        let mut bytes = samples[rng.range(0, samples.len() as u64) as usize].clone();
        let at = |rng: &mut Rng, bytes: &[u8]| rng.range(0, bytes.len() as u64) as usize;
        match rng.range(0, 6) {
            0 => {
                let i = at(&mut rng, &bytes);
                bytes[i] ^= 1 << rng.range(0, 8);
            }
            1 => bytes.truncate(at(&mut rng, &bytes)),
            2 => {
                for _ in 0..2 {
                    let i = at(&mut rng, &bytes);
                    bytes[i] = rng.next_u64() as u8;
                }
            }
            3 => {
                let i = at(&mut rng, &bytes);
                let extra: Vec<u8> = (0..rng.range(1, 16)).map(|_| rng.next_u64() as u8).collect();
                bytes.splice(i..i, extra);
            }
            4 => {
                let i = at(&mut rng, &bytes);
                let end = (i + 4).min(bytes.len());
                bytes[i..end].fill(0xff);
            }
            _ => bytes = (0..rng.range(0, 64)).map(|_| rng.next_u64() as u8).collect(),
        }
        bytes
    })
}

#[cfg(test)]
mod tests {
    use super::corruptions;
    use crate::codec::Reader;
    use crate::record::{self, RecordKind};
    use crate::state::{AppliedState, DirectoryEntry, Op, Part};
    use crate::transport::Hello;
    use crate::types::{Genesis, MemberId, MemberInfo, View};

    fn info(id: u64) -> MemberInfo {
        MemberInfo {
            id: MemberId(id),
            name: format!("node{id}"),
            address: format!("10.0.0.{id}:4567"),
            incoming_address: format!("10.0.0.{id}:3306"),
            incarnation: 77,
            arbitrator: false,
            weight: 1,
            segment: 0,
        }
    }

    /// Decodes every corruption; returns how many decoded (the rest were refused).
    fn feed<T>(samples: &[Vec<u8>], decode: impl Fn(&[u8]) -> Option<T>) -> usize {
        corruptions(samples, 20_000, 11).filter(|bytes| decode(bytes).is_some()).count()
    }

    #[test]
    fn records_and_hellos_refuse_corruption() {
        let samples: Vec<Vec<u8>> = [b"".as_slice(), b"x", &[7; 300]]
            .iter()
            .map(|body| record::encode(RecordKind::Message, body))
            .chain([Hello { protocol: 1, cluster_name: "prod".into(), member: MemberId(3) }.encode()])
            .collect();
        let accepted = feed(&samples, |bytes| {
            let (kind, body, _) = record::decode(bytes, 1 << 20).ok()?;
            (kind == RecordKind::Hello).then(|| Hello::decode(body)).transpose().ok()
        });
        // Checksums catch every change that keeps a record whole.
        assert!(accepted < 2_000, "accepted {accepted}");
    }

    #[test]
    fn ordered_ops_and_snapshot_states_refuse_or_decode_corruption() {
        let ops = [
            Op::Writeset { origin: MemberId(1), request: 4, data: vec![1; 40] },
            Op::Join(info(2)),
            Op::Leave(MemberId(2)),
            Op::Genesis(Genesis { history: [5; 16], base_seqno: 9, group: 3 }),
            Op::Message { origin: MemberId(2), request: 5, data: vec![2; 8] },
            Op::Remerge { view_id: 6 },
            Op::Part(Part { origin: MemberId(1), request: 7, upload: 6, part: 2, data: vec![3; 20] }),
            Op::Assembled { origin: MemberId(1), request: 8, parts: 3, data: vec![4; 10] },
        ];
        let samples: Vec<Vec<u8>> = ops.iter().map(Op::encode).collect();
        feed(&samples, |bytes| Op::decode(bytes).ok());

        let mut state = AppliedState { seqno: 12, group: 3, history: [5; 16], ..AppliedState::default() };
        state.view = View { view_id: 4, members: vec![info(1), info(2)] };
        // Member 1 casts three votes: the membership carries two shadows of it.
        state.membership.voters = [MemberId(1), MemberId(2)].into();
        state.membership.votes = [(MemberId(1), 3)].into();
        for id in [1, 2] {
            state.directory.insert(MemberId(id), DirectoryEntry { info: info(id), wants_in: true });
        }
        let mut w = crate::codec::Writer::default();
        state.encode(&mut w);
        feed(&[w.bytes], |bytes| AppliedState::decode(&mut Reader::new(bytes)).ok());
    }
}
