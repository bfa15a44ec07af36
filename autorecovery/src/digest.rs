//! Entry digests as the Java client computes and checks them (`DigestManager` and its CRC32,
//! CRC32C, MAC and DUMMY subclasses), for the admin routes that read a ledger's entries
//! (`/api/v1/ledger/read`) or write a ledger of their own (`/api/v1/bookie/sanity`). Copying
//! an entry (autorecovery's own work) never needs them: it moves the packaged bytes unchanged.
//!
//! The digest covers the 32-byte header (ledger id, entry id, last-add-confirmed, length)
//! and then the payload; it sits between them: CRC32 as an 8-byte long holding the IEEE
//! CRC-32, CRC32C as a 4-byte int, MAC as HMAC-SHA1 (20 bytes) keyed by
//! SHA-1(`"mac"` ‖ password), DUMMY as nothing.

use bytes::{BufMut, Bytes, BytesMut};
use hmac::{KeyInit, Mac};
use metadata::ledger_metadata::DigestType;
use sha1::{Digest, Sha1};

/// The header before the digest.
pub const HEADER_LEN: usize = 32;

/// Length of the digest field. A ledger whose metadata names no digest (written by 4.1 or
/// older) is read as Java's admin client reads it, as CRC32.
pub fn digest_len(t: Option<DigestType>) -> usize {
    match t {
        Some(DigestType::Crc32c) => 4,
        Some(DigestType::Hmac) => 20,
        Some(DigestType::Dummy) => 0,
        Some(DigestType::Crc32) | None => 8,
    }
}

fn compute(t: Option<DigestType>, password: &[u8], header: &[u8], payload: &[u8]) -> Vec<u8> {
    match t {
        Some(DigestType::Crc32c) => crc32c::crc32c_append(crc32c::crc32c(header), payload)
            .to_be_bytes()
            .to_vec(),
        Some(DigestType::Hmac) => {
            let key: [u8; 20] = {
                let mut h = Sha1::new();
                h.update(b"mac");
                h.update(password);
                h.finalize().into()
            };
            let mut mac =
                hmac::Hmac::<Sha1>::new_from_slice(&key).expect("HMAC takes a key of any length");
            mac.update(header);
            mac.update(payload);
            mac.finalize().into_bytes().to_vec()
        }
        Some(DigestType::Dummy) => Vec::new(),
        Some(DigestType::Crc32) | None => {
            let mut h = crc32fast::Hasher::new();
            h.update(header);
            h.update(payload);
            u64::from(h.finalize()).to_be_bytes().to_vec()
        }
    }
}

/// The identity of an entry as its writer packaged it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryHeader {
    pub ledger_id: i64,
    pub entry_id: i64,
    pub last_add_confirmed: i64,
    pub length: i64,
}

/// Packages `payload` as the Java client sends it in an add.
pub fn package(h: &EntryHeader, t: Option<DigestType>, password: &[u8], payload: &[u8]) -> Bytes {
    let mut header = [0u8; HEADER_LEN];
    header[0..8].copy_from_slice(&h.ledger_id.to_be_bytes());
    header[8..16].copy_from_slice(&h.entry_id.to_be_bytes());
    header[16..24].copy_from_slice(&h.last_add_confirmed.to_be_bytes());
    header[24..32].copy_from_slice(&h.length.to_be_bytes());
    let digest = compute(t, password, &header, payload);
    let mut out = BytesMut::with_capacity(HEADER_LEN + digest.len() + payload.len());
    out.put_slice(&header);
    out.put_slice(&digest);
    out.put_slice(payload);
    out.freeze()
}

/// Checks a returned entry as Java's `verifyDigestAndReturnData` does (the digest, then the
/// ids asked for) and returns its payload.
pub fn verify<'a>(
    body: &'a [u8],
    t: Option<DigestType>,
    password: &[u8],
    ledger_id: i64,
    entry_id: i64,
) -> Result<&'a [u8], String> {
    let d = digest_len(t);
    if body.len() < HEADER_LEN + d {
        return Err(format!(
            "entry {ledger_id}:{entry_id}: {} bytes, shorter than its header",
            body.len()
        ));
    }
    let (header, rest) = body.split_at(HEADER_LEN);
    let (digest, payload) = rest.split_at(d);
    if compute(t, password, header, payload) != digest {
        return Err(format!(
            "entry {ledger_id}:{entry_id}: the digest does not match"
        ));
    }
    if crate::entry::ids(body) != Some((ledger_id, entry_id)) {
        return Err(format!(
            "entry {ledger_id}:{entry_id}: it carries other ids"
        ));
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packaged_entries_verify_and_damage_is_seen() {
        let h = EntryHeader {
            ledger_id: 7,
            entry_id: 3,
            last_add_confirmed: 2,
            length: 40,
        };
        for t in [
            Some(DigestType::Crc32),
            Some(DigestType::Crc32c),
            Some(DigestType::Hmac),
            Some(DigestType::Dummy),
            None,
        ] {
            let e = package(&h, t, b"pw", b"entry-3");
            assert_eq!(e.len(), HEADER_LEN + digest_len(t) + 7);
            assert_eq!(verify(&e, t, b"pw", 7, 3), Ok(&b"entry-3"[..]));
            assert!(verify(&e, t, b"pw", 7, 4).is_err(), "{t:?}: wrong entry id");
            if t != Some(DigestType::Dummy) {
                let mut bad = e.to_vec();
                *bad.last_mut().unwrap() ^= 1;
                assert!(
                    verify(&bad, t, b"pw", 7, 3).is_err(),
                    "{t:?}: a flipped bit"
                );
            }
        }
        // MAC depends on the password.
        let e = package(&h, Some(DigestType::Hmac), b"pw", b"x");
        assert!(verify(&e, Some(DigestType::Hmac), b"other", 7, 3).is_err());
    }

    #[test]
    fn hmac_sha1_matches_rfc_2202() {
        // RFC 2202 test case 2: key "Jefe", data "what do ya want for nothing?".
        let mut mac = hmac::Hmac::<Sha1>::new_from_slice(b"Jefe").unwrap();
        mac.update(b"what do ya want for nothing?");
        let hex: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(hex, "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79");
    }
}
