//! Local MariaDB clusters running a wsrep provider (Lockstep, or Galera for comparison) on
//! loopback: data directories, configs, `mariadbd` processes, status, clean and crash stops,
//! and `--wsrep-recover`.
//!
//! Layout of a cluster directory `DIR`:
//! - `DIR/cluster.state`: provider, extra provider options, TLS on or off and each node's ports;
//! - `DIR/tls/`: the cluster CA and each node's key and certificate (when TLS is on);
//! - `DIR/nodeI/`: `my.cnf`, `data/` (with the provider's `grastate.dat`), `mariadbd.sock`,
//!   `mariadbd.pid`, `error.log`;
//! - `DIR/garb/`: the arbitrator's `garb.log` and `garb.pid`, when the cluster has one.
//!
//! The server is driven through the `mariadb` client binary, so no MySQL protocol crate is needed.
mod arbitrator;
mod certs;
mod cluster;
mod endpoint;
mod error;
mod interrupt;
mod node;
mod ports;
mod position;
mod process;

pub use arbitrator::{Arbitrator, ARBITRATOR_NAME};
pub use certs::NodeTls;
pub use cluster::{default_provider, Cluster, ClusterSpec, Requested};
pub use endpoint::Endpoint;
pub use error::{Error, Result};
pub use interrupt::{interrupting_signal, signal_name, INTERRUPTING_SIGNAL};
pub use node::{mariadbd_running, Node, NodeConfig, WsrepStatus};
pub use ports::{allocate_node_ports, NodePorts};
pub use position::{Position, SavedState};
