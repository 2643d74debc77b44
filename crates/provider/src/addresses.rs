//! Where group traffic listens and whom it contacts, from the settings a Galera user
//! writes: `wsrep_cluster_address=gcomm://a,b:4568,c`, `wsrep_node_address`,
//! `gmcast.listen_addr`, `base_host`, `base_port`, and where state transfers arrive:
//! `ist.recv_addr` (default: the node's host, port `base_port` + 1), `ist.recv_bind`.

pub const URL_SCHEME: &str = "gcomm://";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupAddresses {
    /// Peers to contact, `host:port`; empty means "start a new cluster".
    pub peers: Vec<String>,
    /// Where our transport binds.
    pub listen: String,
    /// Where peers reach us (differs from `listen` when binding a wildcard address).
    pub advertised: String,
    /// Where a donor sends our incremental state transfer.
    pub ist_advertised: String,
    /// Where our state-transfer receiver binds.
    pub ist_bind: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressError(pub String);

impl std::fmt::Display for AddressError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Splits `host[:port]` (IPv6 in brackets); the port defaults to `default_port`.
fn host_port(text: &str, default_port: u16) -> Result<(String, u16), AddressError> {
    let bad = || AddressError(format!("invalid address '{text}': expected host[:port]"));
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, tail) = rest.split_once(']').ok_or_else(bad)?;
        (format!("[{host}]"), tail.strip_prefix(':'))
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host.to_string(), Some(port)),
            None => (text.to_string(), None),
        }
    };
    if host.is_empty() || host.contains(['/', ' ', ',']) {
        return Err(bad());
    }
    let port = match port {
        Some(p) => p.parse::<u16>().map_err(|_| bad())?,
        None => default_port,
    };
    Ok((host, port))
}

fn strip_tcp(text: &str) -> &str {
    text.trim().strip_prefix("tcp://").unwrap_or(text.trim())
}

/// Settings that decide the addresses, as the provider options and init arguments give them.
pub struct AddressSettings<'a> {
    pub cluster_url: &'a str,
    pub node_address: &'a str,
    pub listen_addr: &'a str,
    pub base_host: &'a str,
    pub base_port: &'a str,
    pub ist_recv_addr: &'a str,
    pub ist_recv_bind: &'a str,
}

impl GroupAddresses {
    pub fn resolve(s: &AddressSettings<'_>) -> Result<GroupAddresses, AddressError> {
        let list = s.cluster_url.strip_prefix(URL_SCHEME).ok_or_else(|| {
            // Galera's wording first: operators and monitoring match on it.
            let backend = s.cluster_url.split("://").next().unwrap_or_default();
            AddressError(format!(
                "Backend not supported: {backend} (cluster address '{}'; expected {URL_SCHEME}[host[:port],...])",
                s.cluster_url
            ))
        })?;
        let base_port: u16 =
            s.base_port.parse().map_err(|_| AddressError(format!("invalid base_port '{}'", s.base_port)))?;
        // Options after '?': `address_options`, applied before the addresses are resolved.
        let list = list.split('?').next().unwrap_or("");
        let peers = list
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| host_port(p, base_port).map(|(h, port)| format!("{h}:{port}")))
            .collect::<Result<Vec<_>, _>>()?;
        let node_host = if !s.base_host.is_empty() {
            s.base_host.to_string()
        } else if s.node_address.is_empty() || s.node_address == "AUTO" {
            "127.0.0.1".to_string()
        } else {
            host_port(strip_tcp(s.node_address), base_port)?.0
        };
        let (listen_host, listen_port) = if s.listen_addr.is_empty() {
            (node_host.clone(), base_port)
        } else {
            host_port(strip_tcp(s.listen_addr), base_port)?
        };
        let wildcard = matches!(listen_host.as_str(), "0.0.0.0" | "[::]" | "::");
        let advertised_host = if wildcard { node_host.clone() } else { listen_host.clone() };
        let ist_default_port = base_port
            .checked_add(1)
            .ok_or_else(|| AddressError(format!("base_port {base_port} leaves no port for ist.recv_addr")))?;
        let (ist_host, ist_port) = if s.ist_recv_addr.trim().is_empty() {
            (node_host, ist_default_port)
        } else {
            host_port(strip_tcp(s.ist_recv_addr), ist_default_port)?
        };
        let ist_bind = if s.ist_recv_bind.trim().is_empty() {
            format!("{ist_host}:{ist_port}")
        } else {
            let (host, port) = host_port(strip_tcp(s.ist_recv_bind), ist_port)?;
            format!("{host}:{port}")
        };
        Ok(GroupAddresses {
            peers,
            listen: format!("{listen_host}:{listen_port}"),
            advertised: format!("{advertised_host}:{listen_port}"),
            ist_advertised: format!("{ist_host}:{ist_port}"),
            ist_bind,
        })
    }
}

/// Galera options in the cluster address after `?`, separated by `&`
/// (`gcomm://a,b?gmcast.segment=1&pc.wait_prim=no`, as MariaDB documents it), as the
/// `key=value; ...` text `Options::apply` takes: they count as if given in
/// `wsrep_provider_options`. Empty without any.
pub fn address_options(cluster_url: &str) -> String {
    cluster_url.split_once('?').map_or_else(String::new, |(_, options)| options.replace('&', ";"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings<'a>(url: &'a str, node: &'a str, listen: &'a str) -> AddressSettings<'a> {
        AddressSettings {
            cluster_url: url,
            node_address: node,
            listen_addr: listen,
            base_host: "",
            base_port: "4567",
            ist_recv_addr: "",
            ist_recv_bind: "",
        }
    }

    #[test]
    fn state_transfers_arrive_on_ist_recv_addr_else_the_port_after_base_port() {
        let a = GroupAddresses::resolve(&settings("gcomm://b", "10.0.0.1", "")).unwrap();
        assert_eq!((a.ist_advertised.as_str(), a.ist_bind.as_str()), ("10.0.0.1:4568", "10.0.0.1:4568"));
        let s = AddressSettings { ist_recv_addr: "tcp://10.0.0.9:7000", ..settings("gcomm://b", "10.0.0.1", "") };
        assert_eq!(GroupAddresses::resolve(&s).unwrap().ist_advertised, "10.0.0.9:7000");
        let s =
            AddressSettings { ist_recv_addr: "10.0.0.9", ist_recv_bind: "0.0.0.0", ..settings("gcomm://b", "h", "") };
        let a = GroupAddresses::resolve(&s).unwrap();
        assert_eq!((a.ist_advertised.as_str(), a.ist_bind.as_str()), ("10.0.0.9:4568", "0.0.0.0:4568"));
        let s = AddressSettings { ist_recv_addr: "h:x", ..settings("gcomm://b", "h", "") };
        assert!(GroupAddresses::resolve(&s).unwrap_err().0.contains("h:x"));
    }

    #[test]
    fn galera_style_configuration_works_unchanged() {
        let a = GroupAddresses::resolve(&settings("gcomm://10.0.0.1,10.0.0.2:4568,node3", "10.0.0.1", "")).unwrap();
        assert_eq!(a.peers, ["10.0.0.1:4567", "10.0.0.2:4568", "node3:4567"]);
        assert_eq!((a.listen.as_str(), a.advertised.as_str()), ("10.0.0.1:4567", "10.0.0.1:4567"));

        let a = GroupAddresses::resolve(&settings("gcomm://", "10.0.0.1", "tcp://0.0.0.0:5000")).unwrap();
        assert!(a.peers.is_empty());
        assert_eq!((a.listen.as_str(), a.advertised.as_str()), ("0.0.0.0:5000", "10.0.0.1:5000"));

        let a = GroupAddresses::resolve(&settings("gcomm://a?pc.wait_prim=no", "[::1]:4444", "")).unwrap();
        assert_eq!((a.peers[0].as_str(), a.listen.as_str()), ("a:4567", "[::1]:4567"));
    }

    #[test]
    fn options_after_the_question_mark_become_provider_options() {
        let url = "gcomm://a,b?pc.wait_prim=no&gmcast.segment=1";
        assert_eq!(address_options(url), "pc.wait_prim=no;gmcast.segment=1");
        assert_eq!(GroupAddresses::resolve(&settings(url, "10.0.0.1", "")).unwrap().peers, ["a:4567", "b:4567"]);
        assert_eq!(address_options("gcomm://a,b"), "");
        assert_eq!(address_options("gcomm://"), "");
    }

    #[test]
    fn malformed_addresses_are_named_in_the_error() {
        for (url, listen) in [("mysql://x", ""), ("gcomm://a:notaport", ""), ("gcomm://", "tcp://h:99999")] {
            let e = GroupAddresses::resolve(&settings(url, "127.0.0.1", listen)).unwrap_err();
            assert!(e.0.contains(if listen.is_empty() { url.trim_start_matches("gcomm://") } else { "99999" }), "{e}");
        }
    }
}
