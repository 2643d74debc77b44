//! Lockstep's provider logic: everything behind the wsrep v26 ABI, in plain Rust.
//!
//! The logic is deterministic and has no I/O: [`core::Core`] (the node's whole provider
//! state: certification in order, monitors, transactions, joining), the certification index,
//! seqno windows, options and the saved state. [`Provider`] is the thread-facing runtime that
//! drives the core for the ABI layer.
pub mod addresses;
pub mod application;
pub mod arbitrator;
pub mod certification;
pub mod checkpoint;
pub mod core;
pub mod grastate;
pub mod ist;
pub mod options;
mod provider;
pub mod seqno_window;
pub mod sim;
pub mod state_transfer;
pub mod tls_options;
pub mod types;
pub mod writeset;

pub use provider::{
    InitArgs, Provider, StatValue, StatVar, CAPABILITIES, PROVIDER_NAME, PROVIDER_VENDOR, PROVIDER_VERSION,
};
