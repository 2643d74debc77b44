//! Who donates for a state request. Every member picks the same donor from the ordered
//! history (`choose_donor`), provided it knows which members are synced. A member that joined
//! after their announcements only guesses that set; its own request then waits for the choice
//! of a member that knows, read on from the order, and so does whether it donates for
//! another's. See docs/design/donor-choice-of-a-guessing-joiner.md.
use super::apply::{Donation, Event};
use super::ordering::{incarnation_in, DeliveryContext, Payload};
use super::phase::{CatchUp, Handshake, Phase};
use super::Core;
use crate::state_transfer::choose_donor;
use crate::types::Seqno;
use crate::writeset::{Control, StateRequest};
use lockstep_group::MemberId;

/// How long our request waits for a member that knows to tell its donor choice before this
/// node goes by its own guess. The answer is sent when the request is delivered and takes one
/// group round trip; no answer at all means no member knows, so none is synced.
pub const CHOICE_WAIT_MS: u64 = 10_000;

/// Our own state request, ordered while this node guessed which members are synced: the
/// group's donor choice for it is awaited, and what the order delivers meanwhile waits
/// unread in `Core::held_deliveries`.
#[derive(Debug)]
pub struct AwaitedChoice {
    /// The seqno the request was ordered after.
    after: Seqno,
    request: StateRequest,
    /// Our own guess, taken if nobody answers.
    guess: Option<MemberId>,
    since_ms: u64,
    /// Bytes of writesets read on meanwhile.
    held_bytes: usize,
}

/// Another member's state request, ordered while this node guessed which members are
/// synced: the group may have chosen this node, which only the choice of a member that knows
/// tells. Our guess's bookkeeping is done at the request and put right by the answer.
#[derive(Debug)]
pub struct PossibleDonation {
    /// Our own guess, taken if nobody answers.
    guess: Option<MemberId>,
    /// The seqno the request was ordered after, how many control messages were ordered after
    /// that seqno up to it (itself included), and whether its sender holds a state.
    after: Seqno,
    controls: u32,
    joiner_has_state: bool,
    /// Made at the request, before its bookkeeping, if this node could donate (it holds the
    /// state, and the view names this incarnation): completed by `as_chosen_donor`.
    donation: Option<(Box<Donation>, u64)>,
    since_ms: u64,
}

/// A donation made at a request before its bookkeeping, as the donor that knows makes it
/// after: itself among the donors, neither it nor the joiner synced, and a joiner without a
/// state waiting for a snapshot taken after the request.
fn as_chosen_donor(mut donation: Donation, me: MemberId, incarnation: u64) -> Donation {
    let (joiner, after, joiner_has_state) = (donation.joiner, donation.after, donation.joiner_has_state);
    let request_id = donation.request_id;
    let preload = &mut donation.preload;
    preload.synced.retain(|id| *id != me && *id != joiner);
    preload.donors.retain(|(id, _)| *id != me);
    preload.donors.push((me, incarnation));
    preload.donors.sort_unstable();
    preload.donor_requests.retain(|(id, ..)| *id != me);
    preload.donor_requests.push((me, joiner, request_id));
    preload.donor_requests.sort_unstable();
    let joiners = &mut preload.votes.snapshot_joiners;
    joiners.retain(|(id, _)| *id != joiner);
    if !joiner_has_state {
        joiners.push((joiner, after));
        joiners.sort_unstable();
    }
    donation
}

impl<W: Clone + PartialEq> Core<W> {
    /// Whether this member's synced set is the group's, not a guess: it answers the donor
    /// choice of members that guess.
    fn knows_who_is_synced(&self) -> bool {
        !self.ordering.synced_unknown && !self.ordering.synced_guessed
    }

    /// Whether our state requests must ask the members that know for their donor choice.
    pub(super) fn guesses_who_is_synced(&self) -> bool {
        !self.knows_who_is_synced()
    }

    /// A state request ordered after `after`.
    pub(super) fn state_request_ordered(&mut self, after: Seqno, origin: MemberId, request: StateRequest, live: bool) {
        let Some(c) = self.connection.as_ref() else { return };
        let me = c.me;
        let current = origin == me && request.id == c.request_id;
        // An earlier request of ours ordered late while we still wait for a donor: its
        // donor will act on it (its snapshot reaches the server's script, which still
        // listens), so it is our request from here.
        let late = origin == me && c.catch_up == CatchUp::Waiting && c.earlier_requests.contains(&request.id);
        let able = self.ordering.synced.iter().filter(|id| !self.failure_vote_open(**id)).copied().collect();
        let donor = choose_donor(&c.view.members, &able, origin, &request.donors);
        if c.view.members.is_empty() {
            // Replayed from our log before any view of it (its start, or a restored checkpoint,
            // is past the last view): the donor, and so the synced set after it, cannot be
            // told (provider simulator, seed 2245 of the donor-choice invariant).
            self.ordering.synced_guessed = true;
        }
        if live && self.knows_who_is_synced() {
            // Every request, not only a guessing joiner's: a member that guesses may be the
            // donor, and waits for this to know.
            let (joiner, id) = (origin, request.id);
            self.effects.send.push((Control::DonorChoice { joiner, id, donor }, 0));
        }
        if (current || late) && live && request.guessing && self.guesses_who_is_synced() {
            // Decided when the choice comes (`choice_made`).
            log::info!(
                "our state request was ordered after seqno {after} while this node only guesses which members \
                 are synced: waiting for the donor choice of a member that knows"
            );
            let awaited = AwaitedChoice { after, request, guess: donor, since_ms: self.clock_ms, held_bytes: 0 };
            self.connection.as_mut().expect("checked").awaited_choice = Some(awaited);
            // What the order delivered after it may hold the answer already.
            let answer = self.held_deliveries.iter().find_map(|(_, payload, _)| self.answer_in(payload));
            if let Some(donor) = answer {
                self.choice_made(donor, true);
            }
            return;
        }
        let knows = self.knows_who_is_synced();
        if live && !knows && origin != me {
            // Decided when the choice comes (`possible_donation_decided`); `donor_chosen`
            // starts no donation meanwhile.
            let r = &request;
            let could_donate = self.has_state() && self.is_this_incarnation();
            let donation = could_donate.then(|| {
                let made = self.donation(
                    origin,
                    r.id,
                    r.sst_request.clone(),
                    after,
                    r.position,
                    r.has_state,
                    r.ist_addr.clone(),
                    r.own_order,
                );
                let c = self.connection.as_ref().expect("checked");
                (Box::new(made), incarnation_in(&c.view.members, me).unwrap_or(0))
            });
            let possible = PossibleDonation {
                guess: donor,
                after,
                controls: self.ordering.controls_after,
                joiner_has_state: r.has_state,
                donation,
                since_ms: self.clock_ms,
            };
            self.connection.as_mut().expect("checked").possible_donations.insert((origin, r.id), possible);
        }
        self.donor_chosen(after, origin, request, donor, live, current, late, knows);
    }

    /// Bookkeeping and actions once the donor for a request is known: `current` and `late`
    /// say whether it is our request (see `state_request_ordered`); `authoritative`, whether
    /// the choice is the group's (this member knows who is synced, or was told) or a guess.
    #[allow(clippy::too_many_arguments)]
    fn donor_chosen(
        &mut self,
        after: Seqno,
        origin: MemberId,
        request: StateRequest,
        donor: Option<MemberId>,
        live: bool,
        current: bool,
        late: bool,
        authoritative: bool,
    ) {
        let id = request.id;
        self.observed(|| super::Observation::DonorTaken { joiner: origin, id, after, donor, authoritative });
        let Some(c) = self.connection.as_ref() else { return };
        let me = c.me;
        // Once the server's script failed, a request that named its address is void: the
        // handshake's next one, with the new script's, is ours (seed 36032: a guessing
        // joiner heard its donor only after the script broke, and waited for a stream that
        // was going to the failed script).
        let void = (current || late) && self.phase == Phase::Joining(Handshake::NewScript);
        let ours = (current || late) && !void;
        // Owned: the tally below needs the core while they are still to be logged.
        let name_of = |id| self.member_name(id);
        let joiner_name = name_of(origin);
        let Some(donor) = donor else {
            if live {
                // A Note: a joiner asks again, and a busy cluster is no fault.
                log::info!("member {joiner_name} requested state transfer but no member can donate now");
                if current && self.phase == Phase::Joining(Handshake::Requested) {
                    self.set_phase(Phase::Joining(Handshake::NoDonor));
                }
                if current && authoritative {
                    self.catch_up_alone_for_want_of_donors();
                }
            }
            return;
        };
        let donor_name = name_of(donor);
        if void {
            log::info!(
                "{donor_name} was chosen to donate for our state request after the server's script failed: \
                 the new script's request follows"
            );
        }
        self.ordering.synced.remove(&donor);
        self.ordering.donors.insert(donor, incarnation_in(&c.view.members, donor).unwrap_or(0));
        self.ordering.donor_requests.insert(donor, (origin, id));
        self.ordering.synced.remove(&origin);
        if request.has_state {
            self.ordering.snapshot_joiners.remove(&origin);
        } else {
            self.ordering.snapshot_joiners.insert(origin, after);
            // Its vote is known now: a ballot that waited for it may be decided.
            self.tally_all();
        }
        // Our current request is news to us, whatever the log says.
        if !live && !ours {
            return;
        }
        if origin == me {
            // Its donor's snapshot may reach the server's script, still listening,
            // even for a request we no longer count as ours.
            self.connection.as_mut().expect("checked").had_donor = true;
        }
        // Guessed: a member that knows tells (`possible_donation_decided`).
        let awaits_choice = self.connection.as_ref().is_some_and(|c| c.possible_donations.contains_key(&(origin, id)));
        if !awaits_choice {
            log::info!(
                "member {joiner_name} (position {}) requested state transfer from '{}'; selected {donor_name} as donor",
                request.position,
                if request.donors.is_empty() { "*any*" } else { request.donors.as_str() }
            );
        }
        if ours {
            let c = self.connection.as_mut().expect("checked");
            let incarnation = incarnation_in(&c.view.members, donor).unwrap_or(0);
            c.donor = Some((donor, incarnation));
            c.donor_name = donor_name.clone();
            // A failure of the server's script is this donor's from here.
            c.donor_lost = false;
            if late {
                log::info!("an earlier state request of this node was ordered late, with a donor: waiting for it");
                c.request_id = request.id;
                if self.phase == Phase::Joining(Handshake::NoDonor) {
                    self.set_phase(Phase::Joining(Handshake::Requested));
                }
            }
            if self.connection.as_ref().is_some_and(|c| c.catch_up == CatchUp::Waiting) {
                self.set_catch_up(CatchUp::AtRequest(after));
            }
        }
        if donor == me && self.is_this_incarnation() && !awaits_choice {
            let StateRequest { sst_request, position, has_state, ist_addr, own_order, id, .. } = request;
            let donation = self.donation(origin, id, sst_request, after, position, has_state, ist_addr, own_order);
            self.push_event(Event::Donate(Box::new(donation)));
        }
    }

    /// Our stream's donor left after the server took its state, and no member of the
    /// primary component is synced or donating: nobody will ever send the stream. When our
    /// own order, certified with the group's certification state, reaches back to our
    /// position, it is the group's, and we apply it from our own log (provider simulator,
    /// seed 2997: the last member with data, its donor crashed with the others, forced a
    /// component; the others needed a full transfer from it, and it waited for a stream
    /// for 300 s).
    fn catch_up_alone_for_want_of_donors(&mut self) {
        let Some(c) = self.connection.as_ref() else { return };
        let (me, view) = (c.me, &c.view.members);
        // A donor that left or restarted stays in the bookkeeping until its end is ordered.
        let donating =
            self.ordering.donors.iter().any(|(&d, &incarnation)| incarnation_in(view, d) == Some(incarnation));
        let nobody = self.ordering.synced.iter().all(|&m| m == me) && !donating;
        if !nobody || self.phase != Phase::Joined || !self.can_catch_up_alone() {
            return;
        }
        log::info!(
            "no member of the primary component can send the state transfer stream our donor did not: \
             applying the order after {} from this node's own log",
            self.last_committed()
        );
        if let Some(c) = self.connection.as_mut() {
            c.donor_search = None;
        }
        self.set_catch_up(CatchUp::Done);
    }

    /// Our member id in a view of our previous incarnation (we restarted before the group
    /// dropped it) names that incarnation, not us: it was chosen, and its joiner finds it
    /// gone and asks again (provider simulator, seed 55: a restarted member donated for a
    /// joiner that had left, and was chosen again meanwhile).
    /// A member's name in the current view, "?" if it is not there.
    fn member_name(&self, id: MemberId) -> String {
        let view = self.connection.as_ref().map(|c| &c.view.members[..]).unwrap_or_default();
        view.iter().find(|m| m.id == id).map_or("?".to_string(), |m| m.name.clone())
    }

    fn is_this_incarnation(&self) -> bool {
        let Some(c) = self.connection.as_ref() else { return false };
        incarnation_in(&c.view.members, c.me).map(|i| super::member_uuid(c.me, i)) == Some(c.member)
    }

    /// A donor's state, made at our request (the `controls`-th control message ordered after
    /// seqno `at`), replaced our synced set and donors: our guesses for requests ordered
    /// before ours are settled there. Corrected by a late answer, one would undo bookkeeping
    /// that state holds for another request (provider simulator, seed 32404: a joiner guessed
    /// member 4 for another's request; the state it installed had member 4 donating for the
    /// joiner itself; the answer then put member 4 back among the candidates, and the joiner
    /// alone chose it for a third request). So for a request ordered after the same seqno as
    /// ours but before it (seed 68952: the answer put the guessed donor back among the synced
    /// members, and the joiner, restarted from a checkpoint, chose it where the others chose
    /// another). A joiner had no state to donate from, so it loses no donation of its own.
    pub(super) fn guesses_settled_by_state(&mut self, at: Seqno, controls: u32) {
        if let Some(c) = self.connection.as_mut() {
            c.possible_donations.retain(|_, p| (p.after, p.controls) > (at, controls));
        }
    }

    /// A member that knows told its donor choice for `joiner`'s request `id`: if this node
    /// guessed at it, the choice decides whether it donates. Later answers find nothing.
    pub(super) fn donor_choice_ordered(&mut self, joiner: MemberId, id: u64, donor: Option<MemberId>, live: bool) {
        let Some(c) = self.connection.as_mut().filter(|_| live) else { return };
        if let Some(possible) = c.possible_donations.remove(&(joiner, id)) {
            self.possible_donation_decided(joiner, id, possible, donor, true);
        }
    }

    /// Whether this node donates for `joiner`'s request `id`, known at last (`answered`: told
    /// by a member that knows; else our own guess after the bound).
    fn possible_donation_decided(
        &mut self,
        joiner: MemberId,
        id: u64,
        possible: PossibleDonation,
        donor: Option<MemberId>,
        answered: bool,
    ) {
        let Some(me) = self.connection.as_ref().map(|c| c.me) else { return };
        let guess = possible.guess;
        self.observed(|| super::Observation::DonorChoice { guess, chosen: donor, answered });
        if answered {
            let after = possible.after;
            self.observed(|| super::Observation::DonorTaken { joiner, id, after, donor, authoritative: true });
            if donor != guess {
                self.correct_guess(joiner, id, &possible, donor);
            }
        }
        log::info!(
            "state transfer requested by member {}: {} as donor{}",
            self.member_name(joiner),
            donor.map_or("none".to_string(), |id| self.member_name(id)),
            if answered { ", as a member that knows who is synced chose" } else { ", our guess: nobody told us" }
        );
        if donor == Some(me) {
            if let Some((donation, incarnation)) = possible.donation {
                self.push_event(Event::Donate(Box::new(as_chosen_donor(*donation, me, incarnation))));
            }
        }
    }

    /// The group's donor for `joiner`'s request differs from our guess: our guessed synced
    /// set takes the group's bookkeeping instead of the guess's (`donor_chosen`), so that a
    /// later guess (nobody answering) does not name a member that donates, and our own
    /// donation's end is not waited for when we donate nothing.
    fn correct_guess(&mut self, joiner: MemberId, id: u64, possible: &PossibleDonation, donor: Option<MemberId>) {
        let Some(c) = self.connection.as_ref() else { return };
        let incarnation = |id| incarnation_in(&c.view.members, id);
        let (guess_in_view, donor_incarnation) = (possible.guess.and_then(incarnation), donor.and_then(incarnation));
        let o = &mut self.ordering;
        if let Some(guess) = possible.guess {
            o.donors.remove(&guess);
            o.donor_requests.remove(&guess);
            if guess_in_view.is_some() {
                o.synced.insert(guess);
            }
        }
        match donor {
            Some(donor) => {
                o.synced.remove(&donor);
                o.synced.remove(&joiner);
                o.donors.insert(donor, donor_incarnation.unwrap_or(0));
                o.donor_requests.insert(donor, (joiner, id));
                if possible.guess.is_none() && !possible.joiner_has_state {
                    o.snapshot_joiners.insert(joiner, possible.after);
                    self.tally_all();
                }
            }
            None => {
                if o.snapshot_joiners.get(&joiner) == Some(&possible.after) {
                    o.snapshot_joiners.remove(&joiner);
                }
            }
        }
    }

    /// Whether a delivery is the awaited donor choice for our request: the donor it names.
    fn answer_in(&self, payload: &Payload) -> Option<Option<MemberId>> {
        let c = self.connection.as_ref()?;
        let awaited = c.awaited_choice.as_ref()?;
        match payload {
            Payload::Control { control: Control::DonorChoice { joiner, id, donor }, .. }
                if *joiner == c.me && *id == awaited.request.id =>
            {
                Some(*donor)
            }
            _ => None,
        }
    }

    /// A delivery read on while our request awaits its donor choice: kept unread, in order,
    /// for once the choice is known; the choice itself settles it. Past the apply queue's
    /// limits this node goes by its guess rather than hold more.
    pub(super) fn read_on_for_choice(&mut self, seqno: Seqno, payload: Payload, context: DeliveryContext) {
        let answer = self.answer_in(&payload);
        let bytes = match &payload {
            Payload::Writeset(ws) => ws.byte_len(),
            _ => 0,
        };
        self.held_deliveries.push_back((seqno, payload, context));
        if let Some(donor) = answer {
            self.choice_made(donor, true);
            return;
        }
        let (limit_bytes, held) = (self.settings.apply_queue_bytes, self.held_deliveries.len());
        let Some(awaited) = self.connection.as_mut().and_then(|c| c.awaited_choice.as_mut()) else { return };
        awaited.held_bytes += bytes;
        if held >= super::APPLY_QUEUE_LIMIT || awaited.held_bytes as u64 >= limit_bytes {
            log::warn!(
                "no member told its donor choice for our state request within {held} deliveries: going by our own"
            );
            self.go_by_own_guess();
        }
    }

    /// Ticks: nobody answered in time (no member knows, so none is synced; or they are slow):
    /// this node goes by its own guess. The wait counts only in a primary component: out of
    /// one, nothing is ordered, answers included.
    pub(super) fn choice_wait_due(&mut self, now_ms: u64, primary: bool) {
        self.possible_donations_due(now_ms, primary);
        let Some(awaited) = self.connection.as_mut().and_then(|c| c.awaited_choice.as_mut()) else { return };
        if !primary {
            awaited.since_ms = now_ms;
            return;
        }
        let due = now_ms >= awaited.since_ms + CHOICE_WAIT_MS;
        if due {
            log::warn!(
                "no member told its donor choice for our state request within {} s: going by our own",
                CHOICE_WAIT_MS / 1000
            );
            self.go_by_own_guess();
        }
    }

    /// As `choice_wait_due`, for the requests of others this node may donate for. The wait
    /// counts only while this node reads the order: an answer behind a full apply queue, or
    /// held while our own request awaits its choice, is not late.
    fn possible_donations_due(&mut self, now_ms: u64, primary: bool) {
        let reading = !self.deliveries_held && self.held_deliveries.is_empty();
        let Some(c) = self.connection.as_mut() else { return };
        if !primary || !reading || c.awaited_choice.is_some() {
            c.possible_donations.values_mut().for_each(|p| p.since_ms = now_ms);
            return;
        }
        let due: Vec<(MemberId, u64)> = c
            .possible_donations
            .iter()
            .filter(|(_, p)| now_ms >= p.since_ms + CHOICE_WAIT_MS)
            .map(|(k, _)| *k)
            .collect();
        for (joiner, id) in due {
            let Some(possible) = self.connection.as_mut().and_then(|c| c.possible_donations.remove(&(joiner, id)))
            else {
                continue;
            };
            log::warn!(
                "no member told its donor choice for {joiner}'s state request within {} s: going by our own",
                CHOICE_WAIT_MS / 1000
            );
            let guess = possible.guess;
            self.possible_donation_decided(joiner, id, possible, guess, false);
        }
    }

    fn go_by_own_guess(&mut self) {
        let guess = self.connection.as_ref().and_then(|c| c.awaited_choice.as_ref()).and_then(|a| a.guess);
        self.choice_made(guess, false);
    }

    /// The donor choice for our awaited request is known (`answered`: told by a member that
    /// knows): it takes effect as if the request had just been delivered, and what was read on
    /// meanwhile is taken in order (at once, or after the donor's stream).
    fn choice_made(&mut self, donor: Option<MemberId>, answered: bool) {
        let Some(c) = self.connection.as_mut() else { return };
        let Some(AwaitedChoice { after, request, guess, .. }) = c.awaited_choice.take() else { return };
        // As at its delivery: no request of ours is sent while one awaits its choice, but the
        // server's new script may have asked meanwhile (`begin_state_request`).
        let current = request.id == c.request_id;
        let late = c.catch_up == CatchUp::Waiting && c.earlier_requests.contains(&request.id);
        let me = c.me;
        if answered && donor != guess {
            log::info!("the group's donor choice for our state request differs from this node's guess");
        }
        self.observed(|| super::Observation::DonorChoice { guess, chosen: donor, answered });
        self.donor_chosen(after, me, request, donor, true, current, late, answered);
    }
}
