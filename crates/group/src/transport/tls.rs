//! TLS for group and state-transfer connections: Galera's `socket.ssl_key`, `socket.ssl_cert`,
//! `socket.ssl_ca` and `socket.ssl_cipher`, with mutual authentication. Both ends present a
//! certificate and each verifies the other's against the cluster's CA; like Galera, neither
//! checks the peer's name (members are reached by whatever address the configuration gives).
//! TLS 1.3 only: every member runs this code, so there is nothing older to talk to, and no
//! version negotiation to downgrade. rustls with the graviola crypto provider (pure Rust; see
//! docs/design/group-tls.md for the choice and its licences).
//!
//! Whether a connection uses TLS is fixed by the local configuration and never negotiated: a
//! node with certificates refuses a plain peer and a node without them refuses a TLS peer,
//! each with an error that says so ([`TransportError::PlainPeer`], [`TransportError::TlsPeer`]).

use super::TransportError;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::verify_server_cert_signed_by_trust_anchor;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};
use rustls::{
    ClientConfig, ClientConnection, ConnectionCommon, DigitallySignedStruct, DistinguishedName, RootCertStore,
    ServerConfig, ServerConnection, SideData, SignatureScheme, StreamOwned, SupportedCipherSuite,
};
use std::collections::HashSet;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::ops::DerefMut;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// The first byte of every TLS record that opens a connection (a handshake record).
const TLS_HANDSHAKE_RECORD: u8 = 0x16;
/// Peer addresses remembered as already logged; forgotten all at once beyond this, so a
/// flood from many addresses costs bounded memory (and some repeated lines).
const REFUSALS_REMEMBERED: usize = 1024;

/// Where this node's PEM files are, as Galera names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// `socket.ssl_key`: the node's private key (PKCS#8, PKCS#1 or SEC1; not encrypted).
    pub key: PathBuf,
    /// `socket.ssl_cert`: the node's certificate, then any intermediates.
    pub cert: PathBuf,
    /// `socket.ssl_ca`: the CA certificates a peer's certificate must chain to.
    pub ca: PathBuf,
    /// `socket.ssl_cipher`: suites separated by `:`, `,` or spaces; names that are not TLS 1.3
    /// suites (OpenSSL's TLS 1.2 names) are ignored. Empty: every TLS 1.3 suite.
    pub ciphers: String,
}

/// Why certificates could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsError(pub String);

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsError {}

/// A node's TLS contexts, built from [`TlsConfig`]; [`Tls::reload`] rebuilds them, from the
/// files the options name then, for connections opened afterwards.
pub struct Tls {
    contexts: RwLock<Arc<Contexts>>,
    /// Galera's `socket.dynamic`: plain peers are accepted too, and a dialed peer that
    /// refuses TLS is dialed again in the clear (a cluster moving to TLS one node at a time).
    dynamic: bool,
}

struct Contexts {
    /// The files they were read from.
    config: TlsConfig,
    client: Arc<ClientConfig>,
    server: Arc<ServerConfig>,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls").field("config", &self.contexts().config).finish_non_exhaustive()
    }
}

impl Tls {
    /// Reads the key, certificate and CA files and checks that they fit together.
    pub fn load(config: TlsConfig) -> Result<Tls, TlsError> {
        Ok(Tls { contexts: RwLock::new(Arc::new(Contexts::load(config)?)), dynamic: false })
    }

    /// With `socket.dynamic`: see [`Tls::dynamic`].
    pub fn with_dynamic(self, dynamic: bool) -> Tls {
        Tls { dynamic, ..self }
    }

    /// Plain peers are accepted too (`socket.dynamic`).
    pub fn dynamic(&self) -> bool {
        self.dynamic
    }

    /// Galera's `socket.ssl_reload`: reads the files `config` names, which may be new ones
    /// (mtr galera_ssl_reload changes `socket.ssl_cert` and `socket.ssl_key`, then reloads).
    /// Connections opened from now on use them; open connections keep the keys they were made
    /// with. On error nothing changes.
    pub fn reload(&self, config: TlsConfig) -> Result<(), TlsError> {
        let contexts = Contexts::load(config)?;
        *self.contexts.write().expect("not poisoned") = Arc::new(contexts);
        Ok(())
    }

    /// The files in use.
    pub fn config(&self) -> TlsConfig {
        self.contexts().config.clone()
    }

    fn contexts(&self) -> Arc<Contexts> {
        self.contexts.read().expect("not poisoned").clone()
    }
}

impl Contexts {
    fn load(config: TlsConfig) -> Result<Contexts, TlsError> {
        // graviola asserts its CPU features on first use; refuse here instead of panicking later.
        if !graviola::util::is_cpu_supported() {
            return Err(TlsError(
                "this CPU lacks instructions the TLS library needs (x86_64: AES-NI, PCLMULQDQ, AVX2, BMI1/2, ADX)"
                    .into(),
            ));
        }
        let chain = read_pem_all::<CertificateDer<'static>>(&config.cert, "socket.ssl_cert", "certificate")?;
        let key = PrivateKeyDer::from_pem_file(&config.key).map_err(|e| {
            TlsError(format!(
                "socket.ssl_key {}: no unencrypted private key ({e}; encrypted keys and \
                 socket.ssl_password_file are not supported)",
                config.key.display()
            ))
        })?;
        let pinned = read_pem_all::<CertificateDer<'static>>(&config.ca, "socket.ssl_ca", "certificate")?;
        let mut roots = RootCertStore::empty();
        for ca in &pinned {
            roots.add(ca.clone()).map_err(|e| TlsError(format!("socket.ssl_ca {}: {e}", config.ca.display())))?;
        }
        let roots = Arc::new(roots);
        let provider = Arc::new(provider(&config.ciphers)?);
        let versions = &[&rustls::version::TLS13];
        let algorithms = provider.signature_verification_algorithms;
        let peers_ca = Arc::new(ClusterCa { roots: roots.clone(), pinned: pinned.clone(), algorithms });
        let client_verifier = Arc::new(ClusterClients {
            webpki: WebPkiClientVerifier::builder_with_provider(roots, provider.clone())
                .build()
                .map_err(|e| TlsError(format!("socket.ssl_ca {}: {e}", config.ca.display())))?,
            pinned,
        });

        // Our own certificate must pass the checks peers make of it, both ways round; finding
        // out here beats every peer refusing us.
        let now = UnixTime::now();
        let own = |e: rustls::Error| {
            TlsError(format!(
                "socket.ssl_cert {} is not accepted by socket.ssl_ca {}: {e}",
                config.cert.display(),
                config.ca.display()
            ))
        };
        peers_ca
            .verify_server_cert(&chain[0], &chain[1..], &ServerName::IpAddress(IpAddr::from([0u8; 4]).into()), &[], now)
            .map_err(own)?;
        client_verifier.verify_client_cert(&chain[0], &chain[1..], now).map_err(own)?;

        let key_error = |e: rustls::Error| {
            TlsError(format!(
                "socket.ssl_key {} and socket.ssl_cert {}: {e}",
                config.key.display(),
                config.cert.display()
            ))
        };
        let mut server = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(versions)
            .map_err(|e| TlsError(e.to_string()))?
            .with_client_cert_verifier(client_verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(key_error)?;
        let mut client = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(versions)
            .map_err(|e| TlsError(e.to_string()))?
            .dangerous()
            .with_custom_certificate_verifier(peers_ca)
            .with_client_auth_cert(chain, key)
            .map_err(key_error)?;
        // No session resumption: every connection shows and checks certificates in full, so a
        // reload (a new CA, say) holds for every connection opened after it.
        server.send_tls13_tickets = 0;
        server.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        client.resumption = rustls::client::Resumption::disabled();
        Ok(Contexts { config, client: Arc::new(client), server: Arc::new(server) })
    }
}

fn read_pem_all<T: PemObject>(path: &Path, option: &str, what: &str) -> Result<Vec<T>, TlsError> {
    let error = |e: &dyn fmt::Display| TlsError(format!("{option} {}: {e}", path.display()));
    let items = T::pem_file_iter(path).map_err(|e| error(&e))?.collect::<Result<Vec<T>, _>>().map_err(|e| error(&e))?;
    if items.is_empty() {
        return Err(error(&format!("no PEM {what} in the file")));
    }
    Ok(items)
}

/// graviola's suites, restricted to the TLS 1.3 ones `ciphers` names (all when it names none).
fn provider(ciphers: &str) -> Result<CryptoProvider, TlsError> {
    let mut provider = rustls_graviola::default_provider();
    provider.cipher_suites.retain(|s| matches!(s, SupportedCipherSuite::Tls13(_)));
    let names: Vec<&str> = ciphers.split([':', ',', ' ']).filter(|n| !n.is_empty()).collect();
    let wanted: Vec<SupportedCipherSuite> =
        provider.cipher_suites.iter().copied().filter(|s| names.iter().any(|n| suite_name_matches(*s, n))).collect();
    for name in names.iter().filter(|n| !provider.cipher_suites.iter().any(|s| suite_name_matches(*s, n))) {
        log::info!("socket.ssl_cipher: '{name}' is not a TLS 1.3 cipher suite, ignored (group traffic uses TLS 1.3)");
    }
    if !wanted.is_empty() {
        provider.cipher_suites = wanted;
    }
    Ok(provider)
}

/// `TLS_AES_128_GCM_SHA256` (IANA and OpenSSL) or rustls' `TLS13_AES_128_GCM_SHA256`.
fn suite_name_matches(suite: SupportedCipherSuite, name: &str) -> bool {
    let ours = suite.suite().as_str().unwrap_or("");
    let strip = |n: &str| {
        let n = n.to_ascii_uppercase();
        n.strip_prefix("TLS13_").or_else(|| n.strip_prefix("TLS_")).map(str::to_owned).unwrap_or(n)
    };
    !ours.is_empty() && strip(ours) == strip(name)
}

/// Verifies the certificate an accepting peer shows against the cluster's CA, not its name:
/// members are addressed by IP or by names the certificates need not carry (as in Galera).
#[derive(Debug)]
struct ClusterCa {
    roots: Arc<RootCertStore>,
    /// The certificates of `socket.ssl_ca` themselves: see [`is_pinned`].
    pinned: Vec<CertificateDer<'static>>,
    algorithms: WebPkiSupportedAlgorithms,
}

/// A peer showing exactly a certificate of `socket.ssl_ca` is accepted, as OpenSSL accepts
/// it: Galera setups (mtr's `galera_ssl` among them) use one self-signed CA certificate as
/// every node's certificate and CA, which webpki alone refuses as a CA used as an end
/// entity. The handshake still proves the peer holds that certificate's key; validity
/// dates of such a certificate are not checked.
fn is_pinned(pinned: &[CertificateDer<'_>], end_entity: &CertificateDer<'_>) -> bool {
    pinned.iter().any(|c| c.as_ref() == end_entity.as_ref())
}

/// Verifies a dialing peer's certificate: webpki against the CA, or pinned.
#[derive(Debug)]
struct ClusterClients {
    webpki: Arc<dyn ClientCertVerifier>,
    pinned: Vec<CertificateDer<'static>>,
}

impl ClientCertVerifier for ClusterClients {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.webpki.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        if is_pinned(&self.pinned, end_entity) {
            return Ok(ClientCertVerified::assertion());
        }
        self.webpki.verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

impl ServerCertVerifier for ClusterCa {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if is_pinned(&self.pinned, end_entity) {
            return Ok(ServerCertVerified::assertion());
        }
        let cert = ParsedCertificate::try_from(end_entity)?;
        verify_server_cert_signed_by_trust_anchor(&cert, &self.roots, intermediates, now, self.algorithms.all)?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// A connection after its security layer is up: plain TCP, or TLS on either side.
pub enum Stream {
    Plain(TcpStream),
    Client(Box<StreamOwned<ClientConnection, TcpStream>>),
    Server(Box<StreamOwned<ServerConnection, TcpStream>>),
}

impl Stream {
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Client(s) => s.get_ref(),
            Stream::Server(s) => s.get_ref(),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Client(s) => s.read(buf),
            Stream::Server(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Client(s) => s.write(buf),
            Stream::Server(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Client(s) => s.flush(),
            Stream::Server(s) => s.flush(),
        }
    }
}

/// Which end of the connection this node is; the dialer is the TLS client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Dialer,
    Acceptor,
}

/// Opens the security layer of a new connection before `deadline`: a mutually authenticated
/// TLS session when `tls` is set, plain TCP otherwise. An acceptor looks at the first byte
/// first, so a peer configured the other way round is named as such instead of failing as
/// garbage. Leaves the socket without timeouts.
pub fn secure(tls: Option<&Tls>, side: Side, tcp: TcpStream, deadline: Instant) -> Result<Stream, TransportError> {
    if side == Side::Acceptor {
        let opens_tls = first_byte(&tcp, deadline)? == TLS_HANDSHAKE_RECORD;
        match (tls.is_some(), opens_tls) {
            (true, false) if tls.is_some_and(Tls::dynamic) => return Ok(Stream::Plain(tcp)),
            (true, false) => return Err(TransportError::PlainPeer),
            (false, true) => return Err(TransportError::TlsPeer),
            _ => {}
        }
    }
    let Some(tls) = tls else { return Ok(Stream::Plain(tcp)) };
    let contexts = tls.contexts();
    let stream = match side {
        Side::Dialer => {
            // Any name will do: the verifier checks the chain, not the name.
            let name = ServerName::IpAddress(tcp.peer_addr()?.ip().into());
            let connection =
                ClientConnection::new(contexts.client.clone(), name).map_err(|e| TransportError::Tls(e.to_string()))?;
            let mut stream = StreamOwned::new(connection, tcp);
            handshake(&mut stream.conn, &mut stream.sock, deadline)?;
            Stream::Client(Box::new(stream))
        }
        Side::Acceptor => {
            let connection =
                ServerConnection::new(contexts.server.clone()).map_err(|e| TransportError::Tls(e.to_string()))?;
            let mut stream = StreamOwned::new(connection, tcp);
            handshake(&mut stream.conn, &mut stream.sock, deadline)?;
            Stream::Server(Box::new(stream))
        }
    };
    stream.tcp().set_read_timeout(None)?;
    stream.tcp().set_write_timeout(None)?;
    Ok(stream)
}

/// The dialer's side of connection `tcp`: TLS when the node has certificates. With
/// `socket.dynamic`, a peer that closes on our TLS hello (a node without certificates does)
/// is dialed again in the clear (`reconnect`); if that fails too, the TLS attempt's error is
/// the one reported. Any other TLS failure (a certificate the CA refuses, a deadline) is
/// final: a TLS peer is never talked to in the clear.
pub fn dial(
    tls: Option<&Tls>,
    tcp: TcpStream,
    reconnect: impl FnOnce() -> io::Result<TcpStream>,
    deadline: Instant,
) -> Result<Stream, TransportError> {
    let peer = tcp.peer_addr().map_or_else(|_| "a peer".to_string(), |p| p.to_string());
    match secure(tls, Side::Dialer, tcp, deadline) {
        Err(refused @ TransportError::ClosedInTlsHandshake) if tls.is_some_and(Tls::dynamic) => {
            log::info!("{peer} closed on our TLS hello: dialing it again in the clear (socket.dynamic)");
            reconnect()
                .map_err(TransportError::from)
                .and_then(|tcp| secure(None, Side::Dialer, tcp, deadline))
                .map_err(|_| refused)
        }
        opened => opened,
    }
}

/// Time left before `deadline`, or a timeout error.
pub fn remaining(deadline: Instant, what: &'static str) -> Result<Duration, TransportError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(TransportError::Deadline(what));
    }
    Ok(left)
}

fn first_byte(tcp: &TcpStream, deadline: Instant) -> Result<u8, TransportError> {
    let mut byte = [0u8; 1];
    tcp.set_read_timeout(Some(remaining(deadline, "handshake")?))?;
    match tcp.peek(&mut byte) {
        Ok(1) => Ok(byte[0]),
        Ok(_) => Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
        Err(e) if is_timeout(&e) => Err(TransportError::Deadline("handshake")),
        Err(e) => Err(e.into()),
    }
}

fn handshake<C, S>(connection: &mut C, tcp: &mut TcpStream, deadline: Instant) -> Result<(), TransportError>
where
    C: DerefMut<Target = ConnectionCommon<S>>,
    S: SideData,
{
    // Every read and write waits at most until the deadline, so a peer that trickles bytes
    // cannot hold the handshake open longer than that.
    while connection.is_handshaking() || connection.wants_write() {
        let left = remaining(deadline, "TLS handshake")?;
        tcp.set_read_timeout(Some(left))?;
        tcp.set_write_timeout(Some(left))?;
        if let Err(e) = connection.complete_io(tcp) {
            return Err(match e {
                e if is_timeout(&e) => TransportError::Deadline("TLS handshake"),
                e if e.kind() == io::ErrorKind::InvalidData => TransportError::Tls(e.to_string()),
                e if matches!(e.kind(), io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset) => {
                    TransportError::ClosedInTlsHandshake
                }
                e => TransportError::Io(e),
            });
        }
    }
    Ok(())
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

/// Refused connections, logged once per peer address until that address authenticates, so
/// a misconfigured peer retrying every 100 ms (or a flood) is one line, not thousands.
#[derive(Default)]
pub struct Refusals {
    logged: Mutex<HashSet<IpAddr>>,
}

impl Refusals {
    /// Logs `error` as the reason `what` dropped a connection from `peer` (refused it before
    /// its hello, or later for a bad record), once per address; whether it did.
    pub fn refused(&self, what: &str, peer: Option<SocketAddr>, error: &TransportError) -> bool {
        let Some(peer) = peer else { return false };
        let first = self.first_since_connected(peer);
        let line = format!(
            "{what}: connection from {} dropped: {error} (logged once per address until one authenticates)",
            peer.ip()
        );
        match error {
            // A Note: nothing was let in, and a peer with `socket.dynamic` tries TLS first
            // and then comes back in the clear (mtr galera_dynamic_protocol).
            TransportError::TlsPeer if first => log::info!("{line}"),
            _ if first => log::warn!("{line}"),
            _ => {}
        }
        first
    }

    /// Logs, once per address, that the allowlist (`wsrep_allowlist`) refused `peer`, in
    /// Galera's words.
    pub fn not_allowed(&self, peer: SocketAddr) {
        if self.first_since_connected(peer) {
            log::warn!(
                "Connection not allowed, IP {} not found in allowlist (logged once per address until it connects)",
                peer.ip().to_canonical()
            );
        }
    }

    fn first_since_connected(&self, peer: SocketAddr) -> bool {
        let mut logged = self.logged.lock().expect("not poisoned");
        if logged.len() >= REFUSALS_REMEMBERED {
            logged.clear();
        }
        logged.insert(peer.ip())
    }

    /// A peer at this address got through: its next refusal is news again.
    pub fn authenticated(&self, peer: Option<SocketAddr>) {
        if let Some(peer) = peer {
            self.logged.lock().expect("not poisoned").remove(&peer.ip());
        }
    }
}

#[cfg(test)]
mod tests;
