//! The bytes a BookKeeper client puts in an add, built the way the Java client builds them, so
//! that a bookie under test stores (and a Java reader could verify) exactly what a real client
//! would have written.
//!
//! Entry layout (docs/protocol.md §5.1; checked against the Java `DigestManager` /
//! `CRC32CDigestManager`, which write the CRC32C as one big-endian `int`):
//! ```text
//! 0   8  ledgerId          i64 BE
//! 8   8  entryId           i64 BE
//! 16  8  lastAddConfirmed  i64 BE (the writer's LAC when it sent the entry, -1 if none)
//! 24  8  length            i64 BE (ledger length including this entry's payload)
//! 32  D  digest over bytes [0,32) then the payload: CRC32C D=4, CRC32 D=8 (i64), DUMMY D=0
//! 32+D   payload
//! ```
//! The master key is derived as Java does, `SHA-1("ledger" ‖ password)` (docs/protocol.md §5.3;
//! `MacDigestManager.genDigest`), with a default password of `""` (Java's `benchPasswd` is
//! one flag away), so a Java client opening the same ledger with the same password would be
//! let in. SHA-1 is implemented here (40 lines, checked against FIPS 180 vectors) rather than
//! pulled in as a crate: it runs once per ledger.

use bytes::{BufMut, Bytes, BytesMut};

/// Bytes before the digest.
pub const HEADER_LEN: usize = 32;

/// The ledger's digest type (it lives in ledger metadata; the bookie never checks it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DigestType {
    /// CRC-32C, 4 bytes (Pulsar's default).
    Crc32c,
    /// IEEE CRC-32 written as an i64, 8 bytes (BenchThroughputLatency's).
    Crc32,
    /// No digest.
    Dummy,
}

impl DigestType {
    /// Length of the digest field.
    pub const fn len(self) -> usize {
        match self {
            DigestType::Crc32c => 4,
            DigestType::Crc32 => 8,
            DigestType::Dummy => 0,
        }
    }

    /// The name used in reports (`client.digest`).
    pub const fn name(self) -> &'static str {
        match self {
            DigestType::Crc32c => "CRC32C",
            DigestType::Crc32 => "CRC32",
            DigestType::Dummy => "DUMMY",
        }
    }
}

/// The identity of one entry as the writer saw it when sending it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryHeader {
    pub ledger_id: i64,
    pub entry_id: i64,
    pub last_add_confirmed: i64,
    /// Ledger length in bytes including this entry's payload.
    pub length: i64,
}

/// Appends one whole entry (header, digest, payload) to `out`.
pub fn encode_entry(h: &EntryHeader, digest: DigestType, payload: &[u8], out: &mut BytesMut) {
    out.reserve(HEADER_LEN + digest.len() + payload.len());
    let mut header = [0u8; HEADER_LEN];
    header[0..8].copy_from_slice(&h.ledger_id.to_be_bytes());
    header[8..16].copy_from_slice(&h.entry_id.to_be_bytes());
    header[16..24].copy_from_slice(&h.last_add_confirmed.to_be_bytes());
    header[24..32].copy_from_slice(&h.length.to_be_bytes());
    out.put_slice(&header);
    match digest {
        DigestType::Crc32c => {
            let crc = crc32c::crc32c_append(crc32c::crc32c(&header), payload);
            out.put_u32(crc);
        }
        DigestType::Crc32 => {
            let mut hasher = crc32fast::Hasher::new();
            hasher.update(&header);
            hasher.update(payload);
            out.put_u64(u64::from(hasher.finalize()));
        }
        DigestType::Dummy => {}
    }
    out.put_slice(payload);
}

/// Builds one entry as `Bytes` using `scratch` as the arena (amortised: no allocation per
/// entry once the arena has grown).
pub fn build_entry(
    h: &EntryHeader,
    digest: DigestType,
    payload: &[u8],
    scratch: &mut BytesMut,
) -> Bytes {
    if scratch.capacity() < HEADER_LEN + digest.len() + payload.len() {
        scratch.reserve(256 * 1024);
    }
    encode_entry(h, digest, payload, scratch);
    scratch.split().freeze()
}

/// Why a returned entry does not verify.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerifyError {
    TooShort,
    WrongIds,
    BadDigest,
}

/// Checks an entry a bookie returned as the Java client does (`verifyDigestAndReturnData`):
/// the digest and that ledger and entry ids are the ones asked for. Returns the header.
pub fn verify_entry(
    body: &[u8],
    digest: DigestType,
    ledger_id: i64,
    entry_id: i64,
) -> Result<EntryHeader, VerifyError> {
    let d = digest.len();
    if body.len() < HEADER_LEN + d {
        return Err(VerifyError::TooShort);
    }
    let word = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&body[i..i + 8]);
        i64::from_be_bytes(b)
    };
    let h = EntryHeader {
        ledger_id: word(0),
        entry_id: word(8),
        last_add_confirmed: word(16),
        length: word(24),
    };
    let (header, rest) = body.split_at(HEADER_LEN);
    let (stored, payload) = rest.split_at(d);
    let ok = match digest {
        DigestType::Crc32c => {
            crc32c::crc32c_append(crc32c::crc32c(header), payload).to_be_bytes()[..] == *stored
        }
        DigestType::Crc32 => {
            let mut hasher = crc32fast::Hasher::new();
            hasher.update(header);
            hasher.update(payload);
            u64::from(hasher.finalize()).to_be_bytes()[..] == *stored
        }
        DigestType::Dummy => true,
    };
    if !ok {
        return Err(VerifyError::BadDigest);
    }
    if h.ledger_id != ledger_id || h.entry_id != entry_id {
        return Err(VerifyError::WrongIds);
    }
    Ok(h)
}

/// The master key a Java client derives from `password`: `SHA-1("ledger" ‖ password)`.
pub fn master_key(password: &[u8]) -> [u8; 20] {
    let mut input = b"ledger".to_vec();
    input.extend_from_slice(password);
    sha1(&input)
}

/// SHA-1 (FIPS 180-4). Only for the master key: once per ledger, never on a hot path.
pub fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [
        0x6745_2301,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    let mut msg = data.to_vec();
    let bit_len = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bit_len.to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 20];
    for (i, x) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn sha1_fips_vectors() {
        assert_eq!(
            hex(&sha1(b"abc")),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(hex(&sha1(b"")), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(
            hex(&sha1(
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
            )),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1"
        );
    }

    /// docs/protocol.md §5.3 / §8: master keys for the empty password and "secret".
    #[test]
    fn master_keys_match_java() {
        assert_eq!(
            hex(&master_key(b"")),
            "850bf1071c5e3d8c24235676f8816ae0cbe2f14f"
        );
        assert_eq!(
            hex(&master_key(b"secret")),
            "e793cbc379107648537183605cd361d3bb789a39"
        );
    }

    /// docs/protocol.md §8.0: entry E (ledger 5, entry 3, LAC 2, length 20, "hello", CRC32C).
    #[test]
    fn entry_matches_protocol_vector() {
        let h = EntryHeader {
            ledger_id: 5,
            entry_id: 3,
            last_add_confirmed: 2,
            length: 20,
        };
        let mut out = BytesMut::new();
        encode_entry(&h, DigestType::Crc32c, b"hello", &mut out);
        assert_eq!(
            hex(&out),
            "0000000000000005000000000000000300000000000000020000000000000014c2f3f26668656c6c6f"
        );
        let mut crc32 = BytesMut::new();
        encode_entry(&h, DigestType::Crc32, b"hello", &mut crc32);
        assert_eq!(crc32.len(), 45);
        assert_eq!(hex(&crc32[32..40]), "00000000595168b7");
        let mut dummy = BytesMut::new();
        encode_entry(&h, DigestType::Dummy, b"hello", &mut dummy);
        assert_eq!(dummy.len(), 37);
        for (d, bytes) in [
            (DigestType::Crc32c, &out),
            (DigestType::Crc32, &crc32),
            (DigestType::Dummy, &dummy),
        ] {
            assert_eq!(verify_entry(bytes, d, 5, 3), Ok(h));
            assert_eq!(verify_entry(bytes, d, 5, 4), Err(VerifyError::WrongIds));
        }
        let mut bad = out.to_vec();
        bad[40] ^= 1;
        assert_eq!(
            verify_entry(&bad, DigestType::Crc32c, 5, 3),
            Err(VerifyError::BadDigest)
        );
        assert_eq!(
            verify_entry(&bad[..10], DigestType::Crc32c, 5, 3),
            Err(VerifyError::TooShort)
        );
    }

    #[test]
    fn build_entry_reuses_the_arena() {
        let mut scratch = BytesMut::new();
        let h = EntryHeader {
            ledger_id: 1,
            entry_id: 0,
            last_add_confirmed: -1,
            length: 100,
        };
        let a = build_entry(&h, DigestType::Crc32c, &[7u8; 100], &mut scratch);
        let b = build_entry(&h, DigestType::Crc32c, &[7u8; 100], &mut scratch);
        assert_eq!(a, b);
        assert_eq!(a.len(), 136);
    }
}
