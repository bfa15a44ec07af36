//! cargo-fuzz target for the admin server's request reader: arbitrary bytes as a client
//! would send them to the HTTP admin port, pushed all at once, one byte at a time and in
//! chunks, as a socket may deliver them.
//!
//! Run: `cd httpwire/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer none parse_request`
//! (add `-- -dict=http.dict` to start from HTTP's words).
//!
//! Properties, beyond "no panic, no hang", are in `httpwire/tests/common/mod.rs`, shared with
//! the bounded run of `cargo test` (`httpwire/tests/fuzz_smoke.rs`): the same answer however
//! the bytes are cut and however often they are read, the answer decided at the byte that
//! settles it, equal to a plain model of the framing, and a request within the limits.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/common/mod.rs"]
mod common;

fuzz_target!(|data: &[u8]| common::check(data));
