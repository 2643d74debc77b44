//! Group communication for Lockstep: one total order of writesets and views with dense
//! seqnos (continuing a bootstrapped history), unnumbered messages in the same order,
//! primary-component detection, a size-bounded writeset cache (gcache), a
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
//! use lockstep_group::{load_or_create_member_id, DeliveredKind, Genesis, GroupConfig};
//! use lockstep_group::{GroupNode, MemberInfo, NodeConfig};
//! use std::time::Duration;
//!
//! let datadir = std::path::PathBuf::from("/var/lib/mysql"); // the cache is lockstep-cache.*.galera.cache files
//! let node = GroupNode::start(NodeConfig {
//!     group: GroupConfig::new("my_cluster"),
//!     info: MemberInfo {
//!         id: load_or_create_member_id(&datadir)?, // random on first start, then kept
//!         name: "db1".into(),
//!         address: "db1.example:4567".into(),
//!         incoming_address: "db1.example:3306".into(),
//!         incarnation: 1, // new at every start: the application's view of the member's identity
//!         arbitrator: false, // true for `lockstep arbitrator`: votes, holds no data
//!         weight: 1, // `pc.weight`: its say in the quorum
//!         segment: 0, // `gmcast.segment`: its site
//!     },
//!     listen: "0.0.0.0:4567".into(),
//!     data_dir: datadir,
//!     fsync: true,
//!     // `--wsrep-new-cluster`: a new history, numbered on from the database's seqno.
//!     bootstrap: Some(Genesis::new([0x42; 16], 1000)),
//!     // `gcomm://db1.example,db2.example,db3.example`: addresses only, ours may be among them.
//!     peers: vec!["db1.example:4567".into(), "db2.example:4567".into(), "db3.example:4567".into()],
//!     resume_after: 0,
//!     application_position: 0,
//! })?;
//! let seqno = node.submit(b"writeset".to_vec())?; // blocks until ordered
//! let after = node.send_message(b"barrier".to_vec()).recv()??; // ordered, but takes no seqno
//! println!("ordered at {seqno}, barrier after {after}; primary: {}", node.status().primary);
//! while let Some(event) = node.recv_delivered(Duration::from_millis(100)) {
//!     match event.kind {
//!         DeliveredKind::Writeset { origin, .. } => println!("{origin}: apply at {}", event.seqno),
//!         DeliveredKind::Message { origin, .. } => println!("{origin}: message after {}", event.seqno),
//!         DeliveredKind::View(view) => { /* view.members, at event.seqno */ }
//!         DeliveredKind::StateGap => { /* state transfer needed up to event.seqno */ }
//!         DeliveredKind::ViewsMissed => { /* views only up to event.seqno: nothing to apply */ }
//!         DeliveredKind::HistoryForked => { /* another history applied here: full transfer */ }
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Design notes, one per hazard: `docs/design/group-*.md`.

pub mod cache;
pub mod codec;
pub mod config;
pub mod fuzz;
pub mod member;
pub mod message;
pub mod node;
mod parts;
pub mod raft;
pub mod record;
pub mod rng;
pub mod sim;
pub mod state;
pub mod transport;
pub mod types;
mod weights;

/// Runs `f` on a background thread's behalf: a panic is logged as an error naming the
/// thread and returned as its message, so the caller turns it into a visible failure
/// instead of the thread ending silently.
pub(crate) fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|payload| {
        let message = match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
            (Some(text), _) => (*text).to_owned(),
            (_, Some(text)) => text.clone(),
            _ => "a panic without a message".to_owned(),
        };
        let thread = std::thread::current();
        log::error!("thread {} panicked: {message}", thread.name().unwrap_or("unnamed"));
        message
    })
}

pub use cache::load_or_create_member_id;
pub use config::GroupConfig;
pub use member::{FollowerBehind, Member, StartOver, Status};
pub use node::{DeliverySink, GroupNode, NodeConfig, Outbox};
pub use types::{Delivered, DeliveredKind, Genesis, MemberId, MemberInfo, Seqno, SubmitError, View};
