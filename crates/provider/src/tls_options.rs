//! Galera's `socket.ssl*` provider options to the group layer's TLS contexts, which serve
//! both group connections and state transfers (docs/design/group-tls.md).
//!
//! As in Galera, `socket.ssl=yes` or a key or certificate turns TLS on; `socket.ssl_ca`
//! defaults to the certificate (a self-signed certificate is its own CA). Without any of
//! them the node runs on plain TCP and says so once, in a Note.
use crate::options::Options;
use lockstep_group::transport::{Tls, TlsConfig};
use std::path::PathBuf;
use std::sync::Arc;

/// The TLS settings the options ask for; `None`: plain TCP.
pub fn tls_config(options: &Options) -> Result<Option<TlsConfig>, String> {
    let (key, cert, ca) = (options.get("socket.ssl_key"), options.get("socket.ssl_cert"), options.get("socket.ssl_ca"));
    if !options.flag("socket.ssl") && key.is_empty() && cert.is_empty() {
        return Ok(None);
    }
    if key.is_empty() || cert.is_empty() {
        return Err("TLS is on (socket.ssl) but socket.ssl_key or socket.ssl_cert is not set".into());
    }
    if !options.get("socket.ssl_password_file").is_empty() {
        return Err("socket.ssl_password_file is not supported: socket.ssl_key must not be encrypted".into());
    }
    Ok(Some(TlsConfig {
        key: PathBuf::from(key),
        cert: PathBuf::from(cert),
        ca: PathBuf::from(if ca.is_empty() { cert } else { ca }),
        ciphers: options.get("socket.ssl_cipher").to_string(),
    }))
}

/// Loads the contexts the options ask for, when the node connects. A Note, not a warning
/// (mtr fails a test on warnings), says when traffic goes in the clear.
pub fn load(options: &Options) -> Result<Option<Arc<Tls>>, String> {
    let Some(config) = tls_config(options)? else {
        log::info!(
            "socket.ssl is off: group communication and state transfers are neither encrypted nor \
             authenticated (set socket.ssl_key, socket.ssl_cert and socket.ssl_ca to protect them)"
        );
        return Ok(None);
    };
    let ca = config.ca.display().to_string();
    let dynamic = options.flag("socket.dynamic");
    let tls = Tls::load(config).map_err(|e| e.to_string())?.with_dynamic(dynamic);
    if dynamic {
        // A Note: the operator asked for a mixed cluster (mtr galera_dynamic_protocol).
        log::info!(
            "group communication and state transfers use TLS 1.3 with peers that show a certificate of {ca}, \
             and plain TCP with peers without TLS (socket.dynamic)"
        );
    } else {
        log::info!("group communication and state transfers use TLS 1.3; every peer must show a certificate of {ca}");
    }
    Ok(Some(Arc::new(tls)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::NodeSite;

    fn options(text: &str) -> Options {
        let mut options = Options::new(&NodeSite { data_dir: "/d/", node_address: "127.0.0.1" });
        options.apply(text).unwrap();
        options
    }

    #[test]
    fn certificates_or_socket_ssl_turn_tls_on_like_galera() {
        assert_eq!(tls_config(&options("")).unwrap(), None);
        let config = tls_config(&options("socket.ssl_key=/k.pem;socket.ssl_cert=/c.pem")).unwrap().unwrap();
        assert_eq!((config.key.to_str(), config.ca.to_str()), (Some("/k.pem"), Some("/c.pem")), "ca defaults to cert");
        let config = tls_config(&options(
            "socket.ssl=yes;socket.ssl_key=/k.pem;socket.ssl_cert=/c.pem;socket.ssl_ca=/ca.pem;socket.ssl_cipher=TLS_AES_128_GCM_SHA256",
        ))
        .unwrap()
        .unwrap();
        assert_eq!((config.ca.to_str(), config.ciphers.as_str()), (Some("/ca.pem"), "TLS_AES_128_GCM_SHA256"));
        assert!(tls_config(&options("socket.ssl=yes")).unwrap_err().contains("socket.ssl_key"));
        let encrypted = "socket.ssl_key=/k.pem;socket.ssl_cert=/c.pem;socket.ssl_password_file=/p";
        assert!(tls_config(&options(encrypted)).unwrap_err().contains("socket.ssl_password_file"));
    }

    #[test]
    fn missing_files_fail_the_load_and_no_certificates_is_plain() {
        assert!(load(&options("")).unwrap().is_none());
        let error = load(&options("socket.ssl_key=/no/k.pem;socket.ssl_cert=/no/c.pem")).unwrap_err();
        assert!(error.contains("/no/c.pem"), "{error}");
    }
}
