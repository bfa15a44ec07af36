//! `Image`: one file's bytes as a sparse map of pages, plus a length.
//!
//! Sparse, so that preallocating a 1 GiB journal segment costs nothing. Invariant: no byte at
//! or beyond `len` is non-zero in a stored page, so growing `len` exposes zeros.

use std::collections::BTreeMap;

const PAGE: u64 = crate::ALIGN as u64;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Image {
    len: u64,
    pages: BTreeMap<u64, Box<[u8]>>,
}

impl Image {
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Copies bytes from `offset` into `out`, stopping at the end of the file. Returns the
    /// number of bytes copied.
    pub(crate) fn read(&self, offset: u64, out: &mut [u8]) -> usize {
        let n = self.len.saturating_sub(offset).min(out.len() as u64) as usize;
        let mut done = 0;
        while done < n {
            let pos = offset + done as u64;
            let (page, within) = (pos / PAGE, (pos % PAGE) as usize);
            let take = (PAGE as usize - within).min(n - done);
            match self.pages.get(&page) {
                Some(p) => out[done..done + take].copy_from_slice(&p[within..within + take]),
                None => out[done..done + take].fill(0),
            }
            done += take;
        }
        n
    }

    /// Writes `data` at `offset`, growing the file when the write ends beyond it.
    pub(crate) fn write(&mut self, offset: u64, data: &[u8]) {
        let mut done = 0;
        while done < data.len() {
            let pos = offset + done as u64;
            let (page, within) = (pos / PAGE, (pos % PAGE) as usize);
            let take = (PAGE as usize - within).min(data.len() - done);
            let p = self
                .pages
                .entry(page)
                .or_insert_with(|| vec![0u8; PAGE as usize].into_boxed_slice());
            p[within..within + take].copy_from_slice(&data[done..done + take]);
            done += take;
        }
        self.len = self.len.max(offset + data.len() as u64);
    }

    /// Truncates or extends (with zeros) to `len`.
    pub(crate) fn set_len(&mut self, len: u64) {
        if len < self.len {
            let first_gone = len.div_ceil(PAGE);
            let _ = self.pages.split_off(&first_gone);
            if len & (PAGE - 1) != 0 {
                if let Some(p) = self.pages.get_mut(&(len / PAGE)) {
                    p[(len % PAGE) as usize..].fill(0);
                }
            }
        }
        self.len = len;
    }

    /// The whole file as one vector (diagnostics only).
    pub(crate) fn to_vec(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len as usize];
        self.read(0, &mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_read_write_truncate() {
        let mut img = Image::default();
        img.write(8192, &[7u8; 5000]);
        assert_eq!(img.len(), 13192);
        let v = img.to_vec();
        assert!(v[..8192].iter().all(|&b| b == 0));
        assert!(v[8192..].iter().all(|&b| b == 7));
        img.set_len(8200);
        img.set_len(20000);
        let v = img.to_vec();
        assert!(v[8192..8200].iter().all(|&b| b == 7));
        assert!(v[8200..].iter().all(|&b| b == 0));
        let mut out = [1u8; 100];
        assert_eq!(img.read(19950, &mut out), 50);
        assert_eq!(img.read(30000, &mut out), 0);
    }
}
