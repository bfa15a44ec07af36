//! The MANIFEST: the one small file that says what the store is. It lists the live entry log
//! segments (with their committed lengths), the index runs, the metadata snapshot, and the
//! journal mark (every journal record below it is persisted in these files). A flush makes its
//! files durable first and then replaces the manifest atomically (write `MANIFEST.tmp`, sync,
//! rename over `MANIFEST`, sync the directory): the rename is the commit point of a flush.
//! Files it does not reference are garbage. Layout: `FORMAT.md` §5.

use crate::error::CorruptionKind;
use crate::format::*;

/// A live segment: id and committed length (entries beyond it are not part of the store).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentRef {
    pub id: u64,
    pub len: u64,
}

/// A live index run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunRef {
    pub id: u64,
    pub file_len: u64,
    pub records: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    /// Incremented by each manifest written.
    pub generation: u64,
    pub journal_mark: u64,
    /// The next file id to allocate (ids are never reused).
    pub next_file_id: u64,
    /// (id, logical length) of the metadata snapshot, if any.
    pub meta: Option<(u64, u64)>,
    /// Oldest first; the last one is appended to.
    pub segments: Vec<SegmentRef>,
    /// Oldest first; newer runs win.
    pub runs: Vec<RunRef>,
}

impl Manifest {
    /// Logical bytes (header, lists, CRC); the writer pads to a block.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; MANIFEST_HEADER_BYTES];
        b[0..8].copy_from_slice(&MANIFEST_MAGIC);
        put_u16(&mut b, 8, MANIFEST_VERSION);
        let total = MANIFEST_HEADER_BYTES + 16 * self.segments.len() + 24 * self.runs.len() + 4;
        put_u32(&mut b, 12, total as u32);
        put_u64(&mut b, 16, self.generation);
        put_u64(&mut b, 24, self.journal_mark);
        put_u64(&mut b, 32, self.next_file_id);
        let (mid, mlen) = self.meta.unwrap_or((0, 0));
        put_u64(&mut b, 40, mid);
        put_u64(&mut b, 48, mlen);
        put_u32(&mut b, 56, self.segments.len() as u32);
        put_u32(&mut b, 60, self.runs.len() as u32);
        for s in &self.segments {
            b.extend_from_slice(&s.id.to_le_bytes());
            b.extend_from_slice(&s.len.to_le_bytes());
        }
        for r in &self.runs {
            b.extend_from_slice(&r.id.to_le_bytes());
            b.extend_from_slice(&r.file_len.to_le_bytes());
            b.extend_from_slice(&r.records.to_le_bytes());
        }
        let crc = crc32c::crc32c(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        debug_assert_eq!(b.len(), total);
        b
    }

    /// Decodes a manifest (trailing padding ignored); `Err((offset, kind))` on failure.
    pub fn decode(b: &[u8]) -> Result<Manifest, (u64, CorruptionKind)> {
        if b.len() < MANIFEST_HEADER_BYTES + 4 {
            return Err((0, CorruptionKind::Truncated));
        }
        if b[0..8] != MANIFEST_MAGIC {
            return Err((0, CorruptionKind::BadMagic));
        }
        let total = get_u32(b, 12) as usize;
        if total < MANIFEST_HEADER_BYTES + 4 || total > b.len() {
            return Err((12, CorruptionKind::BadLength));
        }
        if crc32c::crc32c(&b[..total - 4]) != get_u32(b, total - 4) {
            return Err(((total - 4) as u64, CorruptionKind::BadChecksum));
        }
        if get_u16(b, 8) != MANIFEST_VERSION {
            return Err((8, CorruptionKind::UnsupportedVersion));
        }
        if get_u16(b, 10) != 0 {
            return Err((10, CorruptionKind::BadField));
        }
        let nseg = get_u32(b, 56) as usize;
        let nrun = get_u32(b, 60) as usize;
        if MANIFEST_HEADER_BYTES as u64 + 16 * nseg as u64 + 24 * nrun as u64 + 4 != total as u64 {
            return Err((56, CorruptionKind::BadLength));
        }
        let mut pos = MANIFEST_HEADER_BYTES;
        let mut segments = Vec::with_capacity(nseg);
        for _ in 0..nseg {
            segments.push(SegmentRef {
                id: get_u64(b, pos),
                len: get_u64(b, pos + 8),
            });
            pos += 16;
        }
        let mut runs = Vec::with_capacity(nrun);
        for _ in 0..nrun {
            runs.push(RunRef {
                id: get_u64(b, pos),
                file_len: get_u64(b, pos + 8),
                records: get_u64(b, pos + 16),
            });
            pos += 24;
        }
        let mid = get_u64(b, 40);
        let m = Manifest {
            generation: get_u64(b, 16),
            journal_mark: get_u64(b, 24),
            next_file_id: get_u64(b, 32),
            meta: (mid != 0).then(|| (mid, get_u64(b, 48))),
            segments,
            runs,
        };
        // Every referenced id must be below next_file_id, and ids unique and increasing.
        let ids = m
            .segments
            .iter()
            .map(|s| s.id)
            .chain(m.runs.iter().map(|r| r.id))
            .chain(m.meta.map(|x| x.0));
        let mut all: Vec<u64> = ids.collect();
        if all.iter().any(|&id| id == 0 || id >= m.next_file_id) {
            return Err((32, CorruptionKind::BadField));
        }
        // Segments are in id order; runs are in age order, which a merge makes differ from id
        // order (the merged run gets a new id but keeps its place).
        if m.segments.windows(2).any(|w| w[0].id >= w[1].id) {
            return Err((MANIFEST_HEADER_BYTES as u64, CorruptionKind::Unsorted));
        }
        all.sort_unstable();
        if all.windows(2).any(|w| w[0] == w[1]) {
            return Err((MANIFEST_HEADER_BYTES as u64, CorruptionKind::BadField));
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        Manifest {
            generation: 5,
            journal_mark: 123_456,
            next_file_id: 20,
            meta: Some((19, 4100)),
            segments: vec![
                SegmentRef { id: 1, len: 8192 },
                SegmentRef {
                    id: 3,
                    len: 1 << 30,
                },
            ],
            runs: vec![
                RunRef {
                    id: 2,
                    file_len: 12288,
                    records: 10,
                },
                RunRef {
                    id: 18,
                    file_len: 8192,
                    records: 1,
                },
            ],
        }
    }

    /// A manifest round-trips, with and without padding, and an empty one too.
    #[test]
    fn round_trip() {
        let m = sample();
        let mut b = m.encode();
        assert_eq!(Manifest::decode(&b).unwrap(), m);
        b.resize(4096, 0);
        assert_eq!(Manifest::decode(&b).unwrap(), m);
        let e = Manifest {
            next_file_id: 1,
            ..Manifest::default()
        };
        assert_eq!(Manifest::decode(&e.encode()).unwrap(), e);
    }

    /// Every bit flip and every truncation is detected; a reference to an unallocated id too.
    #[test]
    fn bit_flips_truncation_and_bad_ids() {
        let b = sample().encode();
        for bit in 0..b.len() * 8 {
            let mut c = b.clone();
            c[bit / 8] ^= 1 << (bit % 8);
            assert!(Manifest::decode(&c).is_err(), "bit {bit}");
        }
        for n in 0..b.len() {
            assert!(Manifest::decode(&b[..n]).is_err(), "len {n}");
        }
        let mut m = sample();
        m.next_file_id = 19;
        assert_eq!(
            Manifest::decode(&m.encode()),
            Err((32, CorruptionKind::BadField))
        );
    }
}
