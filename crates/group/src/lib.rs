//! Group communication for Lockstep: one total order of writesets and views with dense
//! seqnos, primary-component detection, a size-bounded writeset cache (gcache), a
//! flow-control hook, a TCP transport, and a deterministic simulator that checks it all.
//!
//! Consensus is not ours: ordering and membership run on the `noraft` Raft library
//! (MIT, sans-I/O), reached only through [`raft`]. Ours is what sits on top:
//! - [`member::Member`]: the deterministic state machine of one member (no I/O);
//! - [`state`]: seqnos and views as a pure function of the committed log;
//! - [`cache`]: the Raft log *is* the writeset cache ([`cache::FileStore`] on disk,
//!   [`cache::MemoryStore`] in the simulator);
//! - [`transport`]: one checked record format ([`record`]) on the wire and on disk;
//! - [`node::GroupNode`]: a running member (driver thread, TCP, files) — what the provider
//!   uses;
//! - [`sim`]: the seeded simulator and its invariant checkers.
//!
//! Using a node (the provider's view):
//! ```no_run
//! use lockstep_group::{DeliveredKind, GroupConfig, GroupNode, MemberId, MemberInfo, NodeConfig};
//! use std::time::Duration;
//!
//! let node = GroupNode::start(NodeConfig {
//!     group: GroupConfig::new("my_cluster"),
//!     info: MemberInfo {
//!         id: MemberId(1),
//!         name: "db1".into(),
//!         address: "127.0.0.1:4567".into(),
//!         incoming_address: "127.0.0.1:3306".into(),
//!     },
//!     data_dir: "/var/lib/lockstep/gcache".into(),
//!     fsync: true,
//!     bootstrap: true,
//!     peers: vec![(MemberId(2), "127.0.0.1:4568".into())],
//!     resume_after: 0,
//! })?;
//! let seqno = node.submit(b"writeset".to_vec())?; // blocks until ordered
//! println!("ordered at {seqno}; primary: {}", node.status().primary);
//! while let Some(event) = node.recv_delivered(Duration::from_millis(100)) {
//!     match event.kind {
//!         DeliveredKind::Writeset { origin, .. } => println!("{origin}: apply at {}", event.seqno),
//!         DeliveredKind::View(view) => { /* view.members, at event.seqno */ }
//!         DeliveredKind::StateGap => { /* state transfer needed up to event.seqno */ }
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod cache;
mod codec;
pub mod config;
pub mod member;
pub mod message;
pub mod node;
pub mod raft;
pub mod record;
mod rng;
pub mod sim;
pub mod state;
pub mod transport;
pub mod types;

pub use config::GroupConfig;
pub use member::{Member, Status};
pub use node::{GroupNode, NodeConfig};
pub use types::{Delivered, DeliveredKind, MemberId, MemberInfo, Seqno, SubmitError, View};
