//! Positioned reads of a Java file: whole ranges or nothing (a short read is the end of what
//! was written, never half a record), and a windowed cursor for sequential scans.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Reads `len` bytes at `pos`; `None` when the file ends first.
pub(crate) fn read_exact_at(file: &File, pos: u64, len: usize) -> io::Result<Option<Vec<u8>>> {
    let mut buf = vec![0u8; len];
    let mut done = 0;
    while done < len {
        match file.read_at(&mut buf[done..], pos + done as u64) {
            Ok(0) => return Ok(None),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some(buf))
}

/// Sequential reads through a window of the file, for scans of entry logs and journals.
pub(crate) struct Cursor<'a> {
    file: &'a File,
    len: u64,
    window_start: u64,
    window: Vec<u8>,
    window_bytes: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(file: &'a File, len: u64, window_bytes: usize) -> Cursor<'a> {
        Cursor {
            file,
            len,
            window_start: 0,
            window: Vec::new(),
            window_bytes,
        }
    }

    /// The `n` bytes at `pos`, or `None` if the file ends first.
    pub(crate) fn bytes(&mut self, pos: u64, n: usize) -> io::Result<Option<&[u8]>> {
        if pos + n as u64 > self.len {
            return Ok(None);
        }
        let end = self.window_start + self.window.len() as u64;
        if pos < self.window_start || pos + n as u64 > end {
            let want = n.max(self.window_bytes).min((self.len - pos) as usize);
            match read_exact_at(self.file, pos, want)? {
                Some(w) => {
                    self.window = w;
                    self.window_start = pos;
                }
                None => return Ok(None),
            }
        }
        let at = (pos - self.window_start) as usize;
        Ok(Some(&self.window[at..at + n]))
    }
}
