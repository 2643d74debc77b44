//! Incremental state transfer (Galera's IST), our own byte format. The donor connects to the
//! joiner's `ist.recv_addr` and sends, for the joiner's request ordered after seqno `at`:
//! the ordered events after the joiner's position up to `at` with their certification
//! verdicts (when its writeset cache still holds them), then its certification state at
//! `at` (the preload), so that the joiner certifies what follows exactly as every member.
//! When the cache no longer holds the gap only the preload travels, and the server's SST
//! script moves the data. See docs/design/replication.md, "Joining and rejoining".
use crate::certification::CertificationIndex;
use crate::types::{Seqno, Uuid};
use lockstep_group::codec::{DecodeError, Reader, Writer};
use lockstep_group::MemberId;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

const MAGIC: &[u8; 8] = b"LSIST\x00\x00\x01";
const HEADER: u8 = 1;
const WRITESET: u8 = 2;
const SKIPPED: u8 = 3;
const PRELOAD: u8 = 4;
const END: u8 = 5;
/// Writesets are bounded by `wsrep_max_ws_size` (2 GiB); anything longer is corrupt.
const MAX_FRAME: usize = 1 << 31;
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

/// The donor's ordering state at `at`.
#[derive(Clone, Debug)]
pub struct Preload {
    pub index: CertificationIndex,
    /// Each member's latest commit cut (what purges the index).
    pub cuts: Vec<(MemberId, Seqno)>,
    /// Members announced synced (donor candidates).
    pub synced: Vec<MemberId>,
    /// The last view, isolated or PA-unsafe writeset: nothing after it applies before it.
    pub barrier: Seqno,
}

/// What a joiner reads after the header.
#[derive(Debug)]
pub enum Part {
    Item(Item),
    Preload(Preload),
}

fn invalid(e: DecodeError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

fn write_frame(out: &mut impl Write, body: &[u8]) -> io::Result<()> {
    out.write_all(&u32::try_from(body.len()).map_err(|_| io::Error::other("frame too long"))?.to_le_bytes())?;
    out.write_all(body)
}

fn read_frame(input: &mut impl Read) -> io::Result<Vec<u8>> {
    let mut len = [0; 4];
    input.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(invalid(DecodeError("frame too long")));
    }
    let mut body = vec![0; len];
    input.read_exact(&mut body)?;
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
        w.len(self.cuts.len());
        for (member, cut) in &self.cuts {
            w.u64(member.0).u64(*cut as u64);
        }
        w.len(self.synced.len());
        for member in &self.synced {
            w.u64(member.0);
        }
        w.u64(self.barrier as u64);
        w.bytes
    }
}

impl Preload {
    /// A preload frame read back (`None` if the frame is another part).
    pub fn decode(body: &[u8], optimistic_pa: bool) -> Result<Option<Preload>, DecodeError> {
        Ok(match decode_part(body, optimistic_pa)? {
            Some(Part::Preload(p)) => Some(p),
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
            let cuts =
                (0..r.len(16)?).map(|_| Ok((MemberId(r.u64()?), r.u64()? as Seqno))).collect::<Result<_, _>>()?;
            let synced = (0..r.len(8)?).map(|_| r.u64().map(MemberId)).collect::<Result<_, _>>()?;
            let barrier = r.u64()? as Seqno;
            Some(Part::Preload(Preload { index, cuts, synced, barrier }))
        }
        END => None,
        _ => return Err(DecodeError("unknown state transfer frame")),
    };
    r.finish()?;
    Ok(part)
}

/// Donor side: sends the header, the items and the preload to `address`.
pub fn send(
    address: &str,
    header: &Header,
    items: impl IntoIterator<Item = Item>,
    preload: &Preload,
) -> io::Result<usize> {
    let target = address
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("no address for '{address}'")))?;
    let stream = TcpStream::connect_timeout(&target, IO_TIMEOUT)?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    stream.set_nodelay(true)?;
    let mut out = BufWriter::new(stream);
    write_frame(&mut out, &header.encode())?;
    let mut sent = 0;
    for item in items {
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
}

/// One donor's stream, read part by part.
pub struct Incoming {
    input: BufReader<TcpStream>,
    pub peer: String,
}

impl Receiver {
    pub fn bind(address: &str) -> io::Result<Receiver> {
        let listener = TcpListener::bind(address)?;
        listener.set_nonblocking(true)?;
        Ok(Receiver { listener })
    }

    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// Waits for a donor until `deadline`, polling `go_on` (false: give up).
    pub fn accept(&self, deadline: Instant, mut go_on: impl FnMut() -> bool) -> io::Result<Option<Incoming>> {
        loop {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    stream.set_nonblocking(false)?;
                    stream.set_read_timeout(Some(IO_TIMEOUT))?;
                    return Ok(Some(Incoming { input: BufReader::new(stream), peer: peer.to_string() }));
                }
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
}

impl Incoming {
    pub fn header(&mut self) -> io::Result<Header> {
        Header::decode(&read_frame(&mut self.input)?).map_err(invalid)
    }

    /// The next part, or `None` at the end of the stream (after the preload).
    pub fn next_part(&mut self, optimistic_pa: bool) -> io::Result<Option<Part>> {
        decode_part(&read_frame(&mut self.input)?, optimistic_pa).map_err(invalid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certification::{Candidate, Key, KeyType};

    #[test]
    fn a_stream_arrives_whole_and_a_cut_one_is_an_error() {
        let receiver = Receiver::bind("127.0.0.1:0").unwrap();
        let address = receiver.local_addr().unwrap().to_string();
        let mut index = CertificationIndex::new(10);
        let keys = [Key::new(vec![b"db".to_vec(), b"t".to_vec()], KeyType::Update)];
        let candidate = Candidate {
            seqno: 11,
            last_seen: 10,
            source: Uuid([7; 16]),
            keys: &keys,
            isolation: false,
            pa_unsafe: false,
            implicit_deps: false,
        };
        index.certify(&candidate);
        let preload =
            Preload { index, cuts: vec![(MemberId(3), 9)], synced: vec![MemberId(1), MemberId(2)], barrier: 11 };
        let header = Header { group: Uuid([9; 16]), at: 12, from: Some(11) };
        let items =
            vec![Item::Writeset { seqno: 11, bytes: b"ws".to_vec(), failed: false }, Item::Skipped { seqno: 12 }];
        let sender = {
            let (header, items, preload) = (header.clone(), items.clone(), preload.clone());
            std::thread::spawn(move || send(&address, &header, items, &preload).unwrap())
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut incoming = receiver.accept(deadline, || true).unwrap().expect("a donor");
        assert_eq!(incoming.header().unwrap(), header);
        let mut received = Vec::new();
        let mut got_preload = None;
        while let Some(part) = incoming.next_part(true).unwrap() {
            match part {
                Part::Item(item) => received.push(item),
                Part::Preload(p) => got_preload = Some(p),
            }
        }
        assert_eq!(sender.join().unwrap(), 2);
        assert_eq!(received, items);
        let got = got_preload.expect("preload");
        assert_eq!((&got.cuts, &got.synced, got.index.size()), (&preload.cuts, &preload.synced, preload.index.size()));
        assert_eq!(got.barrier, preload.barrier);

        let body = preload.encode();
        for cut in 0..body.len() {
            assert!(decode_part(&body[..cut], true).is_err());
        }
        assert!(Header::decode(&Item::Skipped { seqno: 1 }.encode()).is_err());
    }
}
