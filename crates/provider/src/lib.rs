//! Lockstep's provider logic: everything behind the wsrep v26 ABI, in plain Rust.
//!
//! The deterministic cores (certification index, seqno windows, options, saved state) have
//! no I/O; [`Provider`] is the thread-facing edge that drives them for the ABI layer.
pub mod addresses;
pub mod application;
pub mod certification;
pub mod grastate;
pub mod ist;
pub mod options;
mod provider;
pub mod seqno_window;
pub mod state_transfer;
pub mod types;
pub mod writeset;

pub use provider::{
    InitArgs, MemberState, Provider, StatValue, StatVar, CAPABILITIES, PROVIDER_NAME, PROVIDER_VENDOR, PROVIDER_VERSION,
};
