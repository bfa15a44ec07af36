//! Who may talk to the bookie: TLS on the bookie port and on the HTTP admin server, their key
//! material, and authentication.

pub mod auth;
pub mod http_tls;
pub mod keystore;
pub mod tls;
