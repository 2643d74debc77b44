//! Local MariaDB clusters running the Lockstep provider on loopback.
