//! Per-ledger metadata (master key, fenced, explicit LAC, last entry id, LAC, deleted) and its
//! persisted form: a snapshot file `NNNNNNNNNNNNNNNN.meta` written whole at each flush that
//! changed any ledger. Metadata is small next to the data (tens of bytes per ledger), so a full
//! snapshot keeps the format trivial and recovery a single sequential read. Layout:
//! `FORMAT.md` §4.

use bytes::Bytes;

use crate::error::CorruptionKind;
use crate::format::*;

/// Everything the store persists about one ledger.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LedgerMeta {
    pub ledger: u64,
    pub master_key: Bytes,
    pub fenced: bool,
    /// Deleted: a tombstone. Lookups of its entries return nothing and index merges drop its
    /// records; the bookie refuses new writes to it.
    pub deleted: bool,
    /// The body of the last explicit LAC write (opaque), if any.
    pub explicit_lac: Option<Bytes>,
    /// Highest entry id stored (the store also raises it from flushed entries).
    pub last_entry: Option<u64>,
    pub lac: Option<u64>,
}

const F_FENCED: u8 = 1;
const F_DELETED: u8 = 2;
const F_LAST_ENTRY: u8 = 4;
const F_LAC: u8 = 8;
const F_EXPLICIT_LAC: u8 = 16;
const F_ALL: u8 = 31;

/// Encodes a snapshot of `ledgers` (any order). Returns the logical bytes (header, records,
/// CRC); the writer pads them to a block boundary.
pub fn encode_snapshot<'a>(
    ledgers: impl ExactSizeIterator<Item = &'a LedgerMeta>,
) -> Result<Vec<u8>, &'static str> {
    let mut out = vec![0u8; META_HEADER_BYTES];
    out[0..8].copy_from_slice(&META_MAGIC);
    put_u16(&mut out, 8, META_VERSION);
    put_u64(&mut out, 16, ledgers.len() as u64);
    for m in ledgers {
        let key_len = u16::try_from(m.master_key.len()).map_err(|_| "master key over 64 KiB")?;
        let lac_body = m.explicit_lac.as_deref().unwrap_or(&[]);
        let lac_len = u32::try_from(lac_body.len()).map_err(|_| "explicit LAC over 4 GiB")?;
        let mut r = [0u8; META_RECORD_FIXED_BYTES];
        put_u64(&mut r, 0, m.ledger);
        let flags = (m.fenced as u8 * F_FENCED)
            | (m.deleted as u8 * F_DELETED)
            | (m.last_entry.is_some() as u8 * F_LAST_ENTRY)
            | (m.lac.is_some() as u8 * F_LAC)
            | (m.explicit_lac.is_some() as u8 * F_EXPLICIT_LAC);
        r[8] = flags;
        put_u16(&mut r, 10, key_len);
        put_u32(&mut r, 12, lac_len);
        put_u64(&mut r, 16, m.last_entry.unwrap_or(0));
        put_u64(&mut r, 24, m.lac.unwrap_or(0));
        out.extend_from_slice(&r);
        out.extend_from_slice(&m.master_key);
        out.extend_from_slice(lac_body);
        out.resize(round_up(out.len() as u64, 8) as usize, 0);
    }
    let body_len = (out.len() - META_HEADER_BYTES) as u64;
    put_u64(&mut out, 24, body_len);
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// Decodes a snapshot's logical bytes; `Err((offset, kind))` on any failed check.
pub fn decode_snapshot(b: &[u8]) -> Result<Vec<LedgerMeta>, (u64, CorruptionKind)> {
    if b.len() < META_HEADER_BYTES + 4 {
        return Err((0, CorruptionKind::Truncated));
    }
    if b[0..8] != META_MAGIC {
        return Err((0, CorruptionKind::BadMagic));
    }
    let body_len = get_u64(b, 24);
    let end = (META_HEADER_BYTES as u64)
        .checked_add(body_len)
        .filter(|e| *e + 4 <= b.len() as u64);
    let Some(end) = end.map(|e| e as usize) else {
        return Err((24, CorruptionKind::BadLength));
    };
    if crc32c::crc32c(&b[..end]) != get_u32(b, end) {
        return Err((end as u64, CorruptionKind::BadChecksum));
    }
    if get_u16(b, 8) != META_VERSION {
        return Err((8, CorruptionKind::UnsupportedVersion));
    }
    if get_u16(b, 10) != 0 || get_u32(b, 12) != 0 {
        return Err((10, CorruptionKind::BadField));
    }
    let count = get_u64(b, 16);
    let mut out = Vec::with_capacity(count.min(1 << 20) as usize);
    let mut pos = META_HEADER_BYTES;
    for _ in 0..count {
        let at = pos as u64;
        if pos + META_RECORD_FIXED_BYTES > end {
            return Err((at, CorruptionKind::Truncated));
        }
        let r = &b[pos..pos + META_RECORD_FIXED_BYTES];
        let flags = r[8];
        if flags & !F_ALL != 0 || r[9] != 0 {
            return Err((at, CorruptionKind::BadField));
        }
        let key_len = get_u16(r, 10) as usize;
        let lac_len = get_u32(r, 12) as usize;
        let vend = pos + META_RECORD_FIXED_BYTES + key_len + lac_len;
        if vend > end || (flags & F_EXPLICIT_LAC == 0 && lac_len != 0) {
            return Err((at, CorruptionKind::BadLength));
        }
        let kstart = pos + META_RECORD_FIXED_BYTES;
        let last_entry = get_u64(r, 16);
        let lac = get_u64(r, 24);
        out.push(LedgerMeta {
            ledger: get_u64(r, 0),
            master_key: Bytes::copy_from_slice(&b[kstart..kstart + key_len]),
            fenced: flags & F_FENCED != 0,
            deleted: flags & F_DELETED != 0,
            explicit_lac: (flags & F_EXPLICIT_LAC != 0)
                .then(|| Bytes::copy_from_slice(&b[kstart + key_len..vend])),
            last_entry: (flags & F_LAST_ENTRY != 0).then_some(last_entry),
            lac: (flags & F_LAC != 0).then_some(lac),
        });
        pos = round_up(vend as u64, 8) as usize;
    }
    if pos != end {
        return Err((pos as u64, CorruptionKind::BadLength));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<LedgerMeta> {
        vec![
            LedgerMeta {
                ledger: 1,
                master_key: Bytes::from_static(b"01234567890123456789"),
                fenced: true,
                deleted: false,
                explicit_lac: Some(Bytes::from_static(b"lac body")),
                last_entry: Some(10),
                lac: Some(9),
            },
            LedgerMeta {
                ledger: u64::MAX,
                deleted: true,
                ..LedgerMeta::default()
            },
            LedgerMeta {
                ledger: 7,
                master_key: Bytes::from_static(b"k"),
                explicit_lac: Some(Bytes::new()),
                last_entry: Some(0),
                lac: Some(0),
                ..LedgerMeta::default()
            },
        ]
    }

    /// A snapshot round-trips, including empty and absent optional fields.
    #[test]
    fn round_trip() {
        let s = sample();
        let b = encode_snapshot(s.iter()).unwrap();
        assert_eq!(decode_snapshot(&b).unwrap(), s);
        let e = encode_snapshot([].iter()).unwrap();
        assert_eq!(decode_snapshot(&e).unwrap(), vec![]);
        // Trailing padding (the file is padded to a block) is ignored.
        let mut padded = b.clone();
        padded.resize(4096, 0);
        assert_eq!(decode_snapshot(&padded).unwrap(), s);
    }

    /// Every single bit flip is detected; every truncation is an error, never a panic.
    #[test]
    fn bit_flips_and_truncation() {
        let b = encode_snapshot(sample().iter()).unwrap();
        for bit in 0..b.len() * 8 {
            let mut c = b.clone();
            c[bit / 8] ^= 1 << (bit % 8);
            assert!(decode_snapshot(&c).is_err(), "bit {bit}");
        }
        for n in 0..b.len() {
            assert!(decode_snapshot(&b[..n]).is_err(), "len {n}");
        }
    }
}
