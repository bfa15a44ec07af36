//! cargo-fuzz target for the server-side decoder: arbitrary bytes as they would
//! arrive on a bookie connection.
//!
//! Run: `cd net/fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer none decode_request`.
//!
//! Properties, beyond "no panic, no hang": the frame limit is enforced from the
//! prefix, and every frame the decoder accepts re-encodes and decodes to the same
//! value (the canonical-form promise of the crate docs). The bounded version of
//! this runs in `cargo test` as net/tests/fuzz_smoke.rs.

#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use net::codec::encode_request;
use net::server::{Detection, RequestDecoder};

const MAX_FRAME_SIZE: usize = 64 * 1024;

fuzz_target!(|data: &[u8]| {
    for detection in [Detection::PerFrame, Detection::JavaOneWay] {
        let mut decoder = RequestDecoder::new(MAX_FRAME_SIZE).with_detection(detection);
        let mut buffer = BytesMut::from(data);
        while let Ok(Some(frame)) = decoder.decode(&mut buffer) {
            if detection != Detection::PerFrame {
                continue;
            }
            let mut encoded = BytesMut::new();
            encode_request(&frame, &mut encoded).expect("a decoded request re-encodes");
            let again = RequestDecoder::new(MAX_FRAME_SIZE)
                .decode(&mut encoded)
                .expect("re-encoded bytes decode")
                .expect("a whole frame");
            assert_eq!(again, frame);
        }
    }
});
