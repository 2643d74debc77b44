//! Deterministic certification (Galera's key semantics). Every member runs the same index
//! over the same ordered writesets and so reaches the same verdict without further messages.
mod index;
mod key;

pub use index::{Candidate, CertificationIndex, Chains, ChainsBuilder, Verdict, CERT_MAX_LENGTH, PA_RANGE_MAX};
pub use key::{Key, KeyRef, KeySet, KeySlice, KeyType};
