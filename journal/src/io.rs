//! Blocking helpers over the storage port, for open and recovery only (nothing else is in
//! flight then). The append path never blocks on these.

use storage::{align_down, AlignedBuf, Completion, FileId, IoError, Op, Storage, Wait};

/// Token of operations issued by these helpers.
pub(crate) const BLOCKING_TOKEN: u64 = u64::MAX;

/// Submits `op` and waits for its completion.
pub(crate) fn exec<S: Storage>(
    storage: &mut S,
    op: Op,
) -> Result<(usize, Option<AlignedBuf>), (IoError, Option<AlignedBuf>)> {
    storage.submit(BLOCKING_TOKEN, op)?;
    let mut out: Vec<Completion> = Vec::with_capacity(4);
    loop {
        if let Err(e) = storage.poll(&mut out, Wait::AtLeastOne { timeout_us: None }) {
            return Err((e, None));
        }
        if let Some(i) = out.iter().position(|c| c.token == BLOCKING_TOKEN) {
            let c = out.swap_remove(i);
            assert!(
                out.is_empty(),
                "blocking I/O found other operations in flight"
            );
            return match c.result {
                Ok(n) => Ok((n, c.buf)),
                Err(e) => Err((e, c.buf)),
            };
        }
        if storage.in_flight() == 0 && out.is_empty() {
            return Err((IoError::EIO, None));
        }
    }
}

/// Writes all of `buf` at `offset` and waits; a short write is an error.
pub(crate) fn write_all<S: Storage>(
    storage: &mut S,
    file: FileId,
    offset: u64,
    buf: AlignedBuf,
) -> Result<AlignedBuf, IoError> {
    let len = buf.len();
    match exec(storage, Op::Write { file, offset, buf }) {
        Ok((n, Some(buf))) if n == len => Ok(buf),
        Ok(_) => Err(IoError::EIO),
        Err((e, _)) => Err(e),
    }
}

/// Syncs a file's data and waits.
pub(crate) fn sync_data<S: Storage>(storage: &mut S, file: FileId) -> Result<(), IoError> {
    exec(storage, Op::SyncData { file })
        .map(|_| ())
        .map_err(|(e, _)| e)
}

/// Sequential reader of one file with a sliding window, for recovery scans.
pub(crate) struct FileReader {
    file: FileId,
    len: u64,
    window: Vec<u8>,
    window_start: u64,
    chunk: Option<AlignedBuf>,
}

const READ_CHUNK: usize = 1 << 20;

impl FileReader {
    pub(crate) fn new(file: FileId, len: u64) -> FileReader {
        FileReader {
            file,
            len,
            window: Vec::new(),
            window_start: 0,
            chunk: Some(AlignedBuf::new(READ_CHUNK)),
        }
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Up to `need` bytes at `pos`; fewer only at the end of the file.
    pub(crate) fn bytes<S: Storage>(
        &mut self,
        storage: &mut S,
        pos: u64,
        need: usize,
    ) -> Result<&[u8], IoError> {
        let want_end = (pos + need as u64).min(self.len);
        let window_end = self.window_start + self.window.len() as u64;
        if pos < self.window_start || pos > window_end {
            self.window.clear();
            self.window_start = align_down(pos as usize) as u64;
        } else if pos - self.window_start >= READ_CHUNK as u64 {
            // Drop what lies behind `pos`, keeping the window start aligned.
            let drop = align_down((pos - self.window_start) as usize);
            self.window.drain(..drop);
            self.window_start += drop as u64;
        }
        let mut short_reads = 0;
        while self.window_start + (self.window.len() as u64) < want_end {
            let offset = self.window_start + self.window.len() as u64;
            let mut buf = self
                .chunk
                .take()
                .unwrap_or_else(|| AlignedBuf::new(READ_CHUNK));
            buf.set_len(READ_CHUNK);
            let (n, buf) = match exec(
                storage,
                Op::Read {
                    file: self.file,
                    offset,
                    buf,
                },
            ) {
                Ok((n, Some(buf))) => (n, buf),
                Ok((_, None)) => return Err(IoError::EIO),
                Err((e, buf)) => {
                    self.chunk = buf;
                    return Err(e);
                }
            };
            let at_eof = offset + n as u64 >= self.len;
            let keep = if n < READ_CHUNK && !at_eof {
                // A short read in the middle of the file: keep the aligned part and go on.
                short_reads += 1;
                if short_reads > 64 {
                    self.chunk = Some(buf);
                    return Err(IoError::EIO);
                }
                align_down(n)
            } else {
                n
            };
            self.window.extend_from_slice(&buf[..keep]);
            self.chunk = Some(buf);
            if n == 0 {
                break;
            }
        }
        let from = (pos - self.window_start) as usize;
        let to = ((want_end.max(pos) - self.window_start) as usize).min(self.window.len());
        Ok(&self.window[from.min(to)..to])
    }
}
