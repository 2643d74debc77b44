//! Incremental state transfer (Galera's IST), our own byte format. The donor connects to the
//! joiner's `ist.recv_addr` and sends, for the joiner's request ordered after seqno `at`:
//! the ordered events after the joiner's position up to `at` with their certification
//! verdicts (when its writeset cache still holds them), then its certification state at
//! `at` (the preload), so that the joiner certifies what follows exactly as every member.
//! When the cache no longer holds the gap only the preload travels, and the server's SST
//! script moves the data. See docs/design/replication.md, "Joining and rejoining".
//!
//! Every frame is a checked record of the group's format (`lockstep_group::record`: length
//! and CRC-32C of header and body), so a corrupted transfer is an error, never applied. With
//! the node's TLS contexts the connection is TLS and both ends verify each other's
//! certificate against the cluster's CA, as group connections do. The joiner reads the
//! header within the handshake deadline and answers it with a ready frame before the donor
//! sends more (so a donor whose certificate it refused learns so); a connection that fails
//! either step is closed and logged (once per address) and the joiner keeps waiting.
use crate::certification::CertificationIndex;
use crate::types::{Seqno, Uuid};
use lockstep_group::codec::{DecodeError, Reader, Writer};
use lockstep_group::config::Allowlist;
use lockstep_group::record::{self, RecordKind};
use lockstep_group::transport::{self, tls, Bounded, Refusals, Side, Stream, Tls, TransportError};
use lockstep_group::MemberId;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Version 7: the preload names the request each donor was chosen for (version 6 added the
/// members donating, version 5 the inconsistency votes; version 4 had the certification
/// index's key chains as 64-bit hashes, version 3 128-bit ones, version 2 their bytes;
/// version 1 bare length prefixes instead of record frames).
const MAGIC: &[u8; 8] = b"LSIST\x00\x00\x07";
const HEADER: u8 = 1;
const WRITESET: u8 = 2;
const SKIPPED: u8 = 3;
const PRELOAD: u8 = 4;
const END: u8 = 5;
/// The joiner's answer to the header: it accepted the connection (and the donor's certificate).
const READY: u8 = 6;
/// Writesets are bounded by `wsrep_max_ws_size` (2 GiB); anything longer is corrupt.
const MAX_FRAME: u32 = 1 << 31;
const IO_TIMEOUT: Duration = Duration::from_secs(60);

/// What the donor is about to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub group: Uuid,
    /// The joiner's request was ordered right after this seqno.
    pub at: Seqno,
    /// The first seqno of the events that follow, or `None`: only the preload follows.
    pub from: Option<Seqno>,
}

/// One ordered event of the gap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// An encoded writeset and whether it failed certification.
    Writeset { seqno: Seqno, bytes: Vec<u8>, failed: bool },
    /// A seqno that changes no data (a configuration change).
    Skipped { seqno: Seqno },
}

impl Item {
    pub fn seqno(&self) -> Seqno {
        match self {
            Item::Writeset { seqno, .. } | Item::Skipped { seqno } => *seqno,
        }
    }
}

/// The seqno of the last writeset among `items`.
pub fn last_writeset(items: &[Item]) -> Option<Seqno> {
    items.iter().rev().find_map(|item| match item {
        Item::Writeset { seqno, .. } => Some(*seqno),
        Item::Skipped { .. } => None,
    })
}

/// The donor's ordering state at `at`.
#[derive(Clone, Debug)]
pub struct Preload {
    pub index: CertificationIndex,
    /// Each member's latest commit cut (what purges the index).
    pub cuts: Vec<(MemberId, Seqno)>,
    /// Members announced synced (donor candidates).
    pub synced: Vec<MemberId>,
    /// `synced` is the sender's guess, not the group's (core/donor_choice.rs).
    pub synced_guessed: bool,
    /// Members chosen to donate, with their incarnation then, until they announce the
    /// donation's end (docs/design/donor-chosen-twice.md).
    pub donors: Vec<(MemberId, u64)>,
    /// The state request each of them was chosen for, where known: (donor, joiner, id).
    pub donor_requests: Vec<(MemberId, MemberId, u64)>,
    /// How many control messages ordered after the stream's point (`Header::at`) the sender
    /// had taken when it made this state: several requests of one joiner ordered there
    /// each get a donor, and a state made for a later one holds their effects already.
    pub controls: u32,
    /// The last view, isolated or PA-unsafe writeset: nothing after it applies before it.
    pub barrier: Seqno,
    pub votes: Votes,
}

/// The inconsistency votes the sender had taken (core/vote.rs). A member that starts from
/// this state tallies them, and passes over members with a failure vote open when it chooses
/// a donor, like the members that read those votes in the order (provider simulator, seed
/// 2752: a member restored from its checkpoint took another donor than the rest).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Votes {
    /// The ballots still undecided, by seqno: each member's outcome so far.
    pub open: Vec<(Seqno, Vec<(MemberId, u64)>)>,
    /// Seqnos decided (a vote on them that comes later changes nothing).
    pub decided: Vec<Seqno>,
    /// Members waiting for a snapshot taken after a seqno: their vote up to it is success.
    pub snapshot_joiners: Vec<(MemberId, Seqno)>,
}

impl Votes {
    fn encode(&self, w: &mut Writer) {
        w.len(self.open.len());
        for (seqno, cast) in &self.open {
            w.u64(*seqno as u64).len(cast.len());
            for (member, outcome) in cast {
                w.u64(member.0).u64(*outcome);
            }
        }
        w.len(self.decided.len());
        for seqno in &self.decided {
            w.u64(*seqno as u64);
        }
        encode_member_seqnos(w, &self.snapshot_joiners);
    }

    fn decode(r: &mut Reader) -> Result<Votes, DecodeError> {
        let cast = |r: &mut Reader| -> Result<Vec<(MemberId, u64)>, DecodeError> {
            (0..r.len(16)?).map(|_| Ok((MemberId(r.u64()?), r.u64()?))).collect()
        };
        let open = (0..r.len(12)?).map(|_| Ok((r.u64()? as Seqno, cast(r)?))).collect::<Result<_, DecodeError>>()?;
        let decided = (0..r.len(8)?).map(|_| r.u64().map(|s| s as Seqno)).collect::<Result<_, _>>()?;
        let snapshot_joiners = decode_member_seqnos(r)?;
        Ok(Votes { open, decided, snapshot_joiners })
    }
}

fn encode_member_seqnos(w: &mut Writer, pairs: &[(MemberId, Seqno)]) {
    w.len(pairs.len());
    for (member, seqno) in pairs {
        w.u64(member.0).u64(*seqno as u64);
    }
}

fn decode_member_seqnos(r: &mut Reader) -> Result<Vec<(MemberId, Seqno)>, DecodeError> {
    (0..r.len(16)?).map(|_| Ok((MemberId(r.u64()?), r.u64()? as Seqno))).collect()
}

/// What a joiner reads after the header.
#[derive(Debug)]
pub enum Part {
    Item(Item),
    Preload(Box<Preload>),
}

fn invalid(e: DecodeError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

fn transport_error(e: TransportError) -> io::Error {
    match e {
        TransportError::Io(e) => e,
        e => io::Error::new(io::ErrorKind::InvalidData, e.to_string()),
    }
}

fn write_frame(out: &mut impl Write, body: &[u8]) -> io::Result<()> {
    if body.len() > MAX_FRAME as usize {
        return Err(io::Error::other("frame too long"));
    }
    out.write_all(&record::encode_header(RecordKind::StateTransfer, body))?;
    out.write_all(body)
}

/// One checked frame of at most `limit` bytes.
fn read_frame(input: &mut impl Read, limit: u32) -> Result<Vec<u8>, TransportError> {
    let (kind, body) = transport::read_record(input, limit)?;
    if kind != RecordKind::StateTransfer {
        return Err(TransportError::Unexpected("record kind in a state transfer"));
    }
    Ok(body)
}

impl Header {
    fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u8(HEADER).fixed(MAGIC).fixed(&self.group.0).u64(self.at as u64);
        w.bool(self.from.is_some()).u64(self.from.unwrap_or(0) as u64);
        w.bytes
    }

    fn decode(body: &[u8]) -> Result<Header, DecodeError> {
        let mut r = Reader::new(body);
        if r.u8()? != HEADER || &r.array::<8>()? != MAGIC {
            return Err(DecodeError("not a state transfer stream of this version"));
        }
        let group = Uuid(r.array()?);
        let at = r.u64()? as Seqno;
        let (has_from, from) = (r.bool()?, r.u64()? as Seqno);
        r.finish()?;
        Ok(Header { group, at, from: has_from.then_some(from) })
    }
}

impl Item {
    fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        match self {
            Item::Writeset { seqno, bytes, failed } => w.u8(WRITESET).u64(*seqno as u64).bool(*failed).bytes(bytes),
            Item::Skipped { seqno } => w.u8(SKIPPED).u64(*seqno as u64),
        };
        w.bytes
    }
}

impl Preload {
    /// The preload as it travels (one frame of the stream).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u8(PRELOAD);
        self.index.encode(&mut w);
        encode_member_seqnos(&mut w, &self.cuts);
        w.len(self.synced.len());
        for member in &self.synced {
            w.u64(member.0);
        }
        w.u64(self.barrier as u64);
        w.bool(self.synced_guessed).u32(self.controls);
        w.len(self.donors.len());
        for (member, incarnation) in &self.donors {
            w.u64(member.0).u64(*incarnation);
        }
        self.votes.encode(&mut w);
        w.len(self.donor_requests.len());
        for (donor, joiner, id) in &self.donor_requests {
            w.u64(donor.0).u64(joiner.0).u64(*id);
        }
        w.bytes
    }
}

impl Preload {
    /// A preload frame read back (`None` if the frame is another part).
    pub fn decode(body: &[u8], optimistic_pa: bool) -> Result<Option<Preload>, DecodeError> {
        Ok(match decode_part(body, optimistic_pa)? {
            Some(Part::Preload(p)) => Some(*p),
            _ => None,
        })
    }
}

fn decode_part(body: &[u8], optimistic_pa: bool) -> Result<Option<Part>, DecodeError> {
    let mut r = Reader::new(body);
    let part = match r.u8()? {
        WRITESET => {
            let seqno = r.u64()? as Seqno;
            let failed = r.bool()?;
            Some(Part::Item(Item::Writeset { seqno, failed, bytes: r.bytes()? }))
        }
        SKIPPED => Some(Part::Item(Item::Skipped { seqno: r.u64()? as Seqno })),
        PRELOAD => {
            let index = CertificationIndex::decode(&mut r, optimistic_pa)?;
            let cuts = decode_member_seqnos(&mut r)?;
            let synced = (0..r.len(8)?).map(|_| r.u64().map(MemberId)).collect::<Result<_, _>>()?;
            let barrier = r.u64()? as Seqno;
            let (synced_guessed, controls) = (r.bool()?, r.u32()?);
            let donors =
                (0..r.len(16)?).map(|_| Ok((MemberId(r.u64()?), r.u64()?))).collect::<Result<_, DecodeError>>()?;
            let votes = Votes::decode(&mut r)?;
            let donor_requests = (0..r.len(24)?)
                .map(|_| Ok((MemberId(r.u64()?), MemberId(r.u64()?), r.u64()?)))
                .collect::<Result<_, DecodeError>>()?;
            let preload =
                Preload { index, cuts, synced, synced_guessed, donors, donor_requests, controls, barrier, votes };
            Some(Part::Preload(Box::new(preload)))
        }
        END => None,
        _ => return Err(DecodeError("unknown state transfer frame")),
    };
    r.finish()?;
    Ok(part)
}

/// Donor side: sends the header, the items and the preload to `address`, over TLS with the
/// node's contexts when it has them (the joiner must then have certificates of the same CA).
/// The items are taken as they are written; an error among them ends the stream unfinished.
pub fn send_with_tls(
    tls: Option<&Tls>,
    address: &str,
    header: &Header,
    items: impl IntoIterator<Item = Result<Item, String>>,
    preload: &Preload,
) -> io::Result<usize> {
    let target = address
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("no address for '{address}'")))?;
    let connect = || {
        let tcp = TcpStream::connect_timeout(&target, IO_TIMEOUT)?;
        tcp.set_nodelay(true)?;
        Ok(tcp)
    };
    let deadline = Instant::now() + transport::HANDSHAKE_TIMEOUT;
    let mut stream = tls::dial(tls, connect()?, connect, deadline).map_err(transport_error)?;
    stream.tcp().set_write_timeout(Some(IO_TIMEOUT))?;
    write_frame(&mut stream, &header.encode())?;
    stream.flush()?;
    let ready = read_frame(&mut Bounded { stream: &mut stream, deadline }, transport::HELLO_LIMIT_BYTES).map_err(
        |e| match e {
            TransportError::Io(e)
                if matches!(e.kind(), io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset) =>
            {
                io::Error::new(
                    io::ErrorKind::ConnectionRefused,
                    "the joiner closed the connection (are the socket.ssl settings alike on both nodes?)",
                )
            }
            TransportError::Io(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                io::Error::new(io::ErrorKind::TimedOut, "the joiner did not answer the header in time")
            }
            e => transport_error(e),
        },
    )?;
    if ready != [READY] {
        return Err(invalid(DecodeError("the joiner did not answer as a state transfer receiver")));
    }
    stream.tcp().set_read_timeout(None)?;
    let mut out = BufWriter::new(stream);
    let mut sent = 0;
    for item in items {
        // Ends the stream without its end: the joiner takes none of it.
        let item = item.map_err(io::Error::other)?;
        write_frame(&mut out, &item.encode())?;
        sent += 1;
    }
    write_frame(&mut out, &preload.encode())?;
    write_frame(&mut out, &[END])?;
    out.flush()?;
    Ok(sent)
}

/// Joiner side: the listening socket on `ist.recv_addr` (or `ist.recv_bind`).
pub struct Receiver {
    listener: TcpListener,
    tls: Option<Arc<Tls>>,
    allowlist: Allowlist,
    refusals: Refusals,
}

/// One donor's stream, its header already read, the rest read part by part.
pub struct Incoming {
    input: BufReader<Stream>,
    header: Header,
    pub peer: String,
}

impl Receiver {
    /// Listens on `address`; with `tls` a donor must connect over TLS with a certificate of
    /// the cluster's CA, and it must connect from an address `allowlist` allows.
    pub fn bind(address: &str, tls: Option<Arc<Tls>>, allowlist: Allowlist) -> io::Result<Receiver> {
        let listener = TcpListener::bind(address)?;
        listener.set_nonblocking(true)?;
        Ok(Receiver { listener, tls, allowlist, refusals: Refusals::default() })
    }

    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// Waits for a donor until `deadline`, polling `go_on` (false: give up). A connection
    /// from an address the allowlist refuses, or that does not complete its handshake and
    /// header in time, or is refused by TLS, is closed and logged, and the wait goes on.
    pub fn accept(&self, deadline: Instant, mut go_on: impl FnMut() -> bool) -> io::Result<Option<Incoming>> {
        loop {
            match self.listener.accept() {
                // Before the handshake, as on the group port: a refused donor costs none.
                Ok((_, peer)) if !self.allowlist.allows(peer.ip().to_canonical()) => self.refusals.not_allowed(peer),
                Ok((stream, peer)) => match self.open(stream) {
                    Ok(incoming) => {
                        self.refusals.authenticated(Some(peer));
                        return Ok(Some(incoming));
                    }
                    Err(e) => {
                        self.refusals.refused("the state transfer receiver", Some(peer), &e);
                    }
                },
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if !go_on() || Instant::now() >= deadline {
                        return Ok(None);
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// One connection's handshake, header and ready frame, all before the handshake deadline;
    /// until the header is in, frames are small.
    fn open(&self, tcp: TcpStream) -> Result<Incoming, TransportError> {
        let peer = tcp.peer_addr()?.to_string();
        tcp.set_nonblocking(false)?;
        let deadline = Instant::now() + transport::HANDSHAKE_TIMEOUT;
        let mut stream = tls::secure(self.tls.as_deref(), Side::Acceptor, tcp, deadline)?;
        let body = read_frame(&mut Bounded { stream: &mut stream, deadline }, transport::HELLO_LIMIT_BYTES)?;
        let header = Header::decode(&body)?;
        stream.tcp().set_write_timeout(Some(tls::remaining(deadline, "ready frame")?))?;
        write_frame(&mut stream, &[READY])?;
        stream.flush()?;
        stream.tcp().set_read_timeout(Some(IO_TIMEOUT))?;
        stream.tcp().set_write_timeout(None)?;
        Ok(Incoming { input: BufReader::new(stream), header, peer })
    }
}

impl Incoming {
    /// What the donor announced (read, within the handshake deadline, before `accept` returned).
    pub fn header(&mut self) -> io::Result<Header> {
        Ok(self.header.clone())
    }

    /// The next part, or `None` at the end of the stream (after the preload).
    pub fn next_part(&mut self, optimistic_pa: bool) -> io::Result<Option<Part>> {
        let body = read_frame(&mut self.input, MAX_FRAME).map_err(transport_error)?;
        decode_part(&body, optimistic_pa).map_err(invalid)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::certification::{Candidate, Chains, Key, KeySet, KeyType};

    /// A preload with one key chain, two synced members and a cut (also for the checkpoint's tests).
    pub(crate) fn preload() -> Preload {
        let mut index = CertificationIndex::new(10);
        let keys: KeySet = [Key::new(vec![b"db".to_vec(), b"t".to_vec()], KeyType::Update)].into_iter().collect();
        let candidate = Candidate {
            seqno: 11,
            last_seen: 10,
            source: Uuid([7; 16]),
            chains: Chains::of(keys.as_slice()),
            isolation: false,
            pa_unsafe: false,
            implicit_deps: false,
            continues_stream: false,
        };
        index.certify(candidate);
        Preload {
            index,
            cuts: vec![(MemberId(3), 9)],
            synced: vec![MemberId(1), MemberId(2)],
            synced_guessed: false,
            donors: vec![],
            donor_requests: vec![],
            controls: 0,
            barrier: 11,
            votes: Votes::default(),
        }
    }

    fn items() -> Vec<Item> {
        vec![Item::Writeset { seqno: 11, bytes: b"ws".to_vec(), failed: false }, Item::Skipped { seqno: 12 }]
    }

    const HEADER: Header = Header { group: Uuid([9; 16]), at: 12, from: Some(11) };

    /// The group crate's test certificates: `a-node1`, `a-node2` of CA `a`; `b-node1` of `b`.
    fn tls(node: &str, ca: &str) -> Arc<Tls> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../group/src/transport/tls/testdata");
        let config = lockstep_group::transport::TlsConfig {
            key: dir.join(format!("{node}-key.pem")),
            cert: dir.join(format!("{node}-cert.pem")),
            ca: dir.join(format!("{ca}-ca.pem")),
            ciphers: String::new(),
        };
        Arc::new(Tls::load(config).unwrap())
    }

    fn spawn_donor(tls: Option<Arc<Tls>>, address: String) -> std::thread::JoinHandle<io::Result<usize>> {
        std::thread::spawn(move || {
            send_with_tls(tls.as_deref(), &address, &HEADER, items().into_iter().map(Ok), &preload())
        })
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(10)
    }

    /// Reads a whole stream: its items and preload.
    fn receive(incoming: &mut Incoming) -> io::Result<(Vec<Item>, Option<Preload>)> {
        let mut received = Vec::new();
        let mut got_preload = None;
        while let Some(part) = incoming.next_part(true)? {
            match part {
                Part::Item(item) => received.push(item),
                Part::Preload(p) => got_preload = Some(*p),
            }
        }
        Ok((received, got_preload))
    }

    #[test]
    fn a_stream_arrives_whole_in_plain_and_over_tls() {
        for (donor, joiner) in [(None, None), (Some(tls("a-node1", "a")), Some(tls("a-node2", "a")))] {
            let receiver = Receiver::bind("127.0.0.1:0", joiner, Allowlist::default()).unwrap();
            let sender = spawn_donor(donor, receiver.local_addr().unwrap().to_string());
            let mut incoming = receiver.accept(soon(), || true).unwrap().expect("a donor");
            assert_eq!(incoming.header().unwrap(), HEADER);
            let (received, got_preload) = receive(&mut incoming).unwrap();
            assert_eq!(sender.join().unwrap().unwrap(), 2);
            assert_eq!(received, items());
            let (got, sent) = (got_preload.expect("preload"), preload());
            assert_eq!((&got.cuts, &got.synced, got.index.size()), (&sent.cuts, &sent.synced, sent.index.size()));
            assert_eq!(got.barrier, sent.barrier);
        }

        let body = preload().encode();
        for cut in 0..body.len() {
            assert!(decode_part(&body[..cut], true).is_err());
        }
        assert!(Header::decode(&Item::Skipped { seqno: 1 }.encode()).is_err());
        // Whether the synced set was a guess, the members donating, and the votes travel.
        let votes = Votes {
            open: vec![(12, vec![(MemberId(1), 7), (MemberId(2), 0)])],
            decided: vec![9, 11],
            snapshot_joiners: vec![(MemberId(3), 12)],
        };
        let donors = vec![(MemberId(2), 3)];
        let sent =
            Preload { synced_guessed: true, donors: donors.clone(), controls: 3, votes: votes.clone(), ..preload() };
        let decoded = Preload::decode(&sent.encode(), true).unwrap().expect("a preload");
        assert!(decoded.synced_guessed && decoded.controls == 3);
        assert_eq!(decoded.donors, donors);
        assert_eq!(decoded.votes, votes);
        assert!(!Preload::decode(&body, true).unwrap().expect("a preload").synced_guessed);
    }

    #[test]
    fn corrupted_frames_are_refused_or_decoded_never_a_panic() {
        let samples: Vec<Vec<u8>> =
            [HEADER.encode(), preload().encode()].into_iter().chain(items().iter().map(Item::encode)).collect();
        for bytes in lockstep_group::fuzz::corruptions(&samples, 20_000, 3) {
            let _ = Header::decode(&bytes);
            let _ = decode_part(&bytes, true);
        }
    }

    #[test]
    fn donors_refused_by_tls_fail_and_the_joiner_waits_on_for_a_good_one() {
        let receiver = Receiver::bind("127.0.0.1:0", Some(tls("a-node2", "a")), Allowlist::default()).unwrap();
        let address = receiver.local_addr().unwrap().to_string();
        let foreign = spawn_donor(Some(tls("b-node1", "b")), address.clone());
        let plain = spawn_donor(None, address.clone());
        let deadline = Instant::now() + Duration::from_millis(1500);
        assert!(receiver.accept(deadline, || true).unwrap().is_none(), "no stream accepted");
        let foreign = foreign.join().unwrap().unwrap_err();
        let plain = plain.join().unwrap().unwrap_err();
        assert!(plain.to_string().contains("socket.ssl"), "{plain}");
        assert!(!foreign.to_string().is_empty());

        let good = spawn_donor(Some(tls("a-node1", "a")), address);
        let mut incoming = receiver.accept(soon(), || true).unwrap().expect("the good donor");
        assert_eq!(receive(&mut incoming).unwrap().0, items());
        assert_eq!(good.join().unwrap().unwrap(), 2);
    }

    #[test]
    fn a_donor_the_allowlist_refuses_is_dropped_before_its_handshake_and_admitted_once_allowed() {
        let allowed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let asked = allowed.clone();
        let allowlist = Allowlist::new(move |ip| {
            assert_eq!(ip, std::net::IpAddr::from([127, 0, 0, 1]));
            asked.load(std::sync::atomic::Ordering::SeqCst)
        });
        let receiver = Receiver::bind("127.0.0.1:0", Some(tls("a-node2", "a")), allowlist).unwrap();
        let address = receiver.local_addr().unwrap().to_string();
        let refused = spawn_donor(Some(tls("a-node1", "a")), address.clone());
        let deadline = Instant::now() + Duration::from_millis(1500);
        assert!(receiver.accept(deadline, || true).unwrap().is_none(), "no stream accepted");
        assert!(refused.join().unwrap().is_err(), "the refused donor's transfer fails");

        allowed.store(true, std::sync::atomic::Ordering::SeqCst);
        let good = spawn_donor(Some(tls("a-node1", "a")), address);
        let mut incoming = receiver.accept(soon(), || true).unwrap().expect("the allowed donor");
        assert_eq!(receive(&mut incoming).unwrap().0, items());
        assert_eq!(good.join().unwrap().unwrap(), 2);
    }

    #[test]
    fn a_donor_whose_cache_fails_mid_way_ends_the_stream_as_an_error_not_a_short_gap() {
        let receiver = Receiver::bind("127.0.0.1:0", None, Allowlist::default()).unwrap();
        let address = receiver.local_addr().unwrap().to_string();
        let donor = std::thread::spawn(move || {
            let events = [Ok(items()[0].clone()), Err("the cache no longer holds seqno 12".to_string())];
            send_with_tls(None, &address, &HEADER, events, &preload())
        });
        let mut incoming = receiver.accept(soon(), || true).unwrap().expect("a donor");
        assert!(receive(&mut incoming).is_err());
        assert!(donor.join().unwrap().unwrap_err().to_string().contains("seqno 12"));
    }

    #[test]
    fn a_corrupted_frame_is_an_error_not_data() {
        let receiver = Receiver::bind("127.0.0.1:0", None, Allowlist::default()).unwrap();
        let address = receiver.local_addr().unwrap();
        let forger = std::thread::spawn(move || {
            let mut tcp = TcpStream::connect(address).unwrap();
            write_frame(&mut tcp, &HEADER.encode()).unwrap();
            let mut ready = vec![0u8; record::HEADER_BYTES + 1];
            tcp.read_exact(&mut ready).unwrap();
            let mut frame = Vec::new();
            write_frame(&mut frame, &items()[0].encode()).unwrap();
            let last = frame.len() - 1;
            frame[last] ^= 1;
            tcp.write_all(&frame).unwrap();
            tcp
        });
        let mut incoming = receiver.accept(soon(), || true).unwrap().expect("a donor");
        let _tcp = forger.join().unwrap();
        let error = incoming.next_part(true).unwrap_err();
        assert!(error.to_string().contains("checksum"), "{error}");
    }
}
