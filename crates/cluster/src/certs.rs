//! Certificates for a local cluster's TLS, made with the `openssl` command-line tool (Debian's
//! `openssl` package), so Galera's OpenSSL reads them as well as Lockstep: a cluster CA and one
//! key and certificate per node, in PEM, under `DIR/tls/`.
//!
//! EC P-256 keys in PKCS#8; node certificates carry `CA:FALSE`, both TLS usages (every node
//! dials and accepts) and the node's name and 127.0.0.1 as subject alternative names. The CA
//! key stays in `DIR/tls/` (mode 0600) so nodes added later can be signed by it.
use crate::error::{Error, Result};
use crate::process::run_checked;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Ten years: local clusters are for tests and demos, not for rotation drills.
const VALID_DAYS: &str = "3650";
const OPENSSL_TIMEOUT: Duration = Duration::from_secs(60);

/// Where one node's TLS files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeTls {
    pub key: PathBuf,
    pub cert: PathBuf,
    pub ca: PathBuf,
}

impl NodeTls {
    /// The files of node `name` under the cluster's TLS directory `dir`.
    pub fn at(dir: &Path, name: &str) -> NodeTls {
        NodeTls {
            key: dir.join(format!("{name}-key.pem")),
            cert: dir.join(format!("{name}-cert.pem")),
            ca: ca_cert(dir),
        }
    }

    /// Galera's options naming these files.
    pub fn provider_options(&self) -> String {
        format!(
            "socket.ssl=yes;socket.ssl_key={};socket.ssl_cert={};socket.ssl_ca={}",
            self.key.display(),
            self.cert.display(),
            self.ca.display()
        )
    }
}

fn ca_cert(dir: &Path) -> PathBuf {
    dir.join("ca.pem")
}

fn ca_key(dir: &Path) -> PathBuf {
    dir.join("ca-key.pem")
}

/// Makes the CA in `dir` and a key and certificate for each of `nodes`.
pub fn create(dir: &Path, nodes: &[String]) -> Result<()> {
    fs::create_dir_all(dir).map_err(|e| Error::io_path("create", dir, e))?;
    let (ca, ca_key) = (ca_cert(dir), ca_key(dir));
    openssl(
        Command::new("openssl")
            .args(["req", "-x509", "-new", "-nodes", "-days", VALID_DAYS])
            .args(NEW_EC_KEY)
            .arg("-keyout")
            .arg(&ca_key)
            .arg("-out")
            .arg(&ca)
            .args(["-subj", "/CN=Lockstep local cluster CA"])
            // No system openssl.cnf: the extensions are all given here.
            .args(["-config", "/dev/null"])
            .args(["-addext", "basicConstraints=critical,CA:TRUE"])
            .args(["-addext", "keyUsage=critical,keyCertSign,cRLSign"])
            .args(["-addext", "subjectKeyIdentifier=hash"]),
    )?;
    private(&ca_key)?;
    for name in nodes {
        let files = NodeTls::at(dir, name);
        let request = dir.join(format!("{name}.csr"));
        let extensions = dir.join(format!("{name}.ext"));
        openssl(
            Command::new("openssl")
                .args(["req", "-new", "-nodes"])
                .args(NEW_EC_KEY)
                .arg("-keyout")
                .arg(&files.key)
                .arg("-out")
                .arg(&request)
                .args(["-subj", &format!("/CN={name}")])
                .args(["-config", "/dev/null"]),
        )?;
        private(&files.key)?;
        let text = format!(
            "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n\
             extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=IP:127.0.0.1,DNS:{name}\n\
             subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"
        );
        fs::write(&extensions, text).map_err(|e| Error::io_path("write", &extensions, e))?;
        openssl(
            Command::new("openssl")
                .args(["x509", "-req", "-days", VALID_DAYS])
                .arg("-in")
                .arg(&request)
                .arg("-CA")
                .arg(&ca)
                .arg("-CAkey")
                .arg(&ca_key)
                .arg("-CAserial")
                .arg(dir.join("ca.srl"))
                .arg("-CAcreateserial")
                .arg("-extfile")
                .arg(&extensions)
                .arg("-out")
                .arg(&files.cert),
        )?;
        for scratch in [&request, &extensions] {
            fs::remove_file(scratch).map_err(|e| Error::io_path("remove", scratch, e))?;
        }
    }
    Ok(())
}

const NEW_EC_KEY: [&str; 4] = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];

fn openssl(command: &mut Command) -> Result<()> {
    run_checked(command, OPENSSL_TIMEOUT).map(|_| ()).map_err(|e| match e {
        Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => Error::Invalid(
            "the `openssl` command is needed to make the cluster's certificates (apt-get install openssl, \
             or pass --no-tls)"
                .into(),
        ),
        e => e,
    })
}

fn private(path: &Path) -> Result<()> {
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).map_err(|e| Error::io_path("chmod", path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openssl_makes_a_ca_and_node_certificates_it_verifies() {
        let dir = std::env::temp_dir().join(format!("lockstep-certs-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        create(&dir, &["node1".into(), "node2".into()]).unwrap();
        for name in ["node1", "node2"] {
            let files = NodeTls::at(&dir, name);
            let verified = run_checked(
                Command::new("openssl").arg("verify").arg("-CAfile").arg(&files.ca).arg(&files.cert),
                OPENSSL_TIMEOUT,
            )
            .unwrap();
            assert!(String::from_utf8_lossy(&verified.stdout).contains("OK"));
            let mode = fs::metadata(&files.key).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
            assert!(files.provider_options().starts_with("socket.ssl=yes;socket.ssl_key="));
        }
        let mut left: Vec<String> =
            fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        left.sort();
        assert_eq!(
            left,
            ["ca-key.pem", "ca.pem", "ca.srl", "node1-cert.pem", "node1-key.pem", "node2-cert.pem", "node2-key.pem"]
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
