//! The parts of a stored entry autorecovery reads, and the ledger's master key. An entry is
//! kept as the client packaged it: ledger id, entry id, the writer's last-add-confirmed, the
//! ledger's length through this entry (each 8 bytes, big-endian), the digest, the payload —
//! copied byte for byte, it stays valid for every reader.

use sha1::{Digest, Sha1};

fn field(body: &[u8], at: usize) -> Option<i64> {
    body.get(at..at + 8)
        .map(|b| i64::from_be_bytes(b.try_into().unwrap_or([0; 8])))
}

/// The ledger and entry ids an entry carries.
pub fn ids(body: &[u8]) -> Option<(i64, i64)> {
    Some((field(body, 0)?, field(body, 8)?))
}

/// The last-add-confirmed an entry carries.
pub fn lac(body: &[u8]) -> Option<i64> {
    field(body, 16)
}

/// The ledger's length through this entry.
pub fn length(body: &[u8]) -> Option<i64> {
    field(body, 24)
}

/// The master key a bookie checks adds against: SHA-1 of `"ledger"` then the password
/// (Java's `MacDigestManager.genDigest("ledger", password)`).
pub fn master_key(password: &[u8]) -> [u8; 20] {
    let mut h = Sha1::new();
    h.update(b"ledger");
    h.update(password);
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_fields_and_the_master_key() {
        let mut body = Vec::new();
        for v in [7i64, 12, 11, 4096] {
            body.extend_from_slice(&v.to_be_bytes());
        }
        body.extend_from_slice(b"digest+payload");
        assert_eq!(ids(&body), Some((7, 12)));
        assert_eq!(lac(&body), Some(11));
        assert_eq!(length(&body), Some(4096));
        assert_eq!(ids(&body[..10]), None);
        // SHA-1("ledger"), the key of a ledger with an empty password.
        let k = master_key(b"");
        assert_eq!(
            k.iter().map(|b| format!("{b:02x}")).collect::<String>(),
            "850bf1071c5e3d8c24235676f8816ae0cbe2f14f"
        );
    }
}
