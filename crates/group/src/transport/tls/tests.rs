use super::*;
use std::net::TcpListener;
use std::thread;

/// Certificates made by `testdata/make.sh`: CAs `a` and `b`, nodes `a-node1`, `a-node2`
/// (of `a`) and `b-node1` (of `b`).
fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/transport/tls/testdata").join(name)
}

fn config(node: &str, ca: &str) -> TlsConfig {
    TlsConfig {
        key: testdata(&format!("{node}-key.pem")),
        cert: testdata(&format!("{node}-cert.pem")),
        ca: testdata(&format!("{ca}-ca.pem")),
        ciphers: String::new(),
    }
}

fn tls(node: &str, ca: &str) -> Tls {
    Tls::load(config(node, ca)).unwrap()
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(5)
}

/// Connects a dialer with `dialer` to an acceptor with `acceptor`; each side's result, and
/// for a success one line sent from the dialer to the acceptor.
fn connect(
    dialer: Option<Tls>,
    acceptor: Option<Tls>,
) -> (Result<(), TransportError>, Result<Vec<u8>, TransportError>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let accepting = thread::spawn(move || {
        let (tcp, _) = listener.accept().unwrap();
        let mut stream = secure(acceptor.as_ref(), Side::Acceptor, tcp, soon())?;
        let mut line = vec![0u8; 5];
        stream.read_exact(&mut line)?;
        stream.write_all(b"ok")?;
        stream.flush()?;
        Ok(line)
    });
    let dialing = (|| {
        let tcp = TcpStream::connect(address)?;
        let mut stream = secure(dialer.as_ref(), Side::Dialer, tcp, soon())?;
        stream.write_all(b"hello")?;
        stream.flush()?;
        let mut reply = [0u8; 2];
        stream.read_exact(&mut reply)?;
        Ok(())
    })();
    (dialing, accepting.join().unwrap())
}

fn is_certificate_error(result: &Result<Vec<u8>, TransportError>) -> bool {
    matches!(result, Err(TransportError::Tls(e)) if e.contains("certificate") || e.contains("Certificate"))
}

#[test]
fn peers_with_certificates_of_the_cluster_ca_talk() {
    let (dialer, acceptor) = connect(Some(tls("a-node1", "a")), Some(tls("a-node2", "a")));
    dialer.unwrap();
    assert_eq!(acceptor.unwrap(), b"hello");
}

/// A node with a certificate of CA `b` that trusts both CAs: it gets as far as showing its
/// certificate to a member of CA `a`.
fn intruder() -> Tls {
    let bundle =
        std::env::temp_dir().join(format!("lockstep-tls-ab-{}-{:?}.pem", std::process::id(), thread::current().id()));
    let pem = [std::fs::read(testdata("a-ca.pem")).unwrap(), std::fs::read(testdata("b-ca.pem")).unwrap()].concat();
    std::fs::write(&bundle, pem).unwrap();
    let tls = Tls::load(TlsConfig { ca: bundle.clone(), ..config("b-node1", "b") }).unwrap();
    std::fs::remove_file(bundle).unwrap();
    tls
}

#[test]
fn a_dialer_with_a_certificate_of_another_ca_is_refused() {
    let (dialer, acceptor) = connect(Some(intruder()), Some(tls("a-node2", "a")));
    assert!(is_certificate_error(&acceptor), "{:?}", acceptor.err());
    assert!(dialer.is_err(), "the dialer learns it was refused");
}

#[test]
fn an_acceptor_with_a_certificate_of_another_ca_is_refused() {
    let (dialer, acceptor) = connect(Some(tls("a-node1", "a")), Some(intruder()));
    assert!(matches!(&dialer, Err(TransportError::Tls(e)) if e.contains("certificate")), "{:?}", dialer.err());
    assert!(acceptor.is_err());
}

#[test]
fn a_dialer_without_a_certificate_is_refused() {
    // A TLS client trusting the cluster's CA but presenting no certificate of its own.
    let mut roots = RootCertStore::empty();
    for ca in read_pem_all::<CertificateDer<'static>>(&testdata("a-ca.pem"), "ca", "certificate").unwrap() {
        roots.add(ca).unwrap();
    }
    let provider = Arc::new(provider("").unwrap());
    let algorithms = provider.signature_verification_algorithms;
    let verifier = Arc::new(ClusterCa { roots: Arc::new(roots), pinned: Vec::new(), algorithms });
    let anonymous = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let accepting = thread::spawn(move || {
        let (tcp, _) = listener.accept().unwrap();
        secure(Some(&tls("a-node2", "a")), Side::Acceptor, tcp, soon()).map(|_| ())
    });
    let tcp = TcpStream::connect(address).unwrap();
    let connection = ClientConnection::new(Arc::new(anonymous), ServerName::try_from("node").unwrap()).unwrap();
    let mut stream = StreamOwned::new(connection, tcp);
    let _ = stream.write_all(b"hello").and_then(|_| stream.flush());
    let mut buf = [0u8; 1];
    assert!(stream.read(&mut buf).is_err() || buf == [0], "refused");
    let refused = accepting.join().unwrap();
    assert!(matches!(&refused, Err(TransportError::Tls(e)) if e.contains("certificate")), "{refused:?}");
}

#[test]
fn tls_and_plain_peers_refuse_each_other_by_name() {
    let (_, acceptor) = connect(None, Some(tls("a-node2", "a")));
    assert!(matches!(acceptor, Err(TransportError::PlainPeer)), "{:?}", acceptor.err());
    let (dialer, acceptor) = connect(Some(tls("a-node1", "a")), None);
    assert!(matches!(acceptor, Err(TransportError::TlsPeer)), "{:?}", acceptor.err());
    assert!(dialer.is_err());
    let (dialer, acceptor) = connect(None, None);
    dialer.unwrap();
    assert_eq!(acceptor.unwrap(), b"hello");
}

#[test]
fn a_silent_peer_hits_the_handshake_deadline() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let _silent = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (tcp, _) = listener.accept().unwrap();
    let started = Instant::now();
    let deadline = started + Duration::from_millis(300);
    let result = secure(Some(&tls("a-node2", "a")), Side::Acceptor, tcp, deadline);
    assert!(matches!(result, Err(TransportError::Deadline(_))), "{:?}", result.err());
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[test]
fn loading_refuses_mismatched_files_and_reload_keeps_the_old_ones_on_error() {
    let own_not_of_ca = Tls::load(config("b-node1", "a")).unwrap_err();
    assert!(own_not_of_ca.0.contains("is not accepted by socket.ssl_ca"), "{own_not_of_ca}");
    let mut mismatched = config("a-node1", "a");
    mismatched.key = testdata("a-node2-key.pem");
    assert!(Tls::load(mismatched).is_err(), "a key that is not the certificate's");
    let mut missing = config("a-node1", "a");
    missing.ca = testdata("no-such-ca.pem");
    assert!(Tls::load(missing).unwrap_err().0.contains("socket.ssl_ca"));

    // Reload reads the same paths again: swap the files underneath.
    let dir = std::env::temp_dir().join(format!("lockstep-tls-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let copy = |from: &str, to: &str| std::fs::copy(testdata(from), dir.join(to)).unwrap();
    copy("a-node1-key.pem", "key.pem");
    copy("a-node1-cert.pem", "cert.pem");
    copy("a-ca.pem", "ca.pem");
    let files = TlsConfig {
        key: dir.join("key.pem"),
        cert: dir.join("cert.pem"),
        ca: dir.join("ca.pem"),
        ciphers: String::new(),
    };
    let reloading = Tls::load(files.clone()).unwrap();
    let before = Arc::as_ptr(&reloading.contexts());
    copy("b-node1-cert.pem", "cert.pem");
    assert!(reloading.reload(files.clone()).is_err(), "the key no longer matches");
    assert_eq!(Arc::as_ptr(&reloading.contexts()), before, "old contexts kept");
    copy("b-node1-key.pem", "key.pem");
    copy("b-ca.pem", "ca.pem");
    reloading.reload(files).unwrap();
    assert_ne!(Arc::as_ptr(&reloading.contexts()), before);
    std::fs::remove_dir_all(&dir).unwrap();
    // The reloaded node now belongs to CA b.
    let (dialer, acceptor) = connect(Some(reloading), Some(tls("b-node1", "b")));
    dialer.unwrap();
    acceptor.unwrap();
}

#[test]
fn cipher_names_select_tls13_suites_and_others_are_ignored() {
    let all = provider("").unwrap().cipher_suites.len();
    assert!(all >= 2);
    let one = provider("TLS_AES_256_GCM_SHA384").unwrap();
    assert_eq!(one.cipher_suites.len(), 1);
    assert_eq!(one.cipher_suites[0].suite().as_str(), Some("TLS13_AES_256_GCM_SHA384"));
    assert_eq!(provider("AES128-SHA256:tls_aes_128_gcm_sha256").unwrap().cipher_suites.len(), 1);
    assert_eq!(provider("AES128-SHA256").unwrap().cipher_suites.len(), all, "only TLS 1.2 names: defaults");
}

#[test]
fn refusals_are_logged_once_per_address_until_it_authenticates() {
    let refusals = Refusals::default();
    let peer = |port| Some(SocketAddr::from(([127, 0, 0, 9], port)));
    assert!(refusals.refused("n1", peer(1000), &TransportError::PlainPeer));
    assert!(!refusals.refused("n1", peer(1001), &TransportError::TlsPeer), "same address, other port");
    assert!(refusals.refused("n1", Some(SocketAddr::from(([127, 0, 0, 8], 1000))), &TransportError::PlainPeer));
    refusals.authenticated(peer(2000));
    assert!(refusals.refused("n1", peer(1002), &TransportError::PlainPeer));
}

#[test]
fn a_self_signed_ca_certificate_as_every_node_certificate_and_ca_works_as_with_openssl() {
    // mtr's galera_ssl: socket.ssl_cert = cacert.pem (CA:TRUE), socket.ssl_ca defaulting to it.
    let dir = std::env::temp_dir().join(format!("lockstep-tls-pinned-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (key, cert) = (dir.join("key.pem"), dir.join("cert.pem"));
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-new",
            "-nodes",
            "-days",
            "2",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .args(["-subj", "/CN=selfsigned", "-config", "/dev/null", "-addext", "basicConstraints=critical,CA:TRUE"])
        .output();
    if !made.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: no openssl command to make a self-signed certificate");
        return;
    }
    let node = || {
        Tls::load(TlsConfig { key: key.clone(), cert: cert.clone(), ca: cert.clone(), ciphers: String::new() }).unwrap()
    };
    let (dialer, acceptor) = connect(Some(node()), Some(node()));
    dialer.unwrap();
    assert_eq!(acceptor.unwrap(), b"hello");
    // Pinning is by the exact certificate: a node of CA a is still refused.
    let (_, acceptor) = connect(Some(tls("a-node1", "a")), Some(node()));
    assert!(acceptor.is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn reload_reads_the_files_it_is_given_and_uses_them_from_then_on() {
    let reloading = tls("a-node1", "a");
    let mut mismatched = config("b-node1", "b");
    mismatched.key = testdata("a-node1-key.pem");
    assert!(reloading.reload(mismatched).is_err());
    assert_eq!(reloading.config(), config("a-node1", "a"), "the old files stay in use");
    reloading.reload(config("b-node1", "b")).unwrap();
    assert_eq!(reloading.config(), config("b-node1", "b"));
    let (dialer, acceptor) = connect(Some(reloading), Some(tls("b-node1", "b")));
    dialer.unwrap();
    acceptor.unwrap();
}
