//! Who may talk to the bookie: TLS on the bookie port, its key material, and authentication.

pub mod auth;
pub mod keystore;
pub mod tls;
