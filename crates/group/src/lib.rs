//! Group communication for Lockstep (see ARCHITECTURE.md).
