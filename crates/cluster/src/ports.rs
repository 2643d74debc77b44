//! Free loopback ports for a node: client, group communication, IST (group + 1) and SST.
use crate::error::{Error, Result};
use std::collections::hash_map::RandomState;
use std::collections::HashSet;
use std::hash::BuildHasher;
use std::net::{Ipv4Addr, TcpListener};
use std::sync::Mutex;

/// The ports one node listens on, all on 127.0.0.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodePorts {
    /// MariaDB client port (`port=`).
    pub client: u16,
    /// Group communication (`base_port`, `gmcast.listen_addr`).
    pub group: u16,
    /// SST receiver (`wsrep_sst_receive_address`).
    pub sst: u16,
}

impl NodePorts {
    /// IST receiver; Galera's default is `base_port + 1`, and we keep that layout.
    pub fn ist(&self) -> u16 {
        self.group + 1
    }
}

// Below Linux's ephemeral range (32768+) so outgoing connections never take them, and above the
// 22000-22059 range that MariaDB's mtr runs use on these machines.
const RANGE_START: u16 = 23000;
const RANGE_END: u16 = 32700;
/// A node takes a block of consecutive ports: client, group, IST, SST.
const BLOCK_LEN: u16 = 4;

/// Blocks handed out by this process, so parallel tests in one process never share ports.
static TAKEN_BLOCKS: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// Finds a block of ports that are free right now on 127.0.0.1, starting at a random place.
pub fn allocate_node_ports() -> Result<NodePorts> {
    let block_count = (RANGE_END - RANGE_START) / BLOCK_LEN;
    let start = (RandomState::new().hash_one(std::process::id()) % u64::from(block_count)) as u16;
    let mut taken = TAKEN_BLOCKS.lock().unwrap_or_else(|e| e.into_inner());
    let taken = taken.get_or_insert_with(HashSet::new);
    for step in 0..block_count {
        let first = RANGE_START + ((start + step) % block_count) * BLOCK_LEN;
        if taken.contains(&first) || !(first..first + BLOCK_LEN).all(is_free) {
            continue;
        }
        taken.insert(first);
        return Ok(NodePorts { client: first, group: first + 1, sst: first + 3 });
    }
    Err(Error::Invalid(format!(
        "no free block of {BLOCK_LEN} loopback ports: all {block_count} in {RANGE_START}..{RANGE_END} are in use \
         or taken by this cluster's other nodes"
    )))
}

fn is_free(port: u16) -> bool {
    TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok()
}
