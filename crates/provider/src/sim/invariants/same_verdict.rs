//! Certification is deterministic: every node that certifies a seqno with the group's
//! certification state reaches the same verdict and the same dependency.

use super::Invariant;
use crate::certification::Verdict;
use crate::types::Seqno;
use std::collections::BTreeMap;

#[derive(Default)]
pub struct SameVerdict {
    verdicts: BTreeMap<Seqno, (Verdict, usize)>,
}

impl Invariant for SameVerdict {
    fn name(&self) -> &'static str {
        "same certification verdict everywhere"
    }

    fn certified(&mut self, node: usize, seqno: Seqno, verdict: Verdict, with_group_state: bool) -> Result<(), String> {
        if !with_group_state {
            return Ok(());
        }
        match self.verdicts.get(&seqno) {
            Some(&(first, by)) if first != verdict => Err(format!(
                "seqno {seqno}: node {} certified {first:?}, node {} certified {verdict:?}",
                by + 1,
                node + 1
            )),
            Some(_) => Ok(()),
            None => {
                self.verdicts.insert(seqno, (verdict, node));
                Ok(())
            }
        }
    }

    fn on_fork(&mut self, boundary: Seqno) {
        self.verdicts.split_off(&(boundary + 1));
    }
}
