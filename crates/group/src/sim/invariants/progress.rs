//! Progress after heal: once faults stop, every running member is back in one primary
//! component at the same seqno, with the genesis' history, and new writesets are
//! acknowledged.

use super::{EndState, Invariant};

pub struct Progress;

impl Invariant for Progress {
    fn name(&self) -> &'static str {
        "progress after heal"
    }

    fn at_end(&mut self, end: &EndState) -> Result<(), String> {
        if end.probes_acked == 0 {
            // What each member believed, for the replay to start from.
            let states: Vec<String> = end
                .live
                .iter()
                .map(|s| {
                    let leader = s.leader.map_or("none".into(), |l| l.to_string());
                    format!("{}: primary {} term {} leader {leader} view {}", s.id, s.primary, s.term, s.view.view_id)
                })
                .collect();
            return Err(format!("no writeset acknowledged after the heal ({})", states.join("; ")));
        }
        let first = end.live.first().ok_or("no member running")?;
        for s in &end.live {
            if !s.primary {
                return Err(format!("{} is not primary after the heal: {s:?}", s.id));
            }
            if s.view != first.view || s.last_seqno != first.last_seqno {
                return Err(format!(
                    "{} at seqno {} view {}, {} at seqno {} view {}",
                    first.id, first.last_seqno, first.view.view_id, s.id, s.last_seqno, s.view.view_id
                ));
            }
            if !first.view.contains(s.id) {
                return Err(format!("{} runs but is not in the final view", s.id));
            }
            if s.history != end.genesis.history {
                return Err(format!("{} has history {:02x?}, not the genesis'", s.id, s.history));
            }
        }
        Ok(())
    }
}
